//! `g2 backup FILE` and `g2 restore FILE` (docs/backup.md): a home in one
//! file, taken while a host runs or not, and put back into an empty home.
//!
//! The file is a zstd-compressed tar (with zstd's checksum, so damage is
//! found): `data/g2.db` (the store at one commit, `store::backup::snapshot`),
//! every file under `groups/` and `data/sessions/` (memory, archives, media,
//! Claude Code's state), `g2.toml` with its secret values taken out
//! ([`settings`]), and last `manifest.json` ([`Manifest`]), which a restore
//! checks the restored store against. Never in it: `.env`, the IPC folders,
//! sockets, locks, links, `tools/`.
//!
//! **Consistency.** The database is copied first, the files after: an
//! archive's file is written (under its pending name) before its row
//! commits, and never changed after, so every archive the copy records has
//! its file in the backup; a session's transcript only grows, so it holds
//! at least what the copied pointer names. Writes after the copy may add
//! files the copy does not record (harmless: a pending one is settled or
//! removed at the next start). An archive whose file is gone anyway is named
//! in the manifest and the report.

mod restore;
pub mod settings;

use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use g2_core::confined::{Dir, Kind};

use crate::error::IoContext;
use crate::home::Home;
use crate::store::backup::{self as snapshot, Summary};
use crate::{Error, Result};

pub use restore::{Restored, restore};

/// The layout version of a backup file.
pub const FORMAT: u32 = 1;
/// The manifest's name, the archive's last entry.
pub const MANIFEST: &str = "manifest.json";
/// The store's copy, as a home holds it.
pub const DATABASE: &str = "data/g2.db";
/// The settings file, secrets taken out.
pub const SETTINGS: &str = "g2.toml";
/// The folders copied whole (relative to the home).
pub const TREES: [&str; 2] = ["groups", "data/sessions"];

/// What a backup holds, written into it and checked by a restore.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The g2 that wrote it.
    pub g2_version: String,
    pub created_at: String,
    /// `sqlite`, or `postgres` (the database is not in the file: pg_dump).
    pub store: String,
    /// The SQLite store's schema version and rows; `None` for PostgreSQL.
    pub database: Option<Summary>,
    /// Files under `groups/` and `data/sessions/`, and their bytes.
    pub files: u64,
    pub file_bytes: u64,
    /// Settings taken out of `g2.toml` (secrets); `None`: no settings file.
    pub settings_removed: Option<Vec<String>>,
    /// Archives the copied store records whose file was gone.
    pub archives_missing: Vec<String>,
}

/// A backup written: where, its size, and its manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Written {
    pub file: PathBuf,
    pub bytes: u64,
    pub manifest: Manifest,
}

/// Writes a backup of `home` to the new file `out`, from a SQLite store at
/// `db` (`None`: a PostgreSQL store, left out). Nothing is left under
/// `out`'s name unless the backup is complete. Blocking.
pub fn backup(
    home: &Home,
    db: Option<&Path>,
    settings_file: &Path,
    out: &Path,
    busy_timeout: Duration,
) -> Result<Written> {
    let out = std::path::absolute(out).ctx(|| format!("resolving {}", out.display()))?;
    if out.exists() {
        return Err(Error::Conflict(format!(
            "{} exists already; name a new file",
            out.display()
        )));
    }
    let dir = out.parent().unwrap_or(Path::new("/")).to_path_buf();
    // The partial file and the store's copy live beside the backup: a
    // failure leaves neither (tempfile removes them).
    let scratch = tempfile::Builder::new()
        .prefix(".g2-backup-")
        .tempdir_in(&dir)
        .ctx(|| format!("creating a scratch folder in {}", dir.display()))?;
    let partial = scratch.path().join("backup.partial");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)
        .ctx(|| format!("creating {}", partial.display()))?;
    let mut enc = zstd::Encoder::new(BufWriter::new(file), 3).ctx(|| "starting zstd".into())?;
    enc.include_checksum(true).ctx(|| "starting zstd".into())?;
    let mut w = Writer {
        tar: tar::Builder::new(enc),
        names: HashSet::new(),
        files: 0,
        bytes: 0,
        skip: [out.clone(), scratch.path().to_path_buf()],
    };

    // The store first, then the files (see the module's doc).
    let (database, archives) = match db {
        Some(db) => {
            let copy = scratch.path().join("g2.db");
            snapshot::snapshot(db, &copy, busy_timeout)?;
            let summary = snapshot::summarize(&copy)?;
            let archives = snapshot::archive_paths(&copy)?;
            let body = std::fs::read(&copy).ctx(|| format!("reading {}", copy.display()))?;
            w.append(DATABASE, 0o600, &body, now_secs())?;
            (Some(summary), archives)
        }
        None => (None, Vec::new()),
    };
    let (files_before, bytes_before) = (w.files, w.bytes);
    for tree in TREES {
        w.tree(home.root(), Path::new(tree))?;
    }
    let archives_missing = archives
        .into_iter()
        .filter(|rel| !w.has_archive(home.root(), rel))
        .collect();
    let (files, file_bytes) = (w.files - files_before, w.bytes - bytes_before);
    let settings_removed = match std::fs::read_to_string(settings_file) {
        Ok(text) => {
            let (clean, removed) = settings::without_secrets(&text)?;
            w.append(SETTINGS, 0o600, clean.as_bytes(), now_secs())?;
            Some(removed)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("reading {}", settings_file.display()), e)),
    };
    let manifest = Manifest {
        format: FORMAT,
        g2_version: env!("CARGO_PKG_VERSION").into(),
        created_at: crate::now_rfc3339(),
        store: if db.is_some() { "sqlite" } else { "postgres" }.into(),
        database,
        files,
        file_bytes,
        settings_removed,
        archives_missing,
    };
    let json = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Invalid(e.to_string()))?;
    w.append(MANIFEST, 0o600, &json, now_secs())?;
    let enc = w.tar.into_inner().ctx(|| "writing the backup".into())?;
    let buf = enc.finish().ctx(|| "writing the backup".into())?;
    let file = buf
        .into_inner()
        .map_err(|e| Error::io("writing the backup", e.into_error()))?;
    file.sync_all().ctx(|| "writing the backup".into())?;
    let bytes = file.metadata().ctx(|| "writing the backup".into())?.len();
    // Never replaces a file that appeared meanwhile.
    std::fs::hard_link(&partial, &out).ctx(|| format!("creating {}", out.display()))?;
    Ok(Written {
        file: out,
        bytes,
        manifest,
    })
}

