//! `g2 restore FILE`: a backup put back into an empty home.
//!
//! Everything is unpacked into a scratch folder inside the home first,
//! under the home's lock (taken in the scratch folder's `data/`, so it
//! moves into place with it), and checked there: every entry is a plain
//! file or folder under a name a backup has (no `..`, no absolute path, no
//! link), zstd's checksum holds, the manifest is there and the restored
//! store's schema and every table's rows are what it says. Only then are
//! `data/`, `groups/` and `g2.toml` renamed into place; any error before
//! removes the scratch folder, and the home is as it was.

use std::io::{BufReader, Read};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::{DATABASE, FORMAT, MANIFEST, Manifest, SETTINGS, TREES};
use crate::error::IoContext;
use crate::home::Home;
use crate::lock::HostLock;
use crate::store::backup as snapshot;
use crate::{Error, Result};

/// The largest manifest read (it is a few hundred bytes).
const MAX_MANIFEST: u64 = 1 << 20;

/// A backup restored: its manifest, and the files put back.
#[derive(Debug, Clone, Serialize)]
pub struct Restored {
    pub home: PathBuf,
    pub files: u64,
    pub manifest: Manifest,
}

/// Restores the backup `file` into `home`, which must be empty (no
/// settings file, and no `data/` or `groups/` with anything in them) and
/// held by no host. Blocking.
pub fn restore(home: &Home, file: &Path) -> Result<Restored> {
    let root = home.root();
    if home.lock_path().exists() {
        // Says who holds it, if anyone does.
        drop(HostLock::acquire(home, "restore")?);
    }
    let found = occupied(root);
    if !found.is_empty() {
        return Err(Error::Conflict(format!(
            "{} is not an empty home (it has {}); restore into a new folder (--home)",
            root.display(),
            found.join(", ")
        )));
    }
    let input = std::fs::File::open(file).ctx(|| format!("opening {}", file.display()))?;
    std::fs::create_dir_all(root).ctx(|| format!("creating {}", root.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix(".g2-restore-")
        .tempdir_in(root)
        .ctx(|| format!("creating a scratch folder in {}", root.display()))?;
    let _lock = HostLock::acquire(&Home::new(scratch.path())?, "restore")?;
    let damaged = |e: std::io::Error| {
        Error::Invalid(format!(
            "{} is damaged or cut short, or not a g2 backup: {e}",
            file.display()
        ))
    };
    let decoder = zstd::Decoder::new(BufReader::new(input)).map_err(damaged)?;
    let mut archive = tar::Archive::new(decoder);
    let mut manifest = None;
    let mut files = 0u64;
    for entry in archive.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        let name = entry.path().map_err(damaged)?.into_owned();
        let kind = entry.header().entry_type();
        check_entry(&name, kind)?;
        if name == Path::new(MANIFEST) {
            let mut json = Vec::new();
            entry
                .by_ref()
                .take(MAX_MANIFEST)
                .read_to_end(&mut json)
                .map_err(damaged)?;
            let m: Manifest = serde_json::from_slice(&json)
                .map_err(|e| Error::Invalid(format!("the backup's manifest: {e}")))?;
            manifest = Some(m);
            continue;
        }
        let dest = scratch.path().join(&name);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).ctx(|| format!("creating {}", parent.display()))?;
        }
        entry.unpack(&dest).map_err(damaged)?;
        if kind.is_file() && TREES.iter().any(|t| name.starts_with(t)) {
            files += 1;
        }
    }
    // The rest of the stream: a cut-short file fails here at the latest.
    std::io::copy(&mut archive.into_inner(), &mut std::io::sink()).map_err(damaged)?;
    let manifest = manifest.ok_or_else(|| {
        Error::Invalid(format!(
            "{} has no manifest: cut short, or not a g2 backup",
            file.display()
        ))
    })?;
    verify(scratch.path(), &manifest, files)?;
    move_into_place(scratch.path(), root)?;
    Ok(Restored {
        home: root.to_path_buf(),
        files,
        manifest,
    })
}

