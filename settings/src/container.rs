//! `[container]`, and a group's own `GroupContainerConfig`: what its
//! agent's container may use.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::IMAGE;

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
