//! Space held by files deleted while still open.
//!
//! An agent can delete a file it keeps open (`exec 3>f; rm f`) and go on
//! writing into it: its blocks stay taken, yet it is in no tree the walk
//! counts. So while a group's container runs, its count also looks into
//! the container's processes (every process in the container's process
//! namespace, found by one pass over `/proc`) and adds each regular file
//! they hold that has no name left (`st_nlink == 0`) and lies on the device
//! of one of the group's trees: its allocated blocks, each inode once. A
//! file is held
//! - open, by any thread (`/proc/<pid>/task/<tid>/fd`: a thread may have a
//!   file table of its own), or
//! - mapped into memory after its last descriptor was closed
//!   (`/proc/<pid>/maps` names the deleted ones, `/proc/<pid>/map_files`
//!   reaches them; that needs `CAP_SYS_ADMIN` or `CAP_CHECKPOINT_RESTORE`).
//!
//! Files on the container's tmpfs mounts are on other devices, bounded by
//! their sizes. Looking into another user's processes needs root or
//! `CAP_SYS_PTRACE`; without them the agent runs as the host's own user,
//! whose processes are readable unless one makes itself undumpable:
//! [`Scan::process`] then fails, and so does the count.

use std::collections::{HashMap, HashSet};
use std::io;

use rustix::fs::{FileType, Stat};

/// Steps (a process's namespace, an open file, a map looked at) between
/// two calls of the pace: a process with many threads or files is paced
/// too.
const PACE_EVERY: u64 = 256;

/// Where a container's processes are seen.
const PROC: &str = "/proc";

/// What a group's processes hold in files deleted while open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Allocated bytes, each file once.
    pub bytes: u64,
    pub files: u64,
}

/// What the host may see of its agents' processes (its capabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sight {
    /// Open files of any user's processes (root or `CAP_SYS_PTRACE`).
    pub any_user: bool,
    /// Files only mapped into memory (`CAP_SYS_ADMIN` or
    /// `CAP_CHECKPOINT_RESTORE`).
    pub maps: bool,
}

impl Sight {
    /// This process's effective capabilities, from `/proc/self/status`.
    pub fn of_self() -> Sight {
        let caps = std::fs::read_to_string(format!("{PROC}/self/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("CapEff:"))
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            })
            .unwrap_or(0);
        let has = |bit: u32| caps & (1u64 << bit) != 0;
        // CAP_SYS_PTRACE 19, CAP_SYS_ADMIN 21, CAP_CHECKPOINT_RESTORE 40.
        Sight {
            any_user: has(19),
            maps: has(21) || has(40),
        }
    }

    /// What it means for the quotas, in words (`g2 doctor`, the log).
    pub fn describe(&self) -> String {
        let open = if self.any_user {
            "files agents deleted but hold open are counted too"
        } else {
            "files agents deleted but hold open are counted too (agents run as the host's user; \
             without root or CAP_SYS_PTRACE an agent process that hides them is stopped)"
        };
        if self.maps {
            format!("{open}, mapped ones included")
        } else {
            format!(
                "{open}, but not those only mapped into memory (that needs root, CAP_SYS_ADMIN \
                 or CAP_CHECKPOINT_RESTORE)"
            )
        }
    }
}

/// The process namespace of a container whose first process the engine
/// names `pid`, once that process is checked to be the container's here:
/// its cgroup names the container, its namespace is not the host's, and
/// its open files can be read. An error says, in words, why the
/// container's processes cannot be looked into.
pub fn namespace(pid: u32, container_id: &str) -> Result<u64, String> {
    let unseen = || {
        format!(
            "its process {pid} is not to be seen here (gone already, or the host does not \
             share the Docker engine's process namespace)"
        )
    };
    let cgroup = std::fs::read_to_string(format!("{PROC}/{pid}/cgroup")).map_err(|_| unseen())?;
    if container_id.is_empty() || !cgroup.contains(container_id) {
        return Err(unseen());
    }
    let denied = |e: &io::Error| {
        format!(
            "the host may not read its processes' open files ({e}; run it as root or give it CAP_SYS_PTRACE)"
        )
    };
    let ns = rustix::fs::stat(format!("{PROC}/{pid}/ns/pid"))
        .map_err(|e| denied(&e.into()))?
        .st_ino;
    let own = rustix::fs::stat(format!("{PROC}/self/ns/pid")).map_err(|e| denied(&e.into()))?;
    if ns == own.st_ino {
        return Err("it shares the host's process namespace".into());
    }
    std::fs::read_dir(format!("{PROC}/{pid}/fd")).map_err(|e| denied(&e))?;
    Ok(ns)
}

