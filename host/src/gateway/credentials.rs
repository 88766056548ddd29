//! The host's model credential: read from the environment or from
//! `{home}/.env`, held only in the gateway's memory, added to upstream
//! requests, never printed.

use std::fmt;
use std::path::Path;

use axum::http::{HeaderMap, HeaderValue, header};
use g2_core::privacy::Redactor;

/// The secret patterns plus the host's own credential, wherever it was
/// found: what the host cleans archives and captured memory with, so the
/// credential is redacted even in a shape no pattern knows.
pub fn redactor(home: &Path) -> Redactor {
    Redactor::with_literals(
        Credential::find(home)
            .map(|c| c.value)
            .into_iter()
            .chain(secret(home, crate::channels::telegram::TOKEN_VARIABLE).map(|(v, _)| v)),
    )
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
        let r = redactor(home.path());
        let text = format!("the agent printed {value} here");
        assert_eq!(
            r.redact(&text),
            "the agent printed [redacted:credential] here"
        );
        assert!(!format!("{r:?}").contains(&value), "never shown");
    }
}
