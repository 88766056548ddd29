//! The mount table of an agent container (`docs/protocol.md`, "Mounts") and the
//! allowlist that extra mounts must pass.
//!
//! | host | container | mode |
//! |---|---|---|
//! | the home's top-level entries (main group only) | `/workspace/project/{name}` | read-only, each on its own in an empty read-only tmpfs; `data/`, `g2.toml`, `.env*` and other secrets left out (`project.rs`) |
//! | `groups/{folder}` | `/workspace/group` | read-write |
//! | `groups/global` (other groups) | `/workspace/global` | read-only |
//! | `data/sessions/{folder}/.claude` | `/home/node/.claude` | read-write |
//! | `data/ipc/{folder}` | `/workspace/ipc` | read-write (holds the gateway socket) |
//! | allowlisted folders | `/workspace/extra/{name}` | read-only unless allowed |
//!
//! The allowlist is a JSON file outside the project
//! (`~/.config/g2/mount-allowlist.json`, or `container.allowlist`), never
//! mounted: `{"allowedRoots":[{"path":"~/projects","allowReadWrite":false}],
//! "blockedPatterns":["secret"],"nonMainReadOnly":true}`. A mount is
//! allowed when its real path (symlinks resolved) lies under an allowed
//! root, no component matches a blocked name, and it neither holds nor lies
//! in g2's `data/`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::groups::Group;
use crate::home::Home;
use crate::{Error, Result};
use g2_core::wire::{CLAUDE_DIR, EXTRA_DIR, GLOBAL_DIR, GROUP_DIR, IPC_DIR};

use super::{ALWAYS_BLOCKED, ContainerSettings, GroupContainerConfig, Mount};

