//! The host's credentials: the model credential, read from the
//! environment or from `{home}/.env`, held only in the gateway's memory,
//! added to upstream requests, never printed; and what every credential g2
//! knows needs from the rest of the host — redacted from what is stored
//! ([`redactor`]), kept in files only their owner can read ([`exposed`]).
//! None of them enters a container (`container::project`).
//!
//! **Who defines a credential's variable: its owner.** The gateway names
//! its model keys here; each channel names its own tokens in its module
//! and registers them with [`inventory::submit!`] as a [`SecretVariable`].
//! [`secret_variables`] collects every registration, wherever it is, so the
//! redactor, `exposed`, `g2 doctor` and the container's tests read one
//! list, and a new channel adds its tokens where it reads them. A
//! registration rather than a list here, because the channels sit above
//! the gateway (layer 7 over 2, ARCHITECTURE.md): a list here would have
//! to import them, and one assembled in `host.rs` would miss `g2 archive`
//! and `g2 memory`, which build a redactor without a host.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use axum::http::{HeaderMap, HeaderValue, header};
use g2_core::privacy::Redactor;

use crate::config::Settings;
use crate::home::Home;

/// The model key (`x-api-key`).
pub const API_KEY: &str = "ANTHROPIC_API_KEY";
/// The model key sent as `Authorization: Bearer`.
pub const AUTH_TOKEN: &str = "ANTHROPIC_AUTH_TOKEN";

/// A variable g2 reads a secret from (the environment or `{home}/.env`),
/// registered by the module that reads it:
/// `inventory::submit! { SecretVariable(NAME) }`.
#[derive(Debug)]
pub struct SecretVariable(pub &'static str);

inventory::collect!(SecretVariable);
inventory::submit! { SecretVariable(API_KEY) }
inventory::submit! { SecretVariable(AUTH_TOKEN) }

/// Every registered secret variable, sorted, each once.
pub fn secret_variables() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = inventory::iter::<SecretVariable>
        .into_iter()
        .map(|v| v.0)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Every credential g2 holds: the API token and the values of the
/// [`secret_variables`] that are set.
pub fn all(home: &Path, settings: &Settings) -> Vec<String> {
    settings
        .api
        .token
        .clone()
        .into_iter()
        .chain(
            secret_variables()
                .into_iter()
                .filter_map(|name| secret(home, name).map(|(v, _)| v)),
        )
        .collect()
}

/// The secret patterns plus every credential the host holds ([`all`]):
/// what the host cleans archives and captured memory with, so a credential
/// is redacted even in a shape no pattern knows.
pub fn redactor(home: &Path, settings: &Settings) -> Redactor {
    Redactor::with_literals(all(home, settings))
}

/// Files of the home that hold a credential and that every user of the
/// machine can read, each in words with what to do.
pub fn exposed(home: &Home, settings: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    let file = home.settings_file();
    let holds_token = |text: &str| {
        settings
            .api
            .token
            .as_deref()
            .is_some_and(|t| !t.is_empty() && text.contains(t))
    };
    if let Some(mode) = world_readable(&file)
        && let Ok(text) = std::fs::read_to_string(&file)
    {
        // A token pasted into the file (a comment, a wrong key) too; a
        // value too short to be a token would match by chance.
        let pasted = secret_variables().into_iter().filter(|name| {
            secret(home.root(), name).is_some_and(|(v, _)| v.len() >= 8 && text.contains(&v))
        });
        let held: Vec<&str> = holds_token(&text)
            .then_some("api.token")
            .into_iter()
            .chain(pasted)
            .collect();
        if !held.is_empty() {
            out.push(format!(
                "{} holds {} and every user can read it (mode {mode:o}): chmod 600 {}",
                file.display(),
                held.join(", "),
                file.display()
            ));
        }
    }
    // The store's password belongs in PGPASSWORD, never in g2.toml.
    if let Some(pw) = crate::store::Backend::password(&settings.store.url)
        && std::fs::read_to_string(&file).is_ok_and(|t| t.contains(&pw))
    {
        out.push(format!(
            "{}: store.url holds the PostgreSQL password: drop it from the URL and set PGPASSWORD (the environment or .env)",
            file.display()
        ));
    }
    let env = home.root().join(".env");
    if let Some(mode) = world_readable(&env)
        && dotenvy::from_path_iter(&env)
            .is_ok_and(|vars| vars.flatten().any(|(_, v)| !v.trim().is_empty()))
    {
        out.push(format!(
            "{} holds secrets and every user can read it (mode {mode:o}): chmod 600 {}",
            env.display(),
            env.display()
        ));
    }
    out
}

/// The permission bits of a file others may read, None otherwise (or when
/// it is not there).
fn world_readable(path: &Path) -> Option<u32> {
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o004 != 0).then_some(mode)
}

