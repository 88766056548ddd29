//! `[gateway]`: the model provider and the groups' budgets.

use serde::{Deserialize, Serialize};

/// Which model provider the gateway serves.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Forward to the Anthropic Messages API with the host's key.
    Anthropic,
    /// g2's built-in deterministic model: no network, no account.
    Offline,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Offline => "offline",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySettings {
    /// `anthropic` or `offline`. Unset: `anthropic` when an API key is
    /// configured (environment or `{home}/.env`), else `offline`.
    /// Short environment form: `G2_PROVIDER`.
    pub provider: Option<ProviderKind>,
    /// Model every request is sent to, whatever the agent asked for. Unset:
    /// the agent's choice. Short environment form: `G2_MODEL`.
    pub model: Option<String>,
    /// Where the `anthropic` provider forwards to.
    pub upstream_url: String,
    /// Loopback TCP address of the gateway for local use (`g2 gateway`).
    pub listen: String,
    /// Largest request body accepted.
    pub max_request_bytes: usize,
    /// Requests one group may have in flight at once.
    pub max_concurrent: u32,
    /// Tokens (input + output) one group may use per UTC day. Unset: no limit.
    pub daily_tokens: Option<u64>,
    /// Per-group overrides: `[gateway.groups.family] daily_tokens = 100000`.
    pub groups: std::collections::BTreeMap<String, GroupLimits>,
    /// A request's headers must be complete within this time of its first byte.
    pub header_timeout_ms: u64,
    /// A request's body must be complete within this time of its headers.
    pub body_timeout_ms: u64,
    /// A kept-alive connection with nothing in flight is closed after this.
    pub idle_timeout_secs: u64,
    /// Connections open at once on each listener (the TCP address, each
    /// group's socket); more wait to be accepted.
    pub max_connections: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GroupLimits {
    pub max_concurrent: Option<u32>,
    pub daily_tokens: Option<u64>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            provider: None,
            model: None,
            upstream_url: "https://api.anthropic.com".into(),
            listen: "127.0.0.1:4180".into(),
            max_request_bytes: 32 * 1024 * 1024,
            max_concurrent: 4,
            daily_tokens: None,
            groups: Default::default(),
            header_timeout_ms: 10_000,
            body_timeout_ms: 60_000,
            idle_timeout_secs: 60,
            max_connections: 64,
        }
    }
}

impl GatewaySettings {
    /// The limits that apply to one group.
    pub fn limits_for(&self, group: &str) -> GroupLimits {
        let o = self.groups.get(group).cloned().unwrap_or_default();
        GroupLimits {
            max_concurrent: Some(o.max_concurrent.unwrap_or(self.max_concurrent)),
            daily_tokens: o.daily_tokens.or(self.daily_tokens),
        }
    }
}