/// The tar being written and what is in it.
struct Writer<W: Write> {
    tar: tar::Builder<W>,
    /// The names of the files in it.
    names: HashSet<PathBuf>,
    files: u64,
    bytes: u64,
    /// The backup's own files, never copied into it.
    skip: [PathBuf; 2],
}

impl<W: Write> Writer<W> {
    fn append(&mut self, name: impl AsRef<Path>, mode: u32, body: &[u8], mtime: u64) -> Result<()> {
        let name = name.as_ref();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(body.len() as u64);
        h.set_mode(mode & 0o777);
        h.set_mtime(mtime);
        self.tar
            .append_data(&mut h, name, body)
            .ctx(|| format!("adding {} to the backup", name.display()))?;
        self.names.insert(name.to_path_buf());
        self.files += 1;
        self.bytes += body.len() as u64;
        Ok(())
    }

    /// Adds the folder `rel` of `root` and what is in it: folders and
    /// regular files (read whole, so a file written meanwhile is never
    /// torn in the tar); links, sockets and pipes are left out. Beneath
    /// `root/rel` (the operator's folder) everything is opened through the
    /// confined access, never by a path: an agent that swaps a file for a
    /// link meanwhile gets nothing of the host into the backup.
    fn tree(&mut self, root: &Path, rel: &Path) -> Result<()> {
        let path = root.join(rel);
        let dir = match Dir::open(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        self.walk(&dir, rel)
    }

    fn walk(&mut self, dir: &Dir, rel: &Path) -> Result<()> {
        let at = || format!("reading {}", dir.path().display());
        let meta = std::fs::symlink_metadata(dir.path()).ctx(at)?;
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        h.set_mode(meta.mode() & 0o777);
        h.set_mtime(u64::try_from(meta.mtime()).unwrap_or(0));
        self.tar
            .append_data(&mut h, rel, std::io::empty())
            .ctx(|| format!("adding {} to the backup", rel.display()))?;
        let mut entries = dir.entries().ctx(at)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            if self.skip.iter().any(|s| s == &dir.path().join(&e.name)) {
                continue;
            }
            match e.kind {
                Kind::Dir => match dir.open_dir(&e.name) {
                    Ok(sub) => self.walk(&sub, &rel.join(&e.name))?,
                    Err(err) if gone_or_swapped(&err) => {}
                    Err(err) => return Err(Error::io(at(), err)),
                },
                Kind::File => match read_file(dir, &e.name) {
                    Ok((body, mode, mtime)) => {
                        self.append(rel.join(&e.name), mode, &body, mtime)?;
                    }
                    Err(err) if gone_or_swapped(&err) => {}
                    Err(err) => return Err(Error::io(at(), err)),
                },
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the archive at `rel` is in the backup, under its name or
    /// its pending name; if not, it is read again now (it may have been
    /// renamed while its folder was read).
    fn has_archive(&mut self, root: &Path, rel: &str) -> bool {
        let rel = Path::new(rel);
        let inside = rel.starts_with("groups")
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            return false;
        }
        let pending = rel
            .file_name()
            .map(|n| rel.with_file_name(g2_core::confined::pending_name(&n.to_string_lossy())));
        if self.names.contains(rel) || pending.is_some_and(|p| self.names.contains(&p)) {
            return true;
        }
        match Dir::open(root).and_then(|d| d.read(rel, u64::MAX)) {
            Ok(body) => self.append(rel, 0o644, &body, now_secs()).is_ok(),
            Err(_) => false,
        }
    }
}

/// A regular file of `dir`, whole, with its mode and time; never through
/// a link.
fn read_file(dir: &Dir, name: &str) -> std::io::Result<(Vec<u8>, u32, u64)> {
    use std::io::Read;
    let mut f = dir.open_file(name)?;
    let meta = f.metadata()?;
    let mut body = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    f.read_to_end(&mut body)?;
    Ok((body, meta.mode(), u64::try_from(meta.mtime()).unwrap_or(0)))
}

/// Removed while the folder was read, or made a link meanwhile (which the
/// confined access refuses): left out, as links are.
fn gone_or_swapped(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || g2_core::confined::is_planted(e)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