/// Where the credential came from (for `g2 doctor`), never the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Environment,
    DotEnv,
}

/// A secret the host holds (a model credential, a bot token): from the
/// environment, else from `{home}/.env`, trimmed; empty counts as unset.
pub fn secret(home: &Path, name: &str) -> Option<(String, Source)> {
    if let Some(v) = std::env::var(name).ok().filter(|v| !v.trim().is_empty()) {
        return Some((v.trim().to_string(), Source::Environment));
    }
    let file = dotenvy::from_path_iter(home.join(".env")).ok()?;
    file.filter_map(Result::ok)
        .filter(|(k, v)| k == name && !v.trim().is_empty())
        .last()
        .map(|(_, v)| (v.trim().to_string(), Source::DotEnv))
}

#[derive(Clone)]
pub struct Credential {
    kind: Kind,
    value: String,
    pub source: Source,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `ANTHROPIC_API_KEY`, sent as `x-api-key`.
    ApiKey,
    /// `ANTHROPIC_AUTH_TOKEN`, sent as `Authorization: Bearer`.
    AuthToken,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credential({}, from {:?}, redacted)",
            self.variable(),
            self.source
        )
    }
}

impl Credential {
    /// Looks in the environment, then in `{home}/.env`; `ANTHROPIC_API_KEY`
    /// before `ANTHROPIC_AUTH_TOKEN`. Empty values count as unset.
    pub fn find(home: &Path) -> Option<Credential> {
        [(API_KEY, Kind::ApiKey), (AUTH_TOKEN, Kind::AuthToken)]
            .into_iter()
            .find_map(|(name, kind)| {
                secret(home, name).map(|(value, source)| Credential {
                    kind,
                    value,
                    source,
                })
            })
    }

