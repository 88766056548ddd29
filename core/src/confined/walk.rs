//! Counting a tree an agent writes: every entry at any depth, whatever
//! its name, without following a link.
//!
//! Names are taken as the kernel gives them (bytes, not UTF-8), so a file
//! named `\xff` is counted like any other. Depth has no limit: only the
//! handles of the [`KEEP_OPEN`] folders nearest the root stay open, and a
//! deeper walk climbs back through `..`, checking that it arrives where it
//! came from (device and inode); when the agent moved a folder meanwhile,
//! the walk starts over (at most [`ATTEMPTS`] times) rather than count
//! outside the tree. Every single-name open uses `O_NOFOLLOW`, so a link
//! is counted as an entry of its own, never followed.
//!
//! The caller paces the walk: `pace` is called every [`PACE_EVERY`]
//! entries and may sleep (a CPU budget) or fail (a host stopping).

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, Stat};

use super::{Dir, to_io};

/// Folders nearest the root whose handles stay open during a walk.
pub const KEEP_OPEN: usize = 64;
/// How often (in entries) a walk calls its pace.
pub const PACE_EVERY: u64 = 256;
/// Walks begun before giving up on a tree that keeps changing shape.
pub const ATTEMPTS: usize = 3;

/// What a tree holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Bytes allocated on disk (blocks, so a sparse file counts what it
    /// takes), each inode once, the root folder's own included.
    pub bytes: u64,
    /// Names beneath the root, at any depth: files, folders, links and
    /// anything else (the root itself is not one).
    pub entries: u64,
}

/// How a walk treats what it finds.
pub struct Walk<'a> {
    /// Gives every entry (and the root) to `uid:gid`: links themselves,
    /// never what they point to.
    pub give: Option<(u32, u32)>,
    /// Called every `PACE_EVERY` entries with the tally so far; an
    /// error ends the walk with it.
    pub pace: &'a mut dyn FnMut(&Tally) -> io::Result<()>,
}

/// A folder the walk is in: its handle (unless it is too far up), its
/// identity, and the subfolders still to visit.
struct Level {
    fd: Option<OwnedFd>,
    id: (u64, u64),
    todo: Vec<CString>,
}

/// The tree changed shape under a walk (a folder moved, or removed with
/// the walk inside it).
#[derive(Debug)]
struct Moved;

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "folders were moved while the tree was counted ({ATTEMPTS} attempts)"
        )
    }
}

impl std::error::Error for Moved {}

fn moved(e: &io::Error) -> bool {
    matches!(e.get_ref(), Some(inner) if inner.is::<Moved>())
}

