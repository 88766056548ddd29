//! Confined file access in folders an agent can write.
//!
//! A group's folder, IPC folder and `.claude` state are mounted writable
//! into its container, and the host (often root) works in them too. An
//! agent can plant a symbolic link in place of any file or folder there,
//! at any moment, hoping the host follows it to a host file. So the host
//! never uses a path into those trees: it opens the tree's root once as a
//! directory handle ([`Dir`]) and does every open, read, write, rename,
//! listing and delete relative to a handle, with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: a link
//! at any component is refused (`ELOOP`), never followed, and nothing
//! resolves outside the handle. Single names (`renameat`, `unlinkat`,
//! `mkdirat`, `linkat`) never follow a link in their last component.
//!
//! A refusal is an `io::Error` that [`is_planted`] recognises, so callers
//! can log and record it apart from ordinary I/O errors. Counting a whole
//! tree (the disk quotas) is [`Dir::tally`], in `walk.rs`.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

mod walk;
pub use walk::{Tally, Walk};

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// The hint of the temp files [`Dir::write_pending`] writes first.
const PENDING_HINT: &str = "pending";

/// Where a file waits for its name ([`Dir::write_pending`]).
pub fn pending_name(name: &str) -> String {
    format!(".{name}.pending")
}

/// What a folder entry left by [`Dir::write_pending`] is: the name a
/// pending file waits for, or a temp file of one that was never linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover<'a> {
    Pending(&'a str),
    Temp,
}

/// Whether `entry` was left by [`Dir::write_pending`] (a crash between
/// writing and settling), and as what.
pub fn leftover(entry: &str) -> Option<Leftover<'_>> {
    if let Some(name) = entry
        .strip_prefix('.')
        .and_then(|e| e.strip_suffix(".pending"))
        .filter(|n| !n.is_empty() && !n.starts_with('.') && single(n).is_ok())
    {
        return Some(Leftover::Pending(name));
    }
    let hex = entry
        .strip_prefix(&format!(".{PENDING_HINT}."))?
        .strip_suffix(".tmp")?;
    (hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(Leftover::Temp)
}

/// Whether an error means a link (or an escape) was found where the host
/// expected a plain file or folder.
pub fn is_planted(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV))
}

/// An open directory; every operation stays beneath it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    /// Who gets what this handle creates (uid, gid): a host running as
    /// root gives the agent's files to the agent's user.
    owner: Option<(u32, u32)>,
}

/// One entry of a folder, as listed (links are reported, never followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    Socket,
    Other,
}

fn to_io(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// A single file name: no separator, not `.`/`..`, not empty.
fn single(name: &str) -> io::Result<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    Ok(name)
}

/// A relative path of plain components.
fn relative(rel: &Path) -> io::Result<&Path> {
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a plain relative path", rel.display()),
        ));
    }
    Ok(rel)
}