    /// The variable it came from.
    pub fn variable(&self) -> &'static str {
        match self.kind {
            Kind::ApiKey => API_KEY,
            Kind::AuthToken => AUTH_TOKEN,
        }
    }

    /// Adds the credential to upstream request headers, marked sensitive so
    /// no debug output of the headers shows it.
    pub fn apply(&self, headers: &mut HeaderMap) {
        let value = match self.kind {
            Kind::ApiKey => self.value.clone(),
            Kind::AuthToken => format!("Bearer {}", self.value),
        };
        if let Ok(mut v) = HeaderValue::from_str(&value) {
            v.set_sensitive(true);
            match self.kind {
                Kind::ApiKey => headers.insert("x-api-key", v),
                Kind::AuthToken => headers.insert(header::AUTHORIZATION, v),
            };
        }
    }

    /// Removes every occurrence of the credential from a text.
    pub fn scrub(&self, text: &str) -> String {
        if self.value.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.value, "[redacted]")
    }

    #[cfg(test)]
    pub(crate) fn for_test(value: &str) -> Self {
        Credential {
            kind: Kind::ApiKey,
            value: value.into(),
            source: Source::Environment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_holding_a_credential_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        let toml = d.path().join("g2.toml");
        let write = |text: &str| crate::home::write_if_missing(&toml, text, 0o600).unwrap();
        assert!(write("[api]\ntoken = \"tok-0123456789abcdef\"\n"));
        assert!(!write("other"), "never replaced");
        let mode = std::fs::metadata(&toml).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let settings = Settings::load(d.path(), None).unwrap();
        assert!(exposed(&home, &settings).is_empty());
        std::fs::set_permissions(&toml, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(d.path().join(".env"), "TELEGRAM_BOT_TOKEN=1:AAx\n").unwrap();
        std::fs::set_permissions(
            d.path().join(".env"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let found = exposed(&home, &settings);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("holds api.token") && found[0].contains("mode 644"));
        assert!(found[1].contains(".env holds secrets"));
        // Readable by its group only, or holding no secret: not exposed.
        std::fs::set_permissions(&toml, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::write(d.path().join(".env"), "# nothing yet\n").unwrap();
        assert!(exposed(&home, &settings).is_empty());
    }

    #[test]
    fn each_owner_registers_its_variables() {
        // The gateway's own, and the channels' (registered in their
        // modules, named here as strings: the gateway imports no channel).
        let names = secret_variables();
        assert_eq!(
            names,
            [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "DISCORD_BOT_TOKEN",
                "SLACK_APP_TOKEN",
                "SLACK_BOT_TOKEN",
                "TELEGRAM_BOT_TOKEN",
                "WHATSAPP_ACCESS_TOKEN",
                "WHATSAPP_APP_SECRET",
                "WHATSAPP_VERIFY_TOKEN",
            ]
        );
    }

    #[test]
    fn a_readable_settings_file_holding_a_channels_token_is_exposed() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        std::fs::write(
            d.path().join(".env"),
            "DISCORD_BOT_TOKEN=odd-discord-credential-0077\n",
        )
        .unwrap();
        std::fs::set_permissions(
            d.path().join(".env"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let toml = d.path().join("g2.toml");
        std::fs::write(&toml, "# token: odd-discord-credential-0077\n").unwrap();
        std::fs::set_permissions(&toml, std::fs::Permissions::from_mode(0o644)).unwrap();
        let settings = Settings::load(d.path(), None).unwrap();
        let found = exposed(&home, &settings);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("holds DISCORD_BOT_TOKEN"), "{found:?}");
        assert!(!found[0].contains("odd-discord"), "never the value");
        // The redactor knows the channel's token too.
        let r = redactor(d.path(), &settings);
        assert_eq!(
            r.redact("pasted odd-discord-credential-0077 here"),
            "pasted [redacted:credential] here"
        );
    }

    #[test]
    fn never_shown_and_scrubbed() {
        let c = Credential::for_test("sk-ant-secret-123");
        assert!(!format!("{c:?}").contains("secret"));
        assert_eq!(c.scrub("bad key sk-ant-secret-123!"), "bad key [redacted]!");
        let mut h = HeaderMap::new();
        c.apply(&mut h);
        assert!(h["x-api-key"].is_sensitive());
        assert!(!format!("{h:?}").contains("secret"));
    }

    #[test]
    fn the_redactor_knows_the_hosts_credential() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(".env"),
            "ANTHROPIC_AUTH_TOKEN=odd-shaped-credential-0042\n",
        )
        .unwrap();
        // The environment may hold a key of its own, which wins: whichever
        // the gateway would use is the one redacted.
        let value = Credential::find(home.path()).unwrap().value;
        let settings = Settings {
            api: crate::config::ApiSettings {
                token: Some("api-token-0123456789".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = redactor(home.path(), &settings);
        assert_eq!(
            r.redact("curl -H 'authorization: x api-token-0123456789'"),
            "curl -H 'authorization: x [redacted:credential]'"
        );
        let text = format!("the agent printed {value} here");
        assert_eq!(
            r.redact(&text),
            "the agent printed [redacted:credential] here"
        );
        assert!(!format!("{r:?}").contains(&value), "never shown");
    }
}
