//! Disk quotas: what a group's agent may keep on the host's disk.
//!
//! A group's agent writes into three host folders (its group folder, its
//! IPC folder and its `.claude` state), which bind mounts cannot limit.
//! Where the filesystem has no project quotas the kernel enforces (see
//! [`project_quotas`]; `g2 doctor` says), the host counts them — every
//! entry at any depth and with any name, allocated blocks, every inode
//! once, no link followed ([`g2_core::confined::Tally`]) — and the count is
//! the enforcement. A group over either quota (`container.disk_mb` bytes,
//! `container.max_group_files` entries; per group `disk_mb` and
//! `max_files` in its `container_config`) does not start, and a running
//! one that goes over is stopped. Independently, the host keeps
//! `container.disk_reserve_mb` free on the disk that holds `data/` for its
//! own database: below that no agent starts, and one that is still
//! writing is stopped.
//!
//! While a container runs, its count also adds what the container's
//! processes hold in files deleted while still open ([`held`]): such a
//! file is in no tree, yet takes its blocks until the container stops.
//!
//! Counting is done by the [`Ledger`] in the background, within a CPU
//! budget (`container.disk_cpu_percent` of one core).

mod budget;
pub mod held;
mod ledger;

pub use budget::thread_cpu;
pub use held::{Held, Sight};
pub use ledger::{Count, Ledger, Processes, Running};

use serde::Serialize;

use super::ContainerSettings;
use crate::groups::Group;
use crate::home::Home;
use crate::{Error, Result};
use g2_core::confined::{Tally, Walk};
use g2_core::validate::GroupFolder;

const MB: u64 = 1024 * 1024;

/// A group's disk use against its quotas, and the host's free space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// The trees' bytes and what the agent holds in files deleted while
    /// open.
    pub used_bytes: u64,
    /// Of `used_bytes`, what files deleted while open hold.
    pub held_bytes: u64,
    pub quota_bytes: u64,
    /// Files, folders, links and other entries in the group's trees.
    pub entries: u64,
    pub max_entries: u64,
    /// Free space on the disk holding `data/` (for unprivileged users).
    pub host_free_bytes: u64,
    pub host_reserve_bytes: u64,
    /// When the count this is built from was finished (RFC 3339).
    pub counted_at: String,
}

impl Usage {
    /// A count (the trees' tally and what is held open) against the
    /// group's quotas and the host's free space now.
    pub fn of(tally: Tally, held: Held, counted_at: String, cx: &Quotas) -> Usage {
        Usage {
            used_bytes: tally.bytes.saturating_add(held.bytes),
            held_bytes: held.bytes,
            quota_bytes: cx.bytes,
            entries: tally.entries,
            max_entries: cx.entries,
            host_free_bytes: cx.host_free_bytes,
            host_reserve_bytes: cx.host_reserve_bytes,
            counted_at,
        }
    }