impl Dir {
    /// Opens a folder the host trusts (its own path, from its settings):
    /// links in `path` are followed as the operator made them.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(to_io)?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
            owner: None,
        })
    }

    /// Opens `rel` beneath the trusted folder `base`, refusing any link in
    /// `rel`; with `create`, missing folders are made (mode 0755).
    pub fn open_beneath(base: &Path, rel: &Path, create: bool) -> io::Result<Dir> {
        let base = Dir::open(base)?;
        if create {
            base.ensure_path(rel).map(|(d, _)| d)
        } else {
            base.open_dir(rel)
        }
    }

    /// Gives everything this handle (and the handles opened from it)
    /// creates to `uid:gid`.
    pub fn owned_by(mut self, uid: u32, gid: u32) -> Dir {
        self.owner = Some((uid, gid));
        self
    }

    fn give<Fd: AsFd>(&self, fd: Fd) {
        if let Some((u, g)) = self.owner {
            let (u, g) = (rustix::fs::Uid::from_raw(u), rustix::fs::Gid::from_raw(g));
            let _ = rustix::fs::fchown(fd, Some(u), Some(g));
        }
    }

    /// The folder's path, for messages only (never reopened by path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn openat(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let rel = relative(rel)?;
        loop {
            match rustix::fs::openat2(&self.fd, rel, flags | OFlags::CLOEXEC, mode, RESOLVE) {
                // The kernel asks for a retry when a rename raced the lookup.
                Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => continue,
                r => return r.map_err(to_io),
            }
        }
    }

    /// An existing folder beneath this one.
    pub fn open_dir(&self, rel: impl AsRef<Path>) -> io::Result<Dir> {
        let rel = rel.as_ref();
        let fd = self.openat(rel, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())?;
        Ok(Dir {
            fd,
            path: self.path.join(rel),
            owner: self.owner,
        })
    }

    /// The folder `name`, created when missing. When something else is in
    /// its place (a link, a file), that is moved aside — a link removed, a
    /// file renamed to `.{name}.displaced-…` — and a real folder made;
    /// the `bool` says so.
    pub fn ensure_dir(&self, name: &str) -> io::Result<(Dir, bool)> {
        let name = single(name)?;
        let created = match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(to_io(e)),
        };
        let (dir, replaced) = match self.open_dir(name) {
            Ok(d) => (d, false),
            Err(e) if is_planted(&e) || e.raw_os_error() == Some(libc::ENOTDIR) => {
                self.displace(name)?;
                rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)).map_err(to_io)?;
                (self.open_dir(name)?, true)
            }
            Err(e) => return Err(e),
        };
        if created || replaced {
            self.give(&dir);
        }
        Ok((dir, replaced))
    }

    /// [`Dir::ensure_dir`] for each component of `rel`; `true` when any
    /// was replaced.
    pub fn ensure_path(&self, rel: &Path) -> io::Result<(Dir, bool)> {
        let rel = relative(rel)?;
        let mut replaced = false;
        let mut dir: Option<Dir> = None;
        for c in rel.components() {
            let name = c
                .as_os_str()
                .to_str()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8"))?;
            let (d, r) = dir.as_ref().unwrap_or(self).ensure_dir(name)?;
            replaced |= r;
            dir = Some(d);
        }
        Ok((dir.expect("a relative path has a component"), replaced))
    }

    /// Moves whatever is at `name` out of the way: a link (or other
    /// non-folder, non-file) is removed, a file or folder is renamed to a
    /// dot-name, so nothing of the agent's is lost.
    pub fn displace(&self, name: &str) -> io::Result<()> {
        let kind = self.kind(name)?;
        match kind {
            Some(Kind::File) | Some(Kind::Dir) => {
                let aside = format!(
                    ".{name}.displaced-{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..12]
                );
                rustix::fs::renameat(&self.fd, name, &self.fd, aside.as_str()).map_err(to_io)
            }
            Some(_) => self.remove(name),
            None => Ok(()),
        }
    }

    /// What is at `name` (without following a link), if anything.
    pub fn kind(&self, name: &str) -> io::Result<Option<Kind>> {
        match rustix::fs::statat(&self.fd, single(name)?, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(kind_of(FileType::from_raw_mode(st.st_mode)))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    /// What `name` is and its inode (device, inode), not following a link;
    /// `None` when nothing is there. Tells one's own socket from another
    /// process's put in its place.
    pub fn identity(&self, name: &str) -> io::Result<Option<(Kind, (u64, u64))>> {
        match rustix::fs::statat(&self.fd, single(name)?, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some((
                kind_of(FileType::from_raw_mode(st.st_mode)),
                (st.st_dev, st.st_ino),
            ))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    /// Opens a regular file for reading (a link, fifo or device is refused).
    pub fn open_file(&self, rel: impl AsRef<Path>) -> io::Result<File> {
        let fd = self.openat(
            rel.as_ref(),
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
        )?;
        let f = File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(f)
    }

    /// Reads a regular file of at most `max` bytes.
    pub fn read(&self, rel: impl AsRef<Path>, max: u64) -> io::Result<Vec<u8>> {
        let f = self.open_file(rel)?;
        let len = f.metadata()?.len();
        if len > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{len} bytes: at most {max} are read"),
            ));
        }
        let mut buf = Vec::with_capacity(len as usize);
        f.take(max + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("more than {max} bytes"),
            ));
        }
        Ok(buf)
    }

    /// Creates a fresh, randomly named dot-file exclusively and returns it
    /// with its name.
    fn temp_file(&self, hint: &str) -> io::Result<(File, String)> {
        for _ in 0..100 {
            let name = format!(
                ".{hint}.{}.tmp",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            );
            match self.openat(
                Path::new(&name),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(fd) => {
                    self.give(&fd);
                    return Ok((File::from(fd), name));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("could not create a temp file"))
    }

    /// Writes `name` through a temp file and a rename: a reader never sees
    /// half a file, and a link planted at `name` is replaced, not written
    /// through.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let name = single(name)?;
        let (mut f, tmp) = self.temp_file(name)?;
        let done = f.write_all(bytes).and_then(|()| {
            rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(to_io)
        });
        if done.is_err() {
            let _ = self.remove(&tmp);
        }
        done
    }

    /// Creates `name` with `bytes` unless something is there already
    /// (`false` then). Never replaces and never follows a link.
    pub fn create_new(&self, name: &str, bytes: &[u8]) -> io::Result<bool> {
        let name = single(name)?;
        match self.openat(
            Path::new(name),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o644),
        ) {
            Ok(fd) => {
                self.give(&fd);
                File::from(fd).write_all(bytes)?;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` to a new file named by `names` (the first that is
    /// free and not `reserved`), atomically and durably, never replacing
    /// anything: a temp file is written, synced, and hard-linked to its
    /// name (a hard link fails instead of replacing). Returns the name.
    pub fn write_new(
        &self,
        names: impl Iterator<Item = String>,
        bytes: &[u8],
        reserved: &dyn Fn(&str) -> bool,
    ) -> io::Result<String> {
        self.write_linked("new", names, bytes, reserved, &|n| n.to_string())
    }

    /// [`Dir::write_new`], but the file waits under the pending form of its
    /// name ([`pending_name`]) until [`Dir::settle`] gives it the name: a
    /// name is free when neither it nor its pending form is there. The
    /// caller records the name in between, so that a crash leaves either a
    /// pending file (removed, or settled once the record is seen) or a
    /// settled, recorded one — never a named file nobody recorded.
    pub fn write_pending(
        &self,
        names: impl Iterator<Item = String>,
        bytes: &[u8],
        reserved: &dyn Fn(&str) -> bool,
    ) -> io::Result<String> {
        let taken = |name: &str| reserved(name) || self.kind(name).is_ok_and(|k| k.is_some());
        self.write_linked(PENDING_HINT, names, bytes, &taken, &pending_name)
    }

    /// Gives the pending file of `name` its name, never replacing one;
    /// `false` when the name was taken meanwhile (the file stays pending).
    pub fn settle(&self, name: &str) -> io::Result<bool> {
        self.settle_as(name, name)
    }

    /// [`Dir::settle`] under another name, `as_name`.
    pub fn settle_as(&self, name: &str, as_name: &str) -> io::Result<bool> {
        let (name, as_name) = (single(name)?, single(as_name)?);
        match rustix::fs::renameat_with(
            &self.fd,
            pending_name(name).as_str(),
            &self.fd,
            as_name,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {
                let _ = rustix::fs::fsync(&self.fd);
                Ok(true)
            }
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(e) => Err(to_io(e)),
        }
    }

    /// Writes `bytes` to a temp file (`.{hint}.….tmp`), syncs it, and
    /// hard-links it to `target(name)` for the first of `names` that is not
    /// `reserved` and whose target is free.
    fn write_linked(
        &self,
        hint: &str,
        names: impl Iterator<Item = String>,
        bytes: &[u8],
        reserved: &dyn Fn(&str) -> bool,
        target: &dyn Fn(&str) -> String,
    ) -> io::Result<String> {
        let (mut f, tmp) = self.temp_file(hint)?;
        let result = (|| {
            f.write_all(bytes)?;
            f.sync_all()?;
            for name in names {
                let name = single(&name)?.to_string();
                if reserved(&name) {
                    continue;
                }
                match rustix::fs::linkat(
                    &self.fd,
                    tmp.as_str(),
                    &self.fd,
                    target(&name).as_str(),
                    AtFlags::empty(),
                ) {
                    // A pending link reserves the name only if nobody
                    // settled it meanwhile: another writer's rename from
                    // the same pending name can land between the check
                    // and the link, so look again while holding it.
                    Ok(()) if target(&name) != name && reserved(&name) => {
                        let _ = self.remove(&target(&name));
                        continue;
                    }
                    Ok(()) => {
                        let _ = rustix::fs::fsync(&self.fd);
                        return Ok(name);
                    }
                    Err(rustix::io::Errno::EXIST) => continue,
                    Err(e) => return Err(to_io(e)),
                }
            }
            Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("no free name in {}", self.path.display()),
            ))
        })();
        let _ = self.remove(&tmp);
        result
    }

    /// Renames `from` (here) to `to` in `dest`; neither name is followed.
    pub fn rename_to(&self, from: &str, dest: &Dir, to: &str) -> io::Result<()> {
        rustix::fs::renameat(&self.fd, single(from)?, &dest.fd, single(to)?).map_err(to_io)
    }

    /// Removes a file or link (never what a link points to).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        rustix::fs::unlinkat(&self.fd, single(name)?, AtFlags::empty()).map_err(to_io)
    }

    /// Removes an empty folder (a link is refused: it is not a folder).
    pub fn remove_dir(&self, name: &str) -> io::Result<()> {
        rustix::fs::unlinkat(&self.fd, single(name)?, AtFlags::REMOVEDIR).map_err(to_io)
    }

    /// The folder's entries (not `.`/`..`), links reported as links.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for e in rustix::fs::Dir::read_from(&self.fd).map_err(to_io)? {
            let e = e.map_err(to_io)?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let name = name.to_string_lossy().into_owned();
            let kind = match e.file_type() {
                FileType::Unknown => self.kind(&name)?.unwrap_or(Kind::Other),
                t => kind_of(t),
            };
            out.push(Entry { name, kind });
        }
        Ok(out)
    }

    /// The finished `*.json` entries here, in name order; dot-named temp
    /// files and folders are skipped. Links are listed (never followed) so
    /// that reading them is refused and recorded rather than ignored.
    pub fn pending(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .entries()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| {
                matches!(e.kind, Kind::File | Kind::Link)
                    && e.name.ends_with(".json")
                    && !e.name.starts_with('.')
            })
            .map(|e| e.name)
            .collect();
        names.sort();
        names
    }

    /// Gives this folder and its own entries (not what is beneath them) to
    /// `uid:gid`; links are changed themselves, never what they point to.
    /// Best effort. A whole tree is given by [`Dir::tally`].
    pub fn chown_top(&self, uid: u32, gid: u32) {
        let (u, g) = (
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        );
        if let Ok(st) = rustix::fs::fstat(&self.fd)
            && (st.st_uid != uid || st.st_gid != gid)
        {
            let _ = rustix::fs::fchown(&self.fd, u, g);
        }
        let Ok(entries) = rustix::fs::Dir::read_from(&self.fd) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            if let Ok(st) = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                && (st.st_uid != uid || st.st_gid != gid)
            {
                let _ = rustix::fs::chownat(&self.fd, name, u, g, AtFlags::SYMLINK_NOFOLLOW);
            }
        }
    }

    /// Gives one entry to `uid:gid` (a link itself, never its target).
    pub fn chown(&self, name: &str, uid: u32, gid: u32) -> io::Result<()> {
        let (u, g) = (
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        );
        rustix::fs::chownat(&self.fd, single(name)?, u, g, AtFlags::SYMLINK_NOFOLLOW).map_err(to_io)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Link,
        FileType::Socket => Kind::Socket,
        _ => Kind::Other,
    }
}

#[cfg(test)]
mod tests;