/// What makes `root` a home already.
fn occupied(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    if root.join(SETTINGS).exists() {
        found.push(SETTINGS.to_string());
    }
    for dir in ["data", "groups"] {
        let path = root.join(dir);
        let empty = std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none());
        if path.symlink_metadata().is_ok() && !empty {
            found.push(format!("{dir}/"));
        }
    }
    found
}

/// Refuses an entry a backup never holds: a name outside its layout or
/// leaving the folder, or anything but a plain file or folder.
fn check_entry(name: &Path, kind: tar::EntryType) -> Result<()> {
    let plain = name.components().all(|c| matches!(c, Component::Normal(_)));
    let known = name == Path::new(MANIFEST)
        || name == Path::new(SETTINGS)
        || name == Path::new(DATABASE)
        || TREES.iter().any(|t| name.starts_with(t));
    let file_or_dir = kind.is_file() || kind.is_dir();
    if plain && known && file_or_dir {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "the backup holds an entry g2 never writes ({:?}, {}); nothing was restored",
        name,
        if file_or_dir {
            "a file"
        } else {
            "a link or special file"
        }
    )))
}

/// The restored files and store are what the manifest says.
fn verify(scratch: &Path, manifest: &Manifest, files: u64) -> Result<()> {
    if manifest.format != FORMAT {
        return Err(Error::Invalid(format!(
            "the backup's format is {}, this g2 reads {FORMAT}",
            manifest.format
        )));
    }
    if files != manifest.files {
        return Err(Error::Invalid(format!(
            "the backup holds {files} files, its manifest says {}",
            manifest.files
        )));
    }
    let Some(expected) = &manifest.database else {
        return Ok(());
    };
    let restored = snapshot::summarize(&scratch.join(DATABASE))?;
    if restored.schema_version > crate::store::SQLITE_SCHEMA_VERSION {
        return Err(Error::Invalid(format!(
            "the backup's store is at schema version {}, newer than this g2's ({}): restore it with the g2 that made it",
            restored.schema_version,
            crate::store::SQLITE_SCHEMA_VERSION
        )));
    }
    if &restored != expected {
        let differ: Vec<String> = expected
            .rows
            .iter()
            .filter(|(t, n)| restored.rows.get(*t) != Some(n))
            .map(|(t, n)| format!("{t}: {n} in the manifest"))
            .collect();
        return Err(Error::Invalid(format!(
            "the restored store does not match the backup's manifest ({})",
            differ.join(", ")
        )));
    }
    Ok(())
}

/// Renames what the scratch folder holds into the home; on a failure the
/// ones moved already go back.
fn move_into_place(scratch: &Path, root: &Path) -> Result<()> {
    let mut moved = Vec::new();
    for top in ["data", "groups", SETTINGS] {
        let from = scratch.join(top);
        if from.symlink_metadata().is_err() {
            continue;
        }
        let to = root.join(top);
        // An empty folder the emptiness check let through.
        if to.is_dir() {
            let _ = std::fs::remove_dir(&to);
        }
        if let Err(e) = std::fs::rename(&from, &to) {
            for (from, to) in moved.into_iter().rev() {
                let _ = std::fs::rename(to, from);
            }
            return Err(Error::io(format!("moving {} into place", to.display()), e));
        }
        moved.push((from, to));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_entries_of_a_backups_layout_pass() {
        let file = tar::EntryType::Regular;
        for ok in [
            "manifest.json",
            "g2.toml",
            "data/g2.db",
            "groups/main/CLAUDE.md",
            "data/sessions/main/.claude/x.jsonl",
        ] {
            assert!(check_entry(Path::new(ok), file).is_ok(), "{ok}");
        }
        for bad in [
            "../evil",
            "/etc/passwd",
            "groups/../../evil",
            "data/host.lock",
            ".env",
        ] {
            assert!(check_entry(Path::new(bad), file).is_err(), "{bad}");
        }
        assert!(check_entry(Path::new("groups/main/x"), tar::EntryType::Symlink).is_err());
        assert!(check_entry(Path::new("groups/main/x"), tar::EntryType::Link).is_err());
        assert!(check_entry(Path::new("groups/main"), tar::EntryType::Directory).is_ok());
    }
}
