//! Settings: built-in defaults, then `g2.toml` in the home directory (or the
//! file named by `--config` / `G2_CONFIG`), then `G2_*` environment
//! variables. Nested keys use a double underscore in the environment:
//! `G2_ARCHIVE__MAX_MESSAGE_CHARS=4000` sets `[archive] max_message_chars`.
//!
//! A crate of its own below the host, which re-exports it as its `config`
//! module: it imports nothing from the host, so every part of the host,
//! and the store, reads settings without a cycle.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

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
}

/// Chat platforms (`[channels.*]`); the HTTP API is always on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelSettings {
    /// The longest message text g2 takes, in bytes of UTF-8, the same on
    /// every channel: a longer one is refused, never cut (the HTTP API
    /// answers 400; a platform's chat is told why). From
    /// [`ChannelSettings::MIN_TEXT_BYTES`] to [`ChannelSettings::MAX_TEXT_BYTES`].
    pub max_text_bytes: usize,
    pub telegram: TelegramSettings,
    pub whatsapp: WhatsAppSettings,
    pub discord: DiscordSettings,
    pub slack: SlackSettings,
}

impl ChannelSettings {
    /// The most (and the default) `max_text_bytes` may be: half the HTTP
    /// API's 64 KiB body, so a text at the limit fits a request with its
    /// newlines and quotes escaped (`\n`, `\"`: two bytes each), and the
    /// HTTP channel refuses by this limit, as the others do.
    pub const MAX_TEXT_BYTES: usize = 32 * 1024;
    /// The least `max_text_bytes` may be.
    pub const MIN_TEXT_BYTES: usize = 1024;
}

impl Default for ChannelSettings {
    fn default() -> Self {
        ChannelSettings {
            max_text_bytes: Self::MAX_TEXT_BYTES,
            telegram: TelegramSettings::default(),
            whatsapp: WhatsAppSettings::default(),
            discord: DiscordSettings::default(),
            slack: SlackSettings::default(),
        }
    }
}

/// `[channels.discord]`: a bot through Discord's gateway (events) and REST
/// API (sends). Its token is not a setting: it is read from
/// `DISCORD_BOT_TOKEN` (the environment or `{home}/.env`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DiscordSettings {
    pub enabled: bool,
    /// The REST API, with its version (a local one in tests).
    pub api_url: String,
    /// The gateway's WebSocket address (a local one in tests); Discord
    /// names the address to resume at in each session's READY.
    pub gateway_url: String,
}

impl Default for DiscordSettings {
    fn default() -> Self {
        DiscordSettings {
            enabled: false,
            api_url: "https://discord.com/api/v10".into(),
            gateway_url: "wss://gateway.discord.gg".into(),
        }
    }
}

/// `[channels.slack]`: a Slack app through Socket Mode and the Web API.
/// Its tokens are not settings: they are read from `SLACK_BOT_TOKEN`
/// (`xoxb-`) and `SLACK_APP_TOKEN` (`xapp-`), the environment or
/// `{home}/.env`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SlackSettings {
    pub enabled: bool,
    /// The Web API (a local one in tests).
    pub api_url: String,
}

impl Default for SlackSettings {
    fn default() -> Self {
        SlackSettings {
            enabled: false,
            api_url: "https://slack.com/api".into(),
        }
    }
}

/// `[channels.whatsapp]`: the WhatsApp Business Cloud API. Its access
/// token, app secret and verify token are not settings: they are read
/// from `WHATSAPP_ACCESS_TOKEN`, `WHATSAPP_APP_SECRET` and
/// `WHATSAPP_VERIFY_TOKEN` (the environment or `{home}/.env`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WhatsAppSettings {
    pub enabled: bool,
    /// The Graph API (a local one in tests).
    pub graph_url: String,
    /// The Graph API version requests name.
    pub api_version: String,
    /// The business number's id (Meta's app dashboard, "API Setup"):
    /// digits, taken quoted or not (an environment variable's digits are
    /// read as a number).
    #[serde(deserialize_with = "text_or_number")]
    pub phone_number_id: String,
}

fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(u64),
    }
    Ok(match Id::deserialize(d)? {
        Id::Text(s) => s,
        Id::Number(n) => n.to_string(),
    })
}

impl Default for WhatsAppSettings {
    fn default() -> Self {
        WhatsAppSettings {
            enabled: false,
            graph_url: "https://graph.facebook.com".into(),
            api_version: "v23.0".into(),
            phone_number_id: String::new(),
        }
    }
}

