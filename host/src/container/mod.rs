//! Agent containers: what a group's container is ([`Spec`]: image, mounts,
//! user, limits, labels) and the [`ContainerRuntime`] that runs one, with
//! its Docker implementation in [`docker`].
//!
//! Invariants: a spec is built only by [`spec_for`] from validated names;
//! every container carries the labels [`LABEL_GROUP`], [`LABEL_RUN`] and
//! [`LABEL_HOME`], so a host can find (and reap) exactly its own containers;
//! a container runs as a non-root user with all capabilities dropped,
//! `no-new-privileges`, a read-only root filesystem, a tmpfs `/tmp`, memory,
//! CPU and pids limits, and no network unless its group's config allows
//! it. The model is reached through the group's gateway socket, which is in
//! the mounted IPC folder; no credential is ever part of a spec.

pub mod disk;
pub mod docker;
pub mod image;
pub mod mounts;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::Result;
use crate::gateway::provider::BoxFuture;

pub use mounts::Mount;

pub const LABEL_GROUP: &str = "g2.group";
pub const LABEL_RUN: &str = "g2.run";
/// Which home (host instance) a container belongs to.
pub const LABEL_HOME: &str = "g2.home";

/// Per-group container settings (`registered_groups.container_config`),
/// each falling back to `[container]` in the settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupContainerConfig {
    pub memory_mb: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<i64>,
    /// Give the container a network (default: none).
    pub network: Option<bool>,
    pub timeout_secs: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    /// Disk quota of the group's folder, IPC folder and `.claude` state.
    pub disk_mb: Option<u64>,
    /// Extra host folders, checked against the mount allowlist.
    pub mounts: Vec<mounts::ExtraMount>,
}

impl GroupContainerConfig {
    pub fn parse(v: &serde_json::Value) -> Result<Self> {
        serde_json::from_value(v.clone())
            .map_err(|e| crate::Error::Invalid(format!("container_config: {e}")))
    }
}

/// Resource limits of one container.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub memory_bytes: i64,
    pub nano_cpus: i64,
    pub pids: i64,
}

/// Everything needed to create one agent container.
#[derive(Debug, Clone)]
pub struct Spec {
    /// `g2-{folder}-{millis}`.
    pub name: String,
    pub image: String,
    pub group: String,
    pub run_id: String,
    /// Identifies the host instance (see [`home_label`]).
    pub home_label: String,
    pub mounts: Vec<Mount>,
    /// `uid:gid`.
    pub user: String,
    pub env: Vec<(String, String)>,
    pub limits: Limits,
    pub network: bool,
    /// Extra `KEY=value` settings passed to the runner (never a secret).
    pub workdir: String,
}

/// A label value naming a home: a digest of its absolute path.
pub fn home_label(root: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let abs = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let d = Sha256::digest(abs.to_string_lossy().as_bytes());
    format!("{d:x}")[..16].to_string()
}

/// Output of a running container, in arrival order.
#[derive(Debug, Clone)]
pub enum Output {
    Stdout(Bytes),
    Stderr(Bytes),
}

/// A started container. `output` ends when the container's streams close;
/// `exit` then yields its exit code (after the container was removed).
pub struct Running {
    pub id: String,
    pub name: String,
    pub output: mpsc::Receiver<Output>,
    pub exit: oneshot::Receiver<Exit>,
}

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The exit code (-1 when unknown; 128 + n after signal n).
    pub code: i64,
    /// The kernel killed it for going over its memory limit.
    pub oom_killed: bool,
}

/// Runs agent containers.
pub trait ContainerRuntime: Send + Sync + 'static {
    /// Creates and starts a container, writes `input` to its stdin and
    /// closes it. The container is removed once it has exited.
    fn run(&self, spec: Spec, input: Vec<u8>) -> BoxFuture<'_, Result<Running>>;
    /// Stops a container: SIGTERM, then SIGKILL after `grace`.
    fn stop(&self, id: &str, grace: Duration) -> BoxFuture<'_, Result<()>>;
    /// Removes every container of this home (left by an earlier host);
    /// returns their names.
    fn reap(&self, home_label: &str) -> BoxFuture<'_, Result<Vec<String>>>;
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
    /// How often a running agent's disk use is checked.
    pub disk_check_ms: u64,
    /// The mount allowlist; deliberately outside the project and never
    /// mounted into a container.
    pub allowlist: Option<PathBuf>,
}

impl Default for ContainerSettings {
    fn default() -> Self {
        ContainerSettings {
            image: crate::container::image::IMAGE.into(),
            memory_mb: 2048,
            cpus: 1.0,
            pids: 512,
            timeout_secs: 30 * 60,
            idle_timeout_secs: 30 * 60,
            stop_grace_secs: 10,
            disk_mb: 2048,
            disk_reserve_mb: 1024,
            disk_check_ms: 1000,
            allowlist: None,
        }
    }
}

/// The spec of a group's next container.
pub fn spec_for(
    home: &crate::home::Home,
    settings: &ContainerSettings,
    group: &crate::groups::Group,
    project_root: Option<&std::path::Path>,
) -> Result<Spec> {
    let cfg = GroupContainerConfig::parse(&group.container_config)?;
    let mounts = mounts::table(home, settings, group, &cfg, project_root)?;
    let (uid, gid) = crate::container::image::agent_ids();
    let now = chrono::Utc::now().timestamp_millis();
    let memory_mb = cfg.memory_mb.unwrap_or(settings.memory_mb).max(64);
    let cpus = cfg.cpus.unwrap_or(settings.cpus).clamp(0.05, 1024.0);
    Ok(Spec {
        name: format!("g2-{}-{now}", group.folder.to_ascii_lowercase()),
        image: settings.image.clone(),
        group: group.folder.clone(),
        run_id: uuid::Uuid::new_v4().to_string(),
        home_label: home_label(home.root()),
        mounts,
        user: format!("{uid}:{gid}"),
        env: vec![("HOME".into(), crate::container::image::AGENT_HOME.into())],
        limits: Limits {
            memory_bytes: (memory_mb * 1024 * 1024) as i64,
            nano_cpus: (cpus * 1e9) as i64,
            pids: cfg.pids.unwrap_or(settings.pids).max(16),
        },
        network: cfg.network.unwrap_or(false),
        workdir: "/workspace/group".into(),
    })
}

/// Timeouts of a group's container.
pub fn timeouts(
    settings: &ContainerSettings,
    group: &crate::groups::Group,
) -> (Duration, Duration) {
    let cfg = GroupContainerConfig::parse(&group.container_config).unwrap_or_default();
    (
        Duration::from_secs(cfg.timeout_secs.unwrap_or(settings.timeout_secs).max(1)),
        Duration::from_secs(
            cfg.idle_timeout_secs
                .unwrap_or(settings.idle_timeout_secs)
                .max(1),
        ),
    )
}
