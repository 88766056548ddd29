//! `[memory]`: capture, processing, recall and injection of each group's
//! memory.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::INJECT_WAIT_MS;

/// Memory capture (`[memory]`): what is kept of each group's agent
/// sessions and for how long.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySettings {
    /// How often the recovery jobs run.
    pub recovery_interval_secs: u64,
    /// A prompt batch with no activity for this long is completed.
    pub batch_idle_secs: u64,
    /// A session with no activity for this long is completed (`stale`).
    pub session_idle_secs: u64,
    /// Sessions that ended longer ago than this are deleted with everything
    /// captured in them (unset: kept forever).
    pub retention_days: Option<u32>,
    /// Tools whose calls are not captured (bookkeeping, questions, g2's own
    /// session tools).
    pub skip_tools: Vec<String>,
    /// How often the processor looks for batches to extract and sessions
    /// to summarise.
    pub process_interval_secs: u64,
    /// Jobs of each kind one processor pass takes on.
    pub max_concurrent: usize,
    /// Tokens (about 4 characters each) of the memory block injected when a
    /// session starts.
    pub inject_tokens: usize,
    /// Tokens of the memory injected with a prompt (relevant hits only).
    pub prompt_inject_tokens: usize,
    /// How long (ms) the memory hooks wait for the host before the turn
    /// goes on without memory (1 to 10,000).
    pub inject_wait_ms: u64,
    /// Model the `anthropic` provider extracts observations and summaries
    /// with (one call per prompt batch, one per session summary); the
    /// offline provider answers with its own rules whatever this says.
    pub model: String,
    /// Tokens extraction may use per group and UTC day (counted apart from,
    /// and also against, the group's `gateway.daily_tokens`); once used,
    /// the group's jobs wait for the next day. 0 turns extraction off.
    pub daily_tokens: u64,
    /// Per-group overrides: `[memory.groups.family] daily_tokens = 50000`.
    pub groups: std::collections::BTreeMap<String, MemoryGroupLimits>,
    /// Recall by meaning: `local` embeds with the model on this machine,
    /// `off` recalls by words only (docs/recall.md).
    pub embeddings: EmbeddingsMode,
    /// The IANA timezone memory is dated in: the days an archive shows and
    /// a hit is said on, and what "yesterday" or "last Tuesday" means in a
    /// question. Per group: `[memory.groups.family] timezone = "…"`.
    pub timezone: String,
    /// The embedding model's folder. Default: `tools/models/all-minilm-l6-v2`
    /// as `scripts/setup.sh` unpacks it (under the home, or beside the `g2`
    /// binary's project).
    pub embedding_model: Option<PathBuf>,
}

/// `memory.embeddings`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingsMode {
    #[default]
    Local,
    Off,
}

/// What `[memory.groups.<folder>]` may override.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryGroupLimits {
    pub daily_tokens: Option<u64>,
    pub timezone: Option<String>,
}

impl MemorySettings {
    /// The extraction tokens one group may use per day.
    pub fn daily_tokens_for(&self, group: &str) -> u64 {
        self.groups
            .get(group)
            .and_then(|g| g.daily_tokens)
            .unwrap_or(self.daily_tokens)
    }

    /// The timezone a group's memory is dated in (its own, else
    /// `timezone`; UTC for a name that is not one, which loading refuses).
    pub fn timezone_for(&self, group: &str) -> chrono_tz::Tz {
        self.groups
            .get(group)
            .and_then(|g| g.timezone.as_deref())
            .unwrap_or(&self.timezone)
            .parse()
            .unwrap_or(chrono_tz::Tz::UTC)
    }

    /// Every timezone named is an IANA one.
    pub(crate) fn check_timezones(&self) -> Result<(), String> {
        let named = std::iter::once(("memory.timezone".to_string(), &self.timezone)).chain(
            self.groups.iter().filter_map(|(g, l)| {
                l.timezone
                    .as_ref()
                    .map(|t| (format!("memory.groups.{g}.timezone"), t))
            }),
        );
        for (key, tz) in named {
            if tz.parse::<chrono_tz::Tz>().is_err() {
                return Err(format!(
                    "{key} {tz:?}: use an IANA name such as \"Europe/Berlin\" or \"UTC\""
                ));
            }
        }
        Ok(())
    }
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            recovery_interval_secs: 60,
            batch_idle_secs: 5 * 60,
            session_idle_secs: 60 * 60,
            retention_days: None,
            skip_tools: g2_core::wire::SKIPPED_TOOLS
                .iter()
                .map(ToString::to_string)
                .collect(),
            process_interval_secs: 5,
            max_concurrent: 1,
            inject_tokens: 1_500,
            prompt_inject_tokens: 500,
            inject_wait_ms: INJECT_WAIT_MS,
            model: "claude-haiku-4-5".into(),
            daily_tokens: 200_000,
            groups: Default::default(),
            embeddings: EmbeddingsMode::Local,
            embedding_model: None,
            timezone: "UTC".into(),
        }
    }
}
