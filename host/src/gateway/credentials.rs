//! The host's credentials: the model credential, read from the
//! environment or from `{home}/.env`, held only in the gateway's memory,
//! added to upstream requests, never printed; and what every credential g2
//! knows needs from the rest of the host — redacted from what is stored
//! ([`redactor`]), kept in files only their owner can read ([`exposed`]).
//! None of them enters a container
//! (`container::project`).

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use axum::http::{HeaderMap, HeaderValue, header};
use g2_core::privacy::Redactor;

use crate::config::Settings;
use crate::home::Home;

/// Where the Telegram bot token is read from. The channels' token names
/// are defined here, below the channels, so that this list can name them.
pub const TELEGRAM_TOKEN: &str = "TELEGRAM_BOT_TOKEN";
/// WhatsApp's Cloud API access token (sends).
pub const WHATSAPP_ACCESS_TOKEN: &str = "WHATSAPP_ACCESS_TOKEN";
/// The Discord bot's token (the gateway and the REST API).
pub const DISCORD_TOKEN: &str = "DISCORD_BOT_TOKEN";
/// The Meta app's secret (signs the webhook's POSTs).
pub const WHATSAPP_APP_SECRET: &str = "WHATSAPP_APP_SECRET";
/// What Meta's webhook verification must carry.
pub const WHATSAPP_VERIFY_TOKEN: &str = "WHATSAPP_VERIFY_TOKEN";
/// Slack's bot token (`xoxb-`: the Web API).
pub const SLACK_BOT_TOKEN: &str = "SLACK_BOT_TOKEN";
/// Slack's app-level token (`xapp-`: opens Socket Mode connections).
pub const SLACK_APP_TOKEN: &str = "SLACK_APP_TOKEN";

/// Every variable g2 reads a secret from (the environment or `{home}/.env`):
/// the model credential and the channels' tokens. A new channel adds its own.
pub const SECRET_VARIABLES: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    TELEGRAM_TOKEN,
    WHATSAPP_ACCESS_TOKEN,
    WHATSAPP_APP_SECRET,
    WHATSAPP_VERIFY_TOKEN,
    DISCORD_TOKEN,
    SLACK_BOT_TOKEN,
    SLACK_APP_TOKEN,
];

/// Every credential g2 holds: the API token and the values of
/// [`SECRET_VARIABLES`] that are set.
pub fn all(home: &Path, settings: &Settings) -> Vec<String> {
    settings
        .api
        .token
        .clone()
        .into_iter()
        .chain(
            SECRET_VARIABLES
                .iter()
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
        && std::fs::read_to_string(&file).is_ok_and(|t| holds_token(&t))
    {
        out.push(format!(
            "{} holds api.token and every user can read it (mode {mode:o}): chmod 600 {}",
            file.display(),
            file.display()
        ));
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
        [
            ("ANTHROPIC_API_KEY", Kind::ApiKey),
            ("ANTHROPIC_AUTH_TOKEN", Kind::AuthToken),
        ]
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
            Kind::ApiKey => "ANTHROPIC_API_KEY",
            Kind::AuthToken => "ANTHROPIC_AUTH_TOKEN",
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