/// An extra mount a group asks for in its `container_config`.
pub use crate::config::ExtraMount;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allowlist {
    #[serde(default)]
    pub allowed_roots: Vec<AllowedRoot>,
    #[serde(default)]
    pub blocked_patterns: Vec<String>,
    #[serde(default = "yes")]
    pub non_main_read_only: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoot {
    pub path: String,
    #[serde(default)]
    pub allow_read_write: bool,
}

fn expand(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

/// Where the allowlist is read from.
pub fn allowlist_path(settings: &ContainerSettings) -> PathBuf {
    if let Some(p) = &settings.allowlist {
        return p.clone();
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| expand("~/.config"));
    base.join("g2/mount-allowlist.json")
}

impl Allowlist {
    pub fn load(path: &Path) -> Result<Option<Allowlist>> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| Error::Config(format!("mount allowlist {}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
        }
    }

    /// Checks one extra mount; returns it as a bind mount.
    pub fn check(&self, m: &ExtraMount, is_main: bool, home: &Home) -> Result<Mount> {
        let refuse = |why: String| Error::Invalid(format!("extra mount {:?}: {why}", m.host_path));
        let real =
            std::fs::canonicalize(expand(&m.host_path)).map_err(|e| refuse(format!("{e}")))?;
        let blocked: Vec<&str> = ALWAYS_BLOCKED
            .iter()
            .copied()
            .chain(self.blocked_patterns.iter().map(String::as_str))
            .collect();
        for c in real.components() {
            let c = c.as_os_str().to_string_lossy().to_ascii_lowercase();
            if let Some(b) = blocked.iter().find(|b| c.contains(&b.to_ascii_lowercase())) {
                return Err(refuse(format!(
                    "{} matches the blocked name {b:?}",
                    real.display()
                )));
            }
        }
        let data = std::fs::canonicalize(home.data_dir()).unwrap_or_else(|_| home.data_dir());
        if real.starts_with(&data) || data.starts_with(&real) {
            return Err(refuse("it holds or lies in g2's data folder".into()));
        }
        let root = self
            .allowed_roots
            .iter()
            .filter_map(|r| {
                std::fs::canonicalize(expand(&r.path))
                    .ok()
                    .map(|p| (p, r.allow_read_write))
            })
            .find(|(p, _)| real.starts_with(p))
            .ok_or_else(|| refuse(format!("{} is under no allowed root", real.display())))?;
        let name = match &m.name {
            Some(n) => n.clone(),
            None => real
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        g2_core::validate::group_folder(&name)
            .map_err(|_| refuse(format!("name {name:?}: use letters, digits, - and _")))?;
        let read_write = m.read_write && root.1 && (is_main || !self.non_main_read_only);
        if m.read_write && !read_write {
            return Err(refuse("read-write is not allowed here".into()));
        }
        Ok(Mount::Bind {
            host: real,
            container: format!("{EXTRA_DIR}/{name}"),
            read_only: !read_write,
        })
    }
}

/// The full mount table of a group's container.
pub fn table(
    home: &Home,
    settings: &ContainerSettings,
    group: &Group,
    cfg: &GroupContainerConfig,
    project_root: Option<&Path>,
) -> Result<Vec<Mount>> {
    let folder = &group.folder;
    let bind = |host: PathBuf, container: &str, read_only: bool| Mount::Bind {
        host,
        container: container.into(),
        read_only,
    };
    let mut out = Vec::new();
    if group.is_main {
        // The home without its database, state and secrets (project.rs).
        let root = project_root.unwrap_or_else(|| home.root());
        out.extend(super::project::view(home, root));
    }
    out.push(bind(home.group_dir(folder)?, GROUP_DIR, false));
    if !group.is_main {
        out.push(bind(home.global_dir(), GLOBAL_DIR, true));
    }
    out.push(bind(home.claude_dir(folder)?, CLAUDE_DIR, false));
    out.push(bind(home.ipc_dir(folder)?, IPC_DIR, false));
    if !cfg.mounts.is_empty() {
        let path = allowlist_path(settings);
        let list = Allowlist::load(&path)?.ok_or_else(|| {
            Error::Invalid(format!(
                "group {folder} asks for extra mounts but there is no mount allowlist at {}",
                path.display()
            ))
        })?;
        for m in &cfg.mounts {
            out.push(list.check(m, group.is_main, home)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        let h = Home::new(d.path()).unwrap();
        h.ensure_layout().unwrap();
        (d, h)
    }

    #[test]
    fn allowlist_rules() {
        let (_d, h) = home();
        let outside = tempfile::tempdir().unwrap();
        let docs = outside.path().join("docs");
        std::fs::create_dir_all(docs.join("sub")).unwrap();
        std::fs::create_dir_all(outside.path().join(".ssh")).unwrap();
        std::fs::create_dir_all(outside.path().join("other")).unwrap();
        std::os::unix::fs::symlink(outside.path().join(".ssh"), docs.join("innocent")).unwrap();
        let list = Allowlist {
            allowed_roots: vec![AllowedRoot {
                path: docs.display().to_string(),
                allow_read_write: true,
            }],
            blocked_patterns: vec!["tax".into()],
            non_main_read_only: true,
        };
        let m = |p: &Path, rw: bool| ExtraMount {
            host_path: p.display().to_string(),
            name: None,
            read_write: rw,
        };
        assert_eq!(
            list.check(&m(&docs.join("sub"), false), false, &h).unwrap(),
            Mount::Bind {
                host: std::fs::canonicalize(docs.join("sub")).unwrap(),
                container: "/workspace/extra/sub".into(),
                read_only: true
            }
        );
        // Read-write: main yes, other groups no.
        assert!(matches!(
            list.check(&m(&docs, true), true, &h).unwrap(),
            Mount::Bind {
                read_only: false,
                ..
            }
        ));
        assert!(list.check(&m(&docs, true), false, &h).is_err());
        // Outside the roots, through a symlink into a blocked name, missing.
        assert!(
            list.check(&m(&outside.path().join("other"), false), true, &h)
                .is_err()
        );
        let e = list
            .check(&m(&docs.join("innocent"), false), true, &h)
            .unwrap_err()
            .to_string();
        assert!(e.contains(".ssh"), "{e}");
        assert!(list.check(&m(&docs.join("nope"), false), true, &h).is_err());
        // g2's own data folder never.
        let with_data = Allowlist {
            allowed_roots: vec![AllowedRoot {
                path: h.root().display().to_string(),
                allow_read_write: false,
            }],
            ..list.clone()
        };
        assert!(with_data.check(&m(h.root(), false), true, &h).is_err());
        assert!(with_data.check(&m(&h.data_dir(), false), true, &h).is_err());
        // Hostile names.
        let bad = ExtraMount {
            host_path: docs.display().to_string(),
            name: Some("../x".into()),
            read_write: false,
        };
        assert!(list.check(&bad, true, &h).is_err());
    }
}
