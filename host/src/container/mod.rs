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
pub mod project;

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::Result;
pub use crate::config::{ContainerSettings, GroupContainerConfig};
use futures_util::future::BoxFuture;

pub const LABEL_GROUP: &str = "g2.group";
pub const LABEL_RUN: &str = "g2.run";
/// Which home (host instance) a container belongs to.
pub const LABEL_HOME: &str = "g2.home";
/// Which host of the home started it (`cluster.host_id`): hosts sharing a
/// home (docs/cluster.md) reap only their own.
pub const LABEL_HOST: &str = "g2.host";

/// Names that are never mounted, wherever they appear in a path: neither
/// as an extra mount (`mounts.rs`) nor in main's view of the home
/// (`project.rs`).
pub const ALWAYS_BLOCKED: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".gpg",
    ".aws",
    ".azure",
    ".gcloud",
    ".kube",
    ".docker",
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "credentials",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "private_key",
    ".secret",
];

/// One mount of a container's [`Spec`] (the table is `mounts.rs`'s; main's
/// view of the home, `project.rs`'s).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Mount {
    Bind {
        host: std::path::PathBuf,
        container: String,
        read_only: bool,
    },
    Tmpfs {
        container: String,
        options: String,
    },
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
    /// The host that starts it ([`LABEL_HOST`]).
    pub host: String,
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
    /// Its first process as the engine names it (None: unknown, or it
    /// ended already); the disk ledger looks into its processes.
    pub pid: Option<u32>,
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
    /// Removes every container of this home that `host` started, or that
    /// carries no host (left by an earlier process); returns their names.
    fn reap(&self, home_label: &str, host: &str) -> BoxFuture<'_, Result<Vec<String>>>;
    /// Removes the containers of `group` in this home that another host
    /// than `host` started (on this engine: hosts of one machine); returns
    /// their names. Before `host` starts one, so a group never runs twice.
    fn evict(
        &self,
        home_label: &str,
        group: &str,
        host: &str,
    ) -> BoxFuture<'_, Result<Vec<String>>>;
}

/// The spec of a group's next container.
pub fn spec_for(
    home: &crate::home::Home,
    settings: &ContainerSettings,
    group: &crate::groups::Group,
    project_root: Option<&std::path::Path>,
    host: &str,
) -> Result<Spec> {
    let cfg = &group.container_config;
    let mounts = mounts::table(home, settings, group, cfg, project_root)?;
    let (uid, gid) = crate::home::agent_ids();
    let now = chrono::Utc::now().timestamp_millis();
    let memory_mb = cfg.memory_mb.unwrap_or(settings.memory_mb).max(64);
    let cpus = cfg.cpus.unwrap_or(settings.cpus).clamp(0.05, 1024.0);
    Ok(Spec {
        name: format!("g2-{}-{now}", group.folder.to_ascii_lowercase()),
        image: settings.image.clone(),
        group: group.folder.to_string(),
        run_id: uuid::Uuid::new_v4().to_string(),
        home_label: home_label(home.root()),
        host: host.to_string(),
        mounts,
        user: format!("{uid}:{gid}"),
        env: {
            let mut env = vec![
                ("HOME".into(), image::AGENT_HOME.into()),
                (
                    g2_core::wire::ENV_TIMEZONE.into(),
                    crate::zone::of(group.folder.as_str()).name().into(),
                ),
            ];
            if !cfg.memory.captures() {
                env.push((g2_core::wire::ENV_CAPTURE.into(), "0".into()));
            }
            if !cfg.memory.injects() {
                env.push((g2_core::wire::ENV_INJECT.into(), "0".into()));
            }
            env
        },
        limits: Limits {
            memory_bytes: (memory_mb * 1024 * 1024) as i64,
            nano_cpus: (cpus * 1e9) as i64,
            pids: cfg.pids.unwrap_or(settings.pids).max(16),
        },
        network: cfg.network.unwrap_or(false),
        workdir: g2_core::wire::GROUP_DIR.into(),
    })
}

/// Timeouts of a group's container.
pub fn timeouts(
    settings: &ContainerSettings,
    group: &crate::groups::Group,
) -> (Duration, Duration) {
    let cfg = &group.container_config;
    (
        Duration::from_secs(cfg.timeout_secs.unwrap_or(settings.timeout_secs).max(1)),
        Duration::from_secs(
            cfg.idle_timeout_secs
                .unwrap_or(settings.idle_timeout_secs)
                .max(1),
        ),
    )
}
