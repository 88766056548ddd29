//! Settings: built-in defaults, then `g2.toml` in the home directory (or the
//! file named by `--config` / `G2_CONFIG`), then `G2_*` environment
//! variables. Nested keys use a double underscore in the environment:
//! `G2_ARCHIVE__MAX_MESSAGE_CHARS=4000` sets `[archive] max_message_chars`.
//!
//! A crate of its own below the host, which re-exports it as its `config`
//! module: it imports nothing from the host, so every part of the host,
//! and the store, reads settings without a cycle.
//!
//! Files: the larger sections have one each (`channels.rs`, `container.rs`,
//! `gateway.rs`, `memory.rs`); the small ones, [`Settings`], loading and
//! its checks are here.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

mod channels;
mod container;
mod gateway;
mod media;
mod memory;

pub use channels::*;
pub use container::*;
pub use gateway::*;
pub use media::*;
pub use memory::*;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Settings that could not be read, or do not hold together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("configuration: {0}")]
    Config(String),
}

/// The agent image's name (the default of `container.image`).
pub const IMAGE: &str = "g2-agent:latest";

/// How long the memory hooks wait for the host by default (ms): the
/// runner's own default (`g2-agent`'s `inject::DEADLINE`).
pub const INJECT_WAIT_MS: u64 = 50;