/// One look into processes: what they hold, by (device, inode).
pub struct Scan<'p> {
    devices: HashSet<u64>,
    /// Look into memory maps too.
    maps: bool,
    found: HashMap<(u64, u64), u64>,
    /// A memory map could not be followed (the capability is missing
    /// after all): maps were left out from then on.
    pub maps_denied: bool,
    steps: u64,
    /// Called every [`PACE_EVERY`] steps; an error ends the scan with it.
    pace: &'p mut dyn FnMut() -> io::Result<()>,
}

impl<'p> Scan<'p> {
    /// Counts files on `devices` only; through memory maps too if `maps`.
    pub fn new(
        devices: HashSet<u64>,
        maps: bool,
        pace: &'p mut dyn FnMut() -> io::Result<()>,
    ) -> Scan<'p> {
        Scan {
            devices,
            maps,
            found: HashMap::new(),
            maps_denied: false,
            steps: 0,
            pace,
        }
    }

    fn step(&mut self) -> io::Result<()> {
        self.steps += 1;
        if self.steps.is_multiple_of(PACE_EVERY) {
            (self.pace)()?;
        }
        Ok(())
    }

    /// Looks into every process of one of `namespaces`, in the order of
    /// their pids (so a process that hands its file to a child and exits
    /// is met again in the child).
    pub fn namespaces(&mut self, namespaces: &[u64]) -> io::Result<()> {
        if namespaces.is_empty() || self.devices.is_empty() {
            return Ok(());
        }
        let mut pids: Vec<u32> = std::fs::read_dir(PROC)?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        pids.sort_unstable();
        for pid in pids {
            self.step()?;
            match rustix::fs::stat(format!("{PROC}/{pid}/ns/pid")) {
                Ok(st) if namespaces.contains(&st.st_ino) => self.process(pid)?,
                // Not one of them, gone, or another user's that is none
                // of the containers' (theirs were checked readable).
                _ => {}
            }
        }
        Ok(())
    }

    /// Looks into one process: its threads' open files and, if asked, its
    /// memory maps. A process gone meanwhile holds nothing; one whose
    /// files may not be read is an error.
    pub fn process(&mut self, pid: u32) -> io::Result<()> {
        let tasks = match std::fs::read_dir(format!("{PROC}/{pid}/task")) {
            Ok(t) => t,
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err(hidden(pid, e)),
        };
        for task in tasks {
            let Ok(task) = task else { continue };
            let fds = task.path().join("fd");
            let list = match std::fs::read_dir(&fds) {
                Ok(l) => l,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(hidden(pid, e)),
            };
            for fd in list {
                let Ok(fd) = fd else { continue };
                // Follows the descriptor to the open file, named or not.
                if let Ok(st) = rustix::fs::stat(fd.path()) {
                    self.take(&st);
                }
                self.step()?;
            }
        }
        if self.maps && !self.maps_denied {
            self.mapped(pid)?;
        }
        Ok(())
    }

    /// Files mapped into the process's memory that have no name left.
    fn mapped(&mut self, pid: u32) -> io::Result<()> {
        let maps = match std::fs::read_to_string(format!("{PROC}/{pid}/maps")) {
            Ok(m) => m,
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err(hidden(pid, e)),
        };
        let mut seen = HashSet::new();
        for line in maps.lines().filter(|l| l.ends_with(" (deleted)")) {
            // start-end perms offset dev inode path
            let mut f = line.split_ascii_whitespace();
            let (Some(range), Some(dev), Some(inode)) = (f.next(), f.nth(2), f.next()) else {
                continue;
            };
            let Some((start, end)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
            else {
                continue;
            };
            if inode == "0" || !seen.insert((dev, inode)) {
                continue;
            }
            self.step()?;
            // map_files names ranges without leading zeros.
            match rustix::fs::stat(format!("{PROC}/{pid}/map_files/{start:x}-{end:x}")) {
                Ok(st) => self.take(&st),
                Err(rustix::io::Errno::PERM | rustix::io::Errno::ACCESS) => {
                    self.maps_denied = true;
                    return Ok(());
                }
                // Unmapped or gone meanwhile.
                Err(_) => {}
            }
        }
        Ok(())
    }

    fn take(&mut self, st: &Stat) {
        if st.st_nlink == 0
            && FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && self.devices.contains(&st.st_dev)
        {
            let bytes = (st.st_blocks as u64).saturating_mul(512);
            self.found.insert((st.st_dev, st.st_ino), bytes);
        }
    }

    /// What was found, each file once.
    pub fn held(&self) -> Held {
        Held {
            bytes: self.found.values().sum(),
            files: self.found.len() as u64,
        }
    }

    /// The bytes counted for one file (device, inode), if it was found.
    pub fn file(&self, id: (u64, u64)) -> Option<u64> {
        self.found.get(&id).copied()
    }
}

fn gone(e: &io::Error) -> bool {
    matches!(
        rustix::io::Errno::from_io_error(e),
        Some(rustix::io::Errno::NOENT | rustix::io::Errno::SRCH)
    )
}