fn id(st: &Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

fn blocks(st: &Stat) -> u64 {
    (st.st_blocks as u64).saturating_mul(512)
}

fn open_dir(at: impl AsFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        at,
        name,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

impl Dir {
    /// Counts the tree beneath this handle (see the module's docs).
    pub fn tally(&self, walk: &mut Walk<'_>) -> io::Result<Tally> {
        for _ in 0..ATTEMPTS {
            match self.tally_once(walk) {
                Err(e) if moved(&e) => continue,
                r => return r,
            }
        }
        Err(io::Error::other(Moved))
    }

    fn tally_once(&self, walk: &mut Walk<'_>) -> io::Result<Tally> {
        let mut w = Walker {
            tally: Tally::default(),
            linked: HashSet::new(),
            since_pace: 0,
            give: walk.give,
            pace: &mut *walk.pace,
        };
        let root = open_dir(&self.fd, c".").map_err(to_io)?;
        let st = rustix::fs::fstat(&root).map_err(to_io)?;
        w.own_dir(&root, &st);
        let todo = w.list(&root)?;
        let mut levels = vec![Level {
            fd: Some(root),
            id: id(&st),
            todo,
        }];
        while let Some(top) = levels.last_mut() {
            let Some(name) = top.todo.pop() else {
                let done = levels.pop().and_then(|l| l.fd);
                if let (Some(parent), Some(child)) = (levels.last_mut(), done)
                    && parent.fd.is_none()
                {
                    parent.fd = Some(climb(&child, parent.id)?);
                }
                continue;
            };
            let here = top.fd.as_ref().expect("the deepest level is open");
            let fd = match open_dir(here, &name) {
                Ok(fd) => fd,
                // Gone, or swapped for a file or a link since it was listed:
                // counted as an entry already, and nothing beneath it now.
                Err(
                    rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP,
                ) => continue,
                Err(e) => return Err(to_io(e)),
            };
            let st = rustix::fs::fstat(&fd).map_err(to_io)?;
            w.own_dir(&fd, &st);
            let todo = w.list(&fd)?;
            // Far from the root, the handle of the level that falls out of
            // the window is closed; it is found again through "..".
            if levels.len() >= KEEP_OPEN {
                let far = levels.len() - KEEP_OPEN;
                levels[far].fd = None;
            }
            levels.push(Level {
                fd: Some(fd),
                id: id(&st),
                todo,
            });
        }
        Ok(w.tally)
    }
}

/// The parent of `child`, which must be the folder `expect` (device and
/// inode): otherwise the tree was rearranged and the walk starts over.
fn climb(child: &OwnedFd, expect: (u64, u64)) -> io::Result<OwnedFd> {
    let up = match rustix::fs::openat(
        child,
        c"..",
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(up) => up,
        // The folder was removed while the walk was in it: the way back
        // is gone, so the walk starts over.
        Err(rustix::io::Errno::NOENT) => return Err(io::Error::other(Moved)),
        Err(e) => return Err(to_io(e)),
    };
    let st = rustix::fs::fstat(&up).map_err(to_io)?;
    if id(&st) == expect {
        Ok(up)
    } else {
        Err(io::Error::other(Moved))
    }
}

struct Walker<'p> {
    tally: Tally,
    /// Files with more than one name, so each is counted once.
    linked: HashSet<(u64, u64)>,
    since_pace: u64,
    give: Option<(u32, u32)>,
    pace: &'p mut dyn FnMut(&Tally) -> io::Result<()>,
}

impl Walker<'_> {
    /// Counts an opened folder's own blocks and gives it away if asked.
    fn own_dir(&mut self, fd: &OwnedFd, st: &Stat) {
        self.tally.bytes += blocks(st);
        if let Some((uid, gid)) = self.give
            && (st.st_uid != uid || st.st_gid != gid)
        {
            let (u, g) = (
                rustix::fs::Uid::from_raw(uid),
                rustix::fs::Gid::from_raw(gid),
            );
            let _ = rustix::fs::fchown(fd, Some(u), Some(g));
        }
    }

    /// Counts every entry of the folder `fd` (files by their blocks) and
    /// returns the names of its subfolders.
    fn list(&mut self, fd: &OwnedFd) -> io::Result<Vec<CString>> {
        let mut folders = Vec::new();
        let mut buf: Vec<u8> = Vec::with_capacity(32 * 1024);
        let mut entries = RawDir::new(fd, buf.spare_capacity_mut());
        while let Some(e) = entries.next() {
            let e = match e {
                Ok(e) => e,
                // The folder was removed while it was read (an agent's
                // scratch folder): nothing more lies beneath it.
                Err(rustix::io::Errno::NOENT) => break,
                Err(e) => return Err(to_io(e)),
            };
            let name = e.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            self.tally.entries += 1;
            match e.file_type() {
                FileType::Directory => folders.push(name.to_owned()),
                _ => match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                        folders.push(name.to_owned());
                    }
                    Ok(st) => self.file(fd, name, &st),
                    // Gone since it was listed.
                    Err(rustix::io::Errno::NOENT) => {}
                    Err(e) => return Err(to_io(e)),
                },
            }
            self.since_pace += 1;
            if self.since_pace >= PACE_EVERY {
                self.since_pace = 0;
                (self.pace)(&self.tally)?;
            }
        }
        Ok(folders)
    }

    fn file(&mut self, dir: &OwnedFd, name: &CStr, st: &Stat) {
        if st.st_nlink <= 1 || self.linked.insert(id(st)) {
            self.tally.bytes += blocks(st);
        }
        if let Some((uid, gid)) = self.give
            && (st.st_uid != uid || st.st_gid != gid)
        {
            let _ = rustix::fs::chownat(
                dir,
                name,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn count(root: &Path) -> Tally {
        let mut pace = |_: &Tally| Ok(());
        Dir::open(root)
            .unwrap()
            .tally(&mut Walk {
                give: None,
                pace: &mut pace,
            })
            .unwrap()
    }

    /// Counts `root`, making `change` to the tree when the walk first
    /// paces (in the middle of it).
    fn count_changing(root: &Path, change: impl FnOnce()) -> io::Result<Tally> {
        let mut change = Some(change);
        let mut pace = |_: &Tally| {
            if let Some(c) = change.take() {
                c();
            }
            Ok(())
        };
        Dir::open(root).unwrap().tally(&mut Walk {
            give: None,
            pace: &mut pace,
        })
    }

    #[test]
    fn every_entry_at_any_depth_and_with_any_name_counts() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("tree");
        // 300 nested folders: far past the handles kept open.
        let mut deep = root.clone();
        for _ in 0..300 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("bottom.bin"), vec![7u8; 512 << 10]).unwrap();
        // A name that is not UTF-8, a folder too.
        let odd = root.join(std::ffi::OsStr::from_bytes(b"\xff\xfe"));
        std::fs::create_dir(&odd).unwrap();
        std::fs::write(
            odd.join(std::ffi::OsStr::from_bytes(b"\xff")),
            vec![1u8; 256 << 10],
        )
        .unwrap();
        let t = count(&root);
        // 300 folders, the bottom file, the odd folder and its file.
        assert_eq!(t.entries, 303, "{t:?}");
        assert!(t.bytes >= (768 << 10), "{t:?}");
    }

    #[test]
    fn links_count_as_entries_and_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let (root, host) = (d.path().join("tree"), d.path().join("host"));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("big.bin"), vec![1u8; 1 << 20]).unwrap();
        symlink(&host, root.join("elsewhere")).unwrap();
        std::fs::write(root.join("sub/own.bin"), vec![1u8; 256 << 10]).unwrap();
        std::fs::hard_link(root.join("sub/own.bin"), root.join("again.bin")).unwrap();
        let t = count(&root);
        assert_eq!(t.entries, 4, "sub, own.bin, again.bin, elsewhere: {t:?}");
        assert!((256 << 10..(1 << 20)).contains(&t.bytes), "{t:?}");
    }

    #[test]
    fn many_empty_files_are_entries_and_pace_is_called() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..2_000 {
            std::fs::write(d.path().join(format!("f{i}")), b"").unwrap();
        }
        let mut calls = 0;
        let mut pace = |_: &Tally| {
            calls += 1;
            Ok(())
        };
        let t = Dir::open(d.path())
            .unwrap()
            .tally(&mut Walk {
                give: None,
                pace: &mut pace,
            })
            .unwrap();
        assert_eq!(t.entries, 2_000);
        assert_eq!(calls, 2_000 / PACE_EVERY as usize);
        // A pace that fails ends the walk with its error.
        let mut stop = |_: &Tally| Err(io::Error::other("stopping"));
        let e = Dir::open(d.path())
            .unwrap()
            .tally(&mut Walk {
                give: None,
                pace: &mut stop,
            })
            .unwrap_err();
        assert_eq!(e.to_string(), "stopping");
    }

    #[test]
    fn a_folder_moved_during_a_deep_walk_starts_it_over_inside_the_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("tree");
        let mut deep = root.join("a");
        for _ in 0..(KEEP_OPEN + 20) {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        for i in 0..(PACE_EVERY + 10) {
            std::fs::write(deep.join(format!("f{i}")), b"").unwrap();
        }
        // While the walk is at the bottom, the chain under a/ moves up to
        // the root: climbing back through ".." no longer arrives where the
        // walk came from.
        let t = count_changing(&root, || {
            std::fs::rename(root.join("a/d"), root.join("b")).unwrap();
        })
        .unwrap();
        assert!(root.join("b").is_dir(), "moved during the walk");
        assert_eq!(t, count(&root), "counted again, as the tree is now");
        assert_eq!(t.entries, 2 + (KEEP_OPEN as u64 + 19) + PACE_EVERY + 10);
    }

    #[test]
    fn folders_removed_during_a_walk_are_counted_as_they_are_now() {
        // A scratch folder removed while it is read, shallow and deep (past
        // the handles kept open, so the walk cannot climb back): the count
        // goes on or starts over, never fails.
        for depth in [1, KEEP_OPEN + 20] {
            let d = tempfile::tempdir().unwrap();
            let root = d.path().join("tree");
            let mut deep = root.join("tmp");
            for _ in 1..depth {
                deep.push("d");
            }
            std::fs::create_dir_all(&deep).unwrap();
            std::fs::write(root.join("kept"), b"x").unwrap();
            for i in 0..(PACE_EVERY + 10) {
                std::fs::write(deep.join(format!("f{i}")), b"").unwrap();
            }
            let t = count_changing(&root, || {
                std::fs::remove_dir_all(root.join("tmp")).unwrap();
            })
            .unwrap_or_else(|e| panic!("depth {depth}: {e}"));
            assert!(!root.join("tmp").exists(), "removed during the walk");
            assert!(t.entries >= 1, "depth {depth}: {t:?}");
            assert_eq!(count(&root).entries, 1, "only kept is left");
        }
        // The tree itself removed after it was opened holds nothing (its
        // listing ends at once).
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("tree");
        std::fs::create_dir_all(root.join("a")).unwrap();
        let dir = Dir::open(&root).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let mut pace = |_: &Tally| Ok(());
        let t = dir
            .tally(&mut Walk {
                give: None,
                pace: &mut pace,
            })
            .unwrap();
        assert_eq!(t.entries, 0, "{t:?}");
    }

    #[test]
    fn a_walk_gives_the_tree_to_its_owner() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/b/f"), b"x").unwrap();
        let me = (
            rustix::process::getuid().as_raw(),
            rustix::process::getgid().as_raw(),
        );
        // Giving to oneself works as any user; root may give to anyone.
        let owner = if me.0 == 0 { (4321, 4321) } else { me };
        let mut pace = |_: &Tally| Ok(());
        Dir::open(d.path())
            .unwrap()
            .tally(&mut Walk {
                give: Some(owner),
                pace: &mut pace,
            })
            .unwrap();
        for p in ["", "a", "a/b", "a/b/f"] {
            let m = std::fs::symlink_metadata(d.path().join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), owner, "{p:?}");
        }
    }
}
