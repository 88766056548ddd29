//! Disk quotas: what a group's agent may keep on the host's disk.
//!
//! A group's agent writes into three host folders (its group folder, its
//! IPC folder and its `.claude` state), which bind mounts cannot limit.
//! So the host measures them — walking each tree beneath a confined handle,
//! counting allocated blocks, every inode once, no link followed — before
//! a container starts and every `container.disk_check_ms` while it runs. A
//! group over its quota (`container.disk_mb`, per group `disk_mb` in its
//! `container_config`) does not start, and a running one that goes over is
//! stopped. Independently, the host keeps `container.disk_reserve_mb` free
//! on the disk that holds `data/` for its own database: below that no agent
//! starts, and one that is still writing is stopped.

use serde::Serialize;

use super::ContainerSettings;
use crate::Result;
use crate::groups::Group;
use crate::home::Home;
use g2_core::validate::GroupFolder;

const MB: u64 = 1024 * 1024;

/// A group's disk use against its quota, and the host's free space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub used_bytes: u64,
    pub quota_bytes: u64,
    /// Free space on the disk holding `data/` (for unprivileged users).
    pub host_free_bytes: u64,
    pub host_reserve_bytes: u64,
}

impl Usage {
    /// Why the group may not run (or go on), in words for its members.
    pub fn refusal(&self) -> Option<String> {
        if self.used_bytes > self.quota_bytes {
            return Some(format!(
                "this group's files take {} MB, over its disk quota of {} MB; delete some of them to go on",
                self.used_bytes.div_ceil(MB),
                self.quota_bytes / MB
            ));
        }
        if self.host_free_bytes < self.host_reserve_bytes {
            return Some(format!(
                "the host's disk is nearly full ({} MB free, {} MB are kept for g2 itself)",
                self.host_free_bytes / MB,
                self.host_reserve_bytes / MB
            ));
        }
        None
    }
}

/// The group's quota in bytes.
pub fn quota_bytes(settings: &ContainerSettings, group: &Group) -> u64 {
    let cfg = &group.container_config;
    cfg.disk_mb.unwrap_or(settings.disk_mb).saturating_mul(MB)
}

/// Bytes the group's three trees take. Blocking: walks the trees.
pub fn used_bytes(home: &Home, folder: &GroupFolder) -> Result<u64> {
    let mut total = 0;
    for tree in [
        home.group_tree(folder)?,
        home.ipc_tree(folder)?,
        home.claude_tree(folder)?,
    ] {
        total += home.confined(folder, "disk usage", tree.disk_usage())?;
    }
    Ok(total)
}

/// Free bytes on the disk that holds `data/`.
pub fn host_free_bytes(home: &Home) -> u64 {
    rustix::fs::statvfs(home.data_dir())
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .unwrap_or(u64::MAX)
}

/// Measures a group. Blocking.
pub fn measure(home: &Home, settings: &ContainerSettings, group: &Group) -> Result<Usage> {
    Ok(Usage {
        used_bytes: used_bytes(home, &group.folder)?,
        quota_bytes: quota_bytes(settings, group),
        host_free_bytes: host_free_bytes(home),
        host_reserve_bytes: settings.disk_reserve_mb.saturating_mul(MB),
    })
}

/// [`measure`] on the blocking pool.
pub async fn measure_async(
    home: &Home,
    settings: &ContainerSettings,
    group: &Group,
) -> Result<Usage> {
    let (h, s, g) = (home.clone(), settings.clone(), group.clone());
    tokio::task::spawn_blocking(move || measure(&h, &s, &g)).await?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_why_in_words() {
        let u = Usage {
            used_bytes: 3 * 1024 * MB,
            quota_bytes: 2048 * MB,
            host_free_bytes: 10_000 * MB,
            host_reserve_bytes: 1024 * MB,
        };
        assert!(
            u.refusal()
                .unwrap()
                .contains("3072 MB, over its disk quota of 2048 MB")
        );
        let u = Usage {
            used_bytes: MB,
            host_free_bytes: 100 * MB,
            ..u
        };
        assert!(u.refusal().unwrap().contains("nearly full (100 MB free"));
        let u = Usage {
            host_free_bytes: 5000 * MB,
            ..u
        };
        assert_eq!(u.refusal(), None);
    }
}