fn hidden(pid: u32, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("process {pid} of the agent hides its open files ({e})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::process::{Child, Command, Stdio};

    fn dev_of(p: &std::path::Path) -> HashSet<u64> {
        HashSet::from([std::fs::metadata(p).unwrap().dev()])
    }

    /// `sleep` with `stdin` and `stdout` given.
    fn holder(stdin: Stdio, stdout: Stdio) -> Child {
        Command::new("sleep")
            .arg("30")
            .stdin(stdin)
            .stdout(stdout)
            .spawn()
            .unwrap()
    }

    /// A pace that never sleeps, for as long as the test needs it.
    fn free() -> &'static mut dyn FnMut() -> io::Result<()> {
        Box::leak(Box::new(|| Ok(())))
    }

    fn scan(pid: u32, devices: HashSet<u64>) -> Scan<'static> {
        let mut s = Scan::new(devices, true, free());
        s.process(pid).unwrap();
        s
    }

    #[test]
    fn a_deleted_file_held_open_is_counted_once_a_linked_one_not() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("held.bin");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // The same file on two descriptors of the child.
        let mut child = holder(file.try_clone().unwrap().into(), file.into());
        let devices = dev_of(d.path());
        let dev = *devices.iter().next().unwrap();
        // Still linked: the walk counts it, this does not.
        assert_eq!(scan(child.id(), devices.clone()).held(), Held::default());
        std::fs::remove_file(&path).unwrap();
        let s = scan(child.id(), devices.clone());
        assert!(s.file((dev, ino)).unwrap() >= 1 << 20, "{:?}", s.held());
        assert_eq!(s.held().files, 1, "one inode on two descriptors");
        // On another device, it is not the group's.
        assert_eq!(
            scan(child.id(), HashSet::from([dev + 1])).held(),
            Held::default()
        );
        child.kill().unwrap();
        child.wait().unwrap();
        // Gone: nothing held, no error.
        assert_eq!(scan(child.id(), devices).held(), Held::default());
    }

    #[test]
    fn a_deleted_file_only_mapped_is_counted() {
        if !Sight::of_self().maps {
            eprintln!("skipped: following memory maps needs CAP_SYS_ADMIN");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("mapped.bin");
        std::fs::write(&path, vec![2u8; 256 << 10]).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a private read-only mapping of a file nothing else
        // writes, unmapped below.
        let map = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                256 << 10,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::PRIVATE,
                &file,
                0,
            )
        }
        .unwrap();
        drop(file);
        std::fs::remove_file(&path).unwrap();
        let devices = dev_of(d.path());
        let dev = *devices.iter().next().unwrap();
        let s = scan(std::process::id(), devices.clone());
        // SAFETY: the mapping made above, unused from here on.
        unsafe { rustix::mm::munmap(map, 256 << 10) }.unwrap();
        assert!(!s.maps_denied);
        assert!(s.file((dev, ino)).unwrap() >= 256 << 10, "{:?}", s.held());
        // Without maps, it is not seen.
        let mut s = Scan::new(devices, false, free());
        s.process(std::process::id()).unwrap();
        assert_eq!(s.file((dev, ino)), None);
    }

    #[test]
    fn a_containers_namespace_is_found_and_its_processes_scanned() {
        // Our own process is in the host's namespace: refused as a container's.
        let me = std::process::id();
        let cgroup = std::fs::read_to_string(format!("/proc/{me}/cgroup")).unwrap();
        let name = cgroup.trim().rsplit('/').next().unwrap_or_default();
        assert!(namespace(me, "not-a-container-id").is_err());
        if !name.is_empty() {
            assert_eq!(
                namespace(me, name).unwrap_err(),
                "it shares the host's process namespace"
            );
        }
        assert!(
            namespace(u32::MAX, "x")
                .unwrap_err()
                .contains("not to be seen")
        );
        // A sweep over our own namespace meets a child holding a file.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("held.bin");
        std::fs::write(&path, vec![3u8; 64 << 10]).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        let mut child = holder(std::fs::File::open(&path).unwrap().into(), Stdio::null());
        std::fs::remove_file(&path).unwrap();
        let devices = dev_of(d.path());
        let dev = *devices.iter().next().unwrap();
        let own = rustix::fs::stat("/proc/self/ns/pid").unwrap().st_ino;
        let mut paced = 0;
        let mut pace = || {
            paced += 1;
            Ok(())
        };
        let mut s = Scan::new(devices, false, &mut pace);
        s.namespaces(&[own]).unwrap();
        assert!(s.file((dev, ino)).unwrap() >= 64 << 10);
        drop(s);
        assert!(paced > 0);
        // A namespace nobody is in holds nothing.
        let mut s = Scan::new(dev_of(d.path()), false, free());
        s.namespaces(&[1]).unwrap();
        assert_eq!(s.held(), Held::default());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
