//! Which provider serves the models: the one `gateway.provider` names,
//! else `anthropic` when a credential is found (the environment, then the
//! home's `.env`), else `offline`. [`choose`] only decides and says why
//! (for `g2 doctor` and the startup log); [`Gateway::new`] builds it.
//!
//! [`Gateway::new`]: super::Gateway::new

use std::path::Path;

use super::credentials::{self, Credential};
use crate::config::{GatewaySettings, ProviderKind};
use crate::{Error, Result};

/// Which provider the settings and environment select, and why.
#[derive(Debug, Clone)]
pub struct Choice {
    pub kind: ProviderKind,
    pub credential: Option<Credential>,
    /// One line for `g2 doctor` and the startup log.
    pub reason: String,
}

/// Picks the provider: the configured one, else `anthropic` when a
/// credential is found, else `offline`. Asking for `anthropic` without a
/// credential is an error.
pub fn choose(settings: &GatewaySettings, home: &Path) -> Result<Choice> {
    let credential = Credential::find(home);
    let from = |c: &Credential| match c.source {
        credentials::Source::Environment => format!("{} from the environment", c.variable()),
        credentials::Source::DotEnv => {
            format!("{} from {}", c.variable(), home.join(".env").display())
        }
    };
    let (kind, reason) = match (settings.provider, &credential) {
        (Some(ProviderKind::Offline), _) => (
            ProviderKind::Offline,
            "offline (gateway.provider)".to_string(),
        ),
        (Some(ProviderKind::Anthropic), Some(c)) => (
            ProviderKind::Anthropic,
            format!(
                "anthropic at {} ({}; gateway.provider)",
                settings.upstream_url,
                from(c)
            ),
        ),
        (Some(ProviderKind::Anthropic), None) => {
            return Err(Error::Config(format!(
                "gateway.provider is anthropic but neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set \
                 in the environment or in {}",
                home.join(".env").display()
            )));
        }
        (None, Some(c)) => (
            ProviderKind::Anthropic,
            format!("anthropic at {} ({})", settings.upstream_url, from(c)),
        ),
        (None, None) => (
            ProviderKind::Offline,
            "offline (no ANTHROPIC_API_KEY configured)".to_string(),
        ),
    };
    Ok(Choice {
        kind,
        credential,
        reason,
    })
}