/// File name of the optional settings file in the home directory.
pub const CONFIG_FILE: &str = "g2.toml";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// The assistant's name: shown in archives (`**G2**: …`) and used in the
    /// default trigger (`@G2`).
    pub assistant_name: String,
    pub store: StoreSettings,
    pub cluster: ClusterSettings,
    pub archive: ArchiveSettings,
    pub claude_code: ClaudeCodeSettings,
    pub gateway: GatewaySettings,
    pub container: ContainerSettings,
    pub api: ApiSettings,
    pub queue: QueueSettings,
    pub memory: MemorySettings,
    pub channels: ChannelSettings,
    pub media: MediaSettings,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct QueueSettings {
    /// Containers running at once, over all groups.
    pub max_containers: usize,
    /// Retries of a turn that failed, before the group is marked failing.
    pub retries: u32,
    /// First retry delay; each next one doubles.
    pub retry_base_ms: u64,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            max_containers: 5,
            retries: 5,
            retry_base_ms: 5_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSettings {
    /// Where `g2 serve` listens. A non-loopback address requires `token`.
    pub listen: String,
    /// Bearer token required on every `/api` route when set (16+ characters).
    pub token: Option<String>,
    /// A request's headers must be complete within this time of its first byte.
    pub header_timeout_ms: u64,
    /// A request's body must be complete within this time of its headers.
    pub body_timeout_ms: u64,
    /// A kept-alive connection with nothing in flight is closed after this.
    pub idle_timeout_secs: u64,
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
}

impl Default for ApiSettings {
    fn default() -> Self {
        ApiSettings {
            listen: "127.0.0.1:4170".into(),
            token: None,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            idle_timeout_secs: 60,
            max_connections: 256,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSettings {
    /// Which database: `sqlite:` (the home's `data/g2.db`), `sqlite:<path>`,
    /// or `postgres://user@host:port/database` (the password from
    /// `PGPASSWORD`, never in this file; docs/postgres.md).
    pub url: String,
    /// How long a database call waits for a lock held by another process.
    pub busy_timeout_ms: u64,
}

/// `[cluster]`: several hosts on one PostgreSQL store (docs/cluster.md).
/// One host alone holds every lease itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// This host's name among the hosts sharing the store; default: the
    /// machine's host name. A host restarted under the same name takes its
    /// groups back at once; two live hosts must never share one.
    pub host_id: Option<String>,
    /// How long a host's lease on a group lasts without a heartbeat: a
    /// host that dies has its groups taken over within this time.
    pub lease_secs: u64,
    /// This host's own folder for its lock and private sockets, when
    /// several hosts share one home folder (relative to the home, or
    /// absolute); default: the home's `data/`.
    pub runtime_dir: Option<PathBuf>,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            host_id: None,
            lease_secs: 10,
            runtime_dir: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveSettings {
    /// Each message in an archive is cut at this many characters.
    pub max_message_chars: usize,
    /// Archives leave out private and g2-memory spans and redact secrets
    /// (`g2_core::privacy`).
    pub redact_secrets: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClaudeCodeSettings {
    /// The `claude` executable. Default: `tools/claude-code` as installed by
    /// `scripts/setup.sh` (looked up under the home directory and beside the
    /// `g2` binary's project), then `claude` on `PATH`.
    pub path: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            assistant_name: g2_core::wire::DEFAULT_ASSISTANT_NAME.into(),
            store: StoreSettings::default(),
            cluster: ClusterSettings::default(),
            archive: ArchiveSettings::default(),
            claude_code: ClaudeCodeSettings::default(),
            gateway: GatewaySettings::default(),
            container: ContainerSettings::default(),
            api: ApiSettings::default(),
            queue: QueueSettings::default(),
            memory: MemorySettings::default(),
            media: MediaSettings::default(),
            channels: ChannelSettings::default(),
        }
    }
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            url: "sqlite:".into(),
            busy_timeout_ms: 5_000,
        }
    }
}

impl Default for ArchiveSettings {
    fn default() -> Self {
        Self {
            max_message_chars: g2_core::archive::DEFAULT_MAX_MESSAGE_CHARS,
            redact_secrets: true,
        }
    }
}

impl Settings {
    /// Loads settings for a home directory. `file` overrides the default
    /// `{home}/g2.toml`; a file named explicitly must exist.
    pub fn load(home: &Path, file: Option<&Path>) -> Result<Self> {
        Self::load_from(home, file, Env::prefixed("G2_"))
    }

    fn load_from(home: &Path, file: Option<&Path>, env: Env) -> Result<Self> {
        let path = match file {
            Some(f) if !f.exists() => {
                return Err(Error::Config(format!("{} does not exist", f.display())));
            }
            Some(f) => f.to_path_buf(),
            None => home.join(CONFIG_FILE),
        };
        let settings: Settings = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::file(&path))
            .merge(env.filter_map(|k| settings_key(k.as_str()).map(Into::into)))
            .extract()
            .map_err(|e| Error::Config(e.to_string()))?;
        settings.check()?;
        Ok(settings)
    }

    /// Top-level keys of the settings, as they appear in `g2.toml`.
    fn top_level_keys() -> Vec<String> {
        match serde_json::to_value(Settings::default()) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    fn check(&self) -> Result<()> {
        let name = self.assistant_name.trim();
        if name.is_empty() || name.len() > 64 || name.contains(['\n', '*']) {
            return Err(Error::Config(format!(
                "assistant_name {:?}: use 1-64 characters, no newlines or '*'",
                self.assistant_name
            )));
        }
        if !(2..=600).contains(&self.cluster.lease_secs) {
            return Err(Error::Config(
                "cluster.lease_secs: from 2 to 600 (seconds)".into(),
            ));
        }
        if let Some(id) = &self.cluster.host_id
            && (id.is_empty()
                || id.len() > 64
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b)))
        {
            return Err(Error::Config(format!(
                "cluster.host_id {id:?}: 1-64 letters, digits, '.', '_', ':' or '-'"
            )));
        }
        if self
            .cluster
            .runtime_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err(Error::Config(
                "cluster.runtime_dir: a folder, or leave it out".into(),
            ));
        }
        self.memory.check_timezones().map_err(Error::Config)?;
        if self.archive.max_message_chars == 0 {
            return Err(Error::Config(
                "archive.max_message_chars must be at least 1".into(),
            ));
        }
        if self.queue.max_containers == 0 {
            return Err(Error::Config(
                "queue.max_containers must be at least 1".into(),
            ));
        }
        if !(1..=100).contains(&self.container.disk_cpu_percent) {
            return Err(Error::Config(
                "container.disk_cpu_percent: a share of one core from 1 to 100".into(),
            ));
        }
        if !(1024..=(1 << 30)).contains(&self.media.max_bytes)
            || self.media.max_seconds == 0
            || self.media.transcribe_timeout_secs == 0
        {
            return Err(Error::Config(
                "media.max_bytes: 1 KiB to 1 GiB; media.max_seconds and media.transcribe_timeout_secs: at least 1".into(),
            ));
        }
        if !(1..=10_000).contains(&self.memory.inject_wait_ms) {
            return Err(Error::Config(
                "memory.inject_wait_ms: from 1 to 10000 (milliseconds)".into(),
            ));
        }
        if self.queue.retries > 20 || self.queue.retry_base_ms == 0 {
            return Err(Error::Config(
                "queue.retries: at most 20; queue.retry_base_ms: at least 1".into(),
            ));
        }
        // The bounds of each server (the host's `http::Limits`): none zero.
        let (api, gw) = (&self.api, &self.gateway);
        for (section, zero) in [
            (
                "api",
                api.header_timeout_ms == 0
                    || api.body_timeout_ms == 0
                    || api.idle_timeout_secs == 0
                    || api.max_connections == 0,
            ),
            (
                "gateway",
                gw.header_timeout_ms == 0
                    || gw.body_timeout_ms == 0
                    || gw.idle_timeout_secs == 0
                    || gw.max_connections == 0,
            ),
        ] {
            if zero {
                return Err(Error::Config(format!(
                    "{section}.header_timeout_ms, .body_timeout_ms, .idle_timeout_secs and .max_connections must be at least 1"
                )));
            }
        }
        if gw.max_concurrent == 0 || gw.groups.values().any(|g| g.max_concurrent == Some(0)) {
            return Err(Error::Config(
                "gateway.max_concurrent must be at least 1".into(),
            ));
        }
        if !(gw.upstream_url.starts_with("http://") || gw.upstream_url.starts_with("https://")) {
            return Err(Error::Config(format!(
                "gateway.upstream_url {:?}: use an http:// or https:// URL",
                gw.upstream_url
            )));
        }
        for folder in gw.groups.keys() {
            g2_core::validate::group_folder(folder)
                .map_err(|e| Error::Config(format!("gateway.groups: {e}")))?;
        }
        let text = ChannelSettings::MIN_TEXT_BYTES..=ChannelSettings::MAX_TEXT_BYTES;
        if !text.contains(&self.channels.max_text_bytes) {
            return Err(Error::Config(format!(
                "channels.max_text_bytes: from {} to {} (bytes)",
                text.start(),
                text.end()
            )));
        }
        let tg = &self.channels.telegram;
        if url::Url::parse(&tg.api_url).map_or(true, |u| {
            !matches!(u.scheme(), "http" | "https") || u.cannot_be_a_base()
        }) {
            return Err(Error::Config(format!(
                "channels.telegram.api_url {:?}: use an http:// or https:// URL",
                tg.api_url
            )));
        }
        if tg.poll_timeout_secs > 120 {
            return Err(Error::Config(
                "channels.telegram.poll_timeout_secs: at most 120".into(),
            ));
        }
        Ok(())
    }

    /// How the host renders archives; `redactor` carries the host's own
    /// credential (the host's `gateway::credentials::redactor`).
    pub fn archive_options(
        &self,
        redactor: &g2_core::privacy::Redactor,
    ) -> g2_core::archive::ArchiveOptions {
        g2_core::archive::ArchiveOptions {
            assistant_name: self.assistant_name.clone(),
            max_message_chars: self.archive.max_message_chars,
            redact_secrets: self.archive.redact_secrets,
            redactor: redactor.clone(),
        }
    }
}

/// Maps a `G2_*` variable (prefix already stripped) to a settings key, or
/// drops it. Only variables whose first segment names a setting are taken,
/// so other `G2_*` variables (`G2_HOME`, `G2_SKIP_DOCKER`, variables of the
/// scripts) never make loading fail; inside a known section a typo still does.
fn settings_key(key: &str) -> Option<String> {
    let key = key.to_ascii_lowercase();
    // Short forms documented for the gateway.
    match key.as_str() {
        "provider" => return Some("gateway.provider".into()),
        "model" => return Some("gateway.model".into()),
        _ => {}
    }
    let first = key.split("__").next().unwrap_or_default();
    if Settings::top_level_keys().iter().any(|k| k == first) {
        Some(key.replace("__", "."))
    } else {
        None
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return figment::Error
mod tests;