    /// Why the group may not run (or go on), in words for its members.
    pub fn refusal(&self) -> Option<String> {
        if self.used_bytes > self.quota_bytes {
            let held = if self.held_bytes > 0 {
                format!(
                    " ({} MB of it in files deleted but still held open)",
                    self.held_bytes.div_ceil(MB)
                )
            } else {
                String::new()
            };
            return Some(format!(
                "this group's files take {} MB{held}, over its disk quota of {} MB; delete some of them to go on",
                self.used_bytes.div_ceil(MB),
                self.quota_bytes / MB
            ));
        }
        if self.entries > self.max_entries {
            return Some(format!(
                "this group has {} files and folders, over its limit of {}; delete some of them to go on",
                self.entries, self.max_entries
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

    /// Whether the group's own quotas (not the host's reserve) are exceeded.
    pub fn over_quota(&self) -> bool {
        self.used_bytes > self.quota_bytes || self.entries > self.max_entries
    }
}

/// A group's quotas and the host's free space, as of now.
#[derive(Debug, Clone, Copy)]
pub struct Quotas {
    pub bytes: u64,
    pub entries: u64,
    pub host_free_bytes: u64,
    pub host_reserve_bytes: u64,
}

impl Quotas {
    pub fn of(home: &Home, settings: &ContainerSettings, group: &Group) -> Quotas {
        let cfg = &group.container_config;
        Quotas {
            bytes: cfg.disk_mb.unwrap_or(settings.disk_mb).saturating_mul(MB),
            entries: cfg.max_files.unwrap_or(settings.max_group_files),
            host_free_bytes: host_free_bytes(home),
            host_reserve_bytes: settings.disk_reserve_mb.saturating_mul(MB),
        }
    }
}

/// What a finished count means for a group: its usage, or an error (the
/// trees could not be counted: the group is refused, never let through).
pub fn usage(count: &Count, cx: &Quotas) -> Result<Usage> {
    match &count.outcome {
        Ok(t) => Ok(Usage::of(
            *t,
            count.held,
            count.finished_at.to_rfc3339(),
            cx,
        )),
        Err(e) => Err(Error::OverQuota(format!(
            "this group's files could not be counted ({e})"
        ))),
    }
}

/// Counts the group's three trees (one that does not exist holds
/// nothing). Blocking: walks them.
pub fn tally(home: &Home, folder: &GroupFolder, walk: &mut Walk<'_>) -> Result<Tally> {
    let mut total = Tally::default();
    for tree in home.existing_trees(folder)? {
        let t = home.confined(folder, "disk usage", tree.tally(walk))?;
        total.bytes += t.bytes;
        total.entries += t.entries;
    }
    Ok(total)
}

/// The devices of the group's trees that exist: a file held open on one
/// of them takes the group's space.
pub fn devices(home: &Home, folder: &GroupFolder) -> Result<std::collections::HashSet<u64>> {
    let mut out = std::collections::HashSet::new();
    for tree in home.existing_trees(folder)? {
        let st = rustix::fs::fstat(&tree)
            .map_err(|e| Error::io("the device of a group's tree", e.into()))?;
        out.insert(st.st_dev);
    }
    Ok(out)
}

/// Free bytes on the disk that holds `data/`.
pub fn host_free_bytes(home: &Home) -> u64 {
    rustix::fs::statvfs(home.data_dir())
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .unwrap_or(u64::MAX)
}

/// Counts a group at once, without a budget (`g2 doctor`). Blocking.
pub fn measure(home: &Home, settings: &ContainerSettings, group: &Group) -> Result<Usage> {
    let mut pace = |_: &Tally| Ok(());
    let t = tally(
        home,
        &group.folder,
        &mut Walk {
            give: None,
            pace: &mut pace,
        },
    )?;
    Ok(Usage::of(
        t,
        Held::default(),
        crate::now_rfc3339(),
        &Quotas::of(home, settings, group),
    ))
}

/// Whether the filesystem holding `path` enforces project quotas (XFS or
/// ext4 mounted with `prjquota`/`pquota`), from `/proc/self/mountinfo`:
/// the filesystem's type, its mount point, and the answer.
pub fn project_quotas(path: &std::path::Path) -> Option<(String, String, bool)> {
    let real = std::fs::canonicalize(path).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines()
        .filter_map(|l| {
            // id parent major:minor root mount-point options … - type source super-options
            let (left, right) = l.split_once(" - ")?;
            let mut fields = left.split(' ').skip(4);
            let mount = fields.next()?.replace("\\040", " ");
            let options = fields.next().unwrap_or_default();
            let mut r = right.split(' ');
            let fstype = r.next()?.to_string();
            let supers = r.nth(1).unwrap_or_default();
            real.starts_with(&mount).then(|| {
                let on = options
                    .split(',')
                    .chain(supers.split(','))
                    .any(|o| matches!(o, "prjquota" | "pquota" | "pqnoenforce" | "prjjquota"));
                (fstype, mount, on)
            })
        })
        .max_by_key(|(_, m, _)| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_why_in_words() {
        let u = Usage {
            used_bytes: 3 * 1024 * MB,
            held_bytes: 0,
            quota_bytes: 2048 * MB,
            entries: 10,
            max_entries: 100,
            host_free_bytes: 10_000 * MB,
            host_reserve_bytes: 1024 * MB,
            counted_at: String::new(),
        };
        assert!(
            u.refusal()
                .unwrap()
                .contains("3072 MB, over its disk quota of 2048 MB")
        );
        let held = Usage {
            held_bytes: 2048 * MB,
            ..u.clone()
        };
        assert!(held.refusal().unwrap().contains(
            "take 3072 MB (2048 MB of it in files deleted but still held open), over its disk quota"
        ));
        let u = Usage {
            used_bytes: MB,
            entries: 101,
            ..u
        };
        assert!(
            u.refusal()
                .unwrap()
                .contains("has 101 files and folders, over its limit of 100")
        );
        assert!(u.over_quota());
        let u = Usage {
            entries: 100,
            host_free_bytes: 100 * MB,
            ..u
        };
        assert!(u.refusal().unwrap().contains("nearly full (100 MB free"));
        assert!(!u.over_quota());
        let u = Usage {
            host_free_bytes: 5000 * MB,
            ..u
        };
        assert_eq!(u.refusal(), None);
    }

    #[test]
    fn the_filesystem_of_a_path_is_found() {
        let (fstype, mount, _) = project_quotas(std::path::Path::new("/proc/self")).unwrap();
        assert_eq!((fstype.as_str(), mount.as_str()), ("proc", "/proc"));
    }
}