/// `[channels.telegram]`. The bot token is not a setting: it is read from
/// `TELEGRAM_BOT_TOKEN` (the environment or `{home}/.env`), so it is never
/// in `g2.toml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramSettings {
    pub enabled: bool,
    /// The Bot API server (a self-hosted one, or a local one in tests).
    pub api_url: String,
    /// How long one `getUpdates` waits for news (long polling).
    pub poll_timeout_secs: u64,
    /// What a chat that is not registered gets.
    pub unregistered: Unregistered,
}

impl Default for TelegramSettings {
    fn default() -> Self {
        TelegramSettings {
            enabled: false,
            api_url: "https://api.telegram.org".into(),
            poll_timeout_secs: 30,
            unregistered: Unregistered::Ignore,
        }
    }
}

/// What a chat that is not registered as a group gets.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Unregistered {
    /// Nothing: its messages are dropped unread.
    Ignore,
    /// One reply, the first time it addresses the bot, saying how to
    /// register it (with its chat id).
    Notice,
}

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
}

impl MemorySettings {
    /// The extraction tokens one group may use per day.
    pub fn daily_tokens_for(&self, group: &str) -> u64 {
        self.groups
            .get(group)
            .and_then(|g| g.daily_tokens)
            .unwrap_or(self.daily_tokens)
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
        }
    }
}

/// Container settings shared by all groups (`[container]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContainerSettings {
    pub image: String,
    pub memory_mb: u64,
    pub cpus: f64,
    pub pids: i64,
    /// Hard limit of one container's life.
    pub timeout_secs: u64,
    /// A container with nothing to do for this long is asked to finish.
    pub idle_timeout_secs: u64,
    /// Between SIGTERM and SIGKILL when a container is stopped.
    pub stop_grace_secs: u64,
    /// Disk quota of each group: its folder, IPC folder and `.claude` state.
    pub disk_mb: u64,
    /// Free space the host keeps for itself (its database) on the disk
    /// that holds `data/`: no agent runs, or keeps writing, below it.
    pub disk_reserve_mb: u64,
    /// How often a running agent's disk use is counted again.
    pub disk_check_ms: u64,
    /// Entries (files, folders, links, …) each group may keep in its three
    /// trees, beside the bytes of `disk_mb`.
    pub max_group_files: u64,
    /// Share of one core (percent) the host spends at most on counting
    /// groups' files.
    pub disk_cpu_percent: u32,
    /// The mount allowlist; deliberately outside the project and never
    /// mounted into a container.
    pub allowlist: Option<PathBuf>,
}

impl Default for ContainerSettings {
    fn default() -> Self {
        ContainerSettings {
            image: IMAGE.into(),
            memory_mb: 2048,
            cpus: 1.0,
            pids: 512,
            timeout_secs: 30 * 60,
            idle_timeout_secs: 30 * 60,
            stop_grace_secs: 10,
            disk_mb: 2048,
            disk_reserve_mb: 1024,
            disk_check_ms: 1000,
            max_group_files: 200_000,
            disk_cpu_percent: 20,
            allowlist: None,
        }
    }
}

/// Per-group container settings (`registered_groups.container_config`),
/// each falling back to `[container]` in the settings. Parsed once, when
/// the group's row is read (`store::groups`); a stored config that does
/// not parse is an error naming the group, never a silent default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupContainerConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
    /// Give the container a network (default: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_secs: Option<u64>,
    /// Disk quota of the group's folder, IPC folder and `.claude` state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_mb: Option<u64>,
    /// Entries the group may keep in those trees (`container.max_group_files`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_files: Option<u64>,
    /// Extra host folders, checked against the mount allowlist.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<ExtraMount>,
    /// The group's memory capture (`memory.capture`).
    #[serde(skip_serializing_if = "GroupMemoryConfig::is_default")]
    pub memory: GroupMemoryConfig,
}

/// An extra mount a group asks for in its `container_config` (checked
/// against the mount allowlist by the host's `container::mounts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraMount {
    pub host_path: String,
    /// Name under `/workspace/extra/` (default: the folder's name).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub read_write: bool,
}

/// A group's own memory settings (`{"memory": {"capture": false}}` in its
/// `container_config`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupMemoryConfig {
    /// `false`: nothing of the group's sessions is captured (its hooks write
    /// no capture event, and the host would drop one); default on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<bool>,
    /// `false`: no memory is injected into the group's sessions; default on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inject: Option<bool>,
}

impl GroupMemoryConfig {
    fn is_default(&self) -> bool {
        *self == GroupMemoryConfig::default()
    }

    /// Whether the group's sessions are captured.
    pub fn captures(&self) -> bool {
        self.capture != Some(false)
    }

    /// Whether memory is injected into the group's sessions.
    pub fn injects(&self) -> bool {
        self.inject != Some(false)
    }
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
mod tests {
    use super::*;

    #[test]
    fn defaults_file_then_env() {
        figment::Jail::expect_with(|jail| {
            let home = jail.directory().to_path_buf();
            assert_eq!(Settings::load(&home, None).unwrap(), Settings::default());

            jail.create_file(
                "g2.toml",
                "assistant_name = \"Andy\"\n[archive]\nmax_message_chars = 500\n",
            )?;
            let s = Settings::load(&home, None).unwrap();
            assert_eq!(s.assistant_name, "Andy");
            assert_eq!(s.archive.max_message_chars, 500);
            assert!(s.archive.redact_secrets, "on unless turned off");
            assert!(s.archive_options(&Default::default()).redact_secrets);

            jail.set_env("G2_ASSISTANT_NAME", "Bea");
            jail.set_env("G2_STORE__BUSY_TIMEOUT_MS", "42");
            jail.set_env("G2_HOME", "/somewhere");
            // Variables of the scripts are not settings and must not break loading.
            jail.set_env("G2_SKIP_DOCKER", "1");
            jail.set_env("G2_FIXTURES", "/tmp/x");
            let s = Settings::load(&home, None).unwrap();
            assert_eq!(s.assistant_name, "Bea");
            assert_eq!(s.store.busy_timeout_ms, 42);
            assert_eq!(s.archive.max_message_chars, 500);

            jail.set_env("G2_ARCHIVE__REDACT_SECRETS", "false");
            let s = Settings::load(&home, None).unwrap();
            assert!(!s.archive.redact_secrets);
            assert!(!s.archive_options(&Default::default()).redact_secrets);

            jail.set_env("G2_PROVIDER", "offline");
            jail.set_env("G2_MODEL", "m1");
            jail.set_env("G2_GATEWAY__DAILY_TOKENS", "1000");
            let s = Settings::load(&home, None).unwrap();
            assert_eq!(s.gateway.provider, Some(ProviderKind::Offline));
            assert_eq!(s.gateway.model.as_deref(), Some("m1"));
            assert_eq!(s.gateway.limits_for("any").daily_tokens, Some(1000));

            assert_eq!(s.channels.max_text_bytes, 32 * 1024);
            jail.set_env("G2_CHANNELS__MAX_TEXT_BYTES", "1024");
            let s = Settings::load(&home, None).unwrap();
            assert_eq!(s.channels.max_text_bytes, 1024);
            Ok(())
        });
    }

    #[test]
    fn bad_settings_are_clear_errors() {
        figment::Jail::expect_with(|jail| {
            let home = jail.directory().to_path_buf();
            jail.create_file("g2.toml", "assistent_name = \"typo\"\n")?;
            let err = Settings::load(&home, None).unwrap_err().to_string();
            assert!(err.contains("assistent_name"), "{err}");
            jail.create_file("g2.toml", "[archive]\nmax_message_chars = 0\n")?;
            assert!(Settings::load(&home, None).is_err());
            for (toml, why) in [
                ("[cluster]\nlease_secs = 1\n", "cluster.lease_secs"),
                ("[cluster]\nhost_id = \"a/b\"\n", "cluster.host_id"),
                ("[cluster]\nhost_id = \"\"\n", "cluster.host_id"),
                ("[cluster]\nruntime_dir = \"\"\n", "cluster.runtime_dir"),
                (
                    "[channels]\nmax_text_bytes = 1023\n",
                    "channels.max_text_bytes: from 1024 to 32768",
                ),
                (
                    "[channels]\nmax_text_bytes = 32769\n",
                    "channels.max_text_bytes",
                ),
            ] {
                jail.create_file("g2.toml", toml)?;
                let err = Settings::load(&home, None).unwrap_err().to_string();
                assert!(err.contains(why), "{toml}: {err}");
            }
            jail.create_file("g2.toml", "[cluster]\nhost_id = \"eu-1.b:2\"\n")?;
            assert!(Settings::load(&home, None).is_ok());
            jail.create_file("g2.toml", "")?;
            jail.set_env("G2_STORE__BUSY_TIMOUT_MS", "1");
            let err = Settings::load(&home, None).unwrap_err().to_string();
            assert!(err.contains("busy_timout_ms"), "{err}");
            let missing = home.join("nope.toml");
            let err = Settings::load(&home, Some(&missing))
                .unwrap_err()
                .to_string();
            assert!(err.contains("does not exist"), "{err}");
            Ok(())
        });
    }
}
