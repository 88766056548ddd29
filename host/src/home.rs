//! The home directory layout. Every path g2 touches is built here, from
//! validated names only.
//!
//! ```text
//! {home}/
//!   g2.toml                                   optional settings
//!   groups/{folder}/CLAUDE.md                 the group's memory
//!   groups/{folder}/conversations/*.md        archives
//!   groups/global/CLAUDE.md                   memory every non-main group reads
//!   data/g2.db                                the database
//!   data/sessions/{folder}/.claude/           the group's Claude Code state
//!   data/ipc/{folder}/                        the group's IPC folder
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use g2_core::confined::{self, Dir};
use g2_core::validate::{self, GroupFolder};
use g2_core::wire;

use crate::Result;
use crate::error::IoContext;

/// Claude Code's project folder for the container's cwd `/workspace/group`.
pub const PROJECT_DIR: &str = "-workspace-group";

/// The main group's first `CLAUDE.md` and the global one, written by
/// `g2 init` when absent: kept out of `groups/`, so a checkout used as the
/// home (its `groups/` git-ignored) never has a tracked file changed.
pub const MAIN_TEMPLATE: &str = include_str!("../templates/main-CLAUDE.md");
pub const GLOBAL_TEMPLATE: &str = include_str!("../templates/global-CLAUDE.md");

/// Told of every link or foreign file found where the host expected its
/// own (group folder, what was found), to record it.
pub type Recorder = Arc<dyn Fn(&str, &str) + Send + Sync>;

#[derive(Clone)]
pub struct Home {
    root: PathBuf,
    /// The settings file in use when it is not `{root}/g2.toml`.
    settings_file: Option<PathBuf>,
    /// This host's own folder (`cluster.runtime_dir`) when not `data/`.
    runtime: Option<PathBuf>,
    recorder: Arc<OnceLock<Recorder>>,
}

impl std::fmt::Debug for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Home").field("root", &self.root).finish()
    }
}

impl Home {
    /// A home at `root`, made absolute (so paths stay right if the process
    /// changes directory). Nothing is created.
    pub fn new(root: impl AsRef<Path>) -> Result<Self> {
        let root = std::path::absolute(root.as_ref())
            .ctx(|| format!("resolving home directory {}", root.as_ref().display()))?;
        Ok(Self {
            root,
            settings_file: None,
            runtime: None,
            recorder: Arc::default(),
        })
    }

    /// The settings were read from `file` (`--config`), not `{root}/g2.toml`.
    pub fn with_settings_file(mut self, file: impl AsRef<Path>) -> Self {
        self.settings_file = std::path::absolute(file.as_ref()).ok();
        self
    }

    /// The settings file in use (it may not exist).
    pub fn settings_file(&self) -> PathBuf {
        self.settings_file
            .clone()
            .unwrap_or_else(|| self.root.join(crate::config::CONFIG_FILE))
    }

    /// The top-level entry of the home that holds the settings file, when
    /// the home holds it.
    pub fn settings_file_top(&self) -> Option<String> {
        let file = self.settings_file();
        let rel = file.strip_prefix(&self.root).ok()?;
        rel.components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(str::to_string)
    }

    /// Where planted links are recorded (once per home and its clones).
    pub fn on_planted(&self, recorder: Recorder) {
        let _ = self.recorder.set(recorder);
    }

    /// A link or foreign file was found (and refused, or moved aside) in a
    /// group's tree: a warning, and a record when a recorder is set.
    pub fn planted(&self, folder: &str, what: &str) {
        tracing::warn!(group = %folder, what, "a planted link or file was refused");
        if let Some(r) = self.recorder.get() {
            r(folder, what);
        }
    }

    /// Turns an I/O result in a group's tree into g2's: a planted link is
    /// recorded and refused as such.
    pub fn confined<T>(
        &self,
        folder: &GroupFolder,
        what: &str,
        r: std::io::Result<T>,
    ) -> Result<T> {
        r.map_err(|e| {
            if confined::is_planted(&e) {
                self.planted(folder, &format!("{what}: a link; not followed"));
                crate::Error::Forbidden(format!(
                    "{what} in group {folder} is a link; it is never followed"
                ))
            } else {
                crate::Error::io(format!("{what} in group {folder}"), e)
            }
        })
    }

    /// `groups/{folder}/` as a confined handle, created when missing.
    pub fn group_tree(&self, folder: &GroupFolder) -> Result<Dir> {
        self.tree(folder, Tree::Group, true)
    }

    /// `data/ipc/{folder}/` as a confined handle, created when missing.
    pub fn ipc_tree(&self, folder: &GroupFolder) -> Result<Dir> {
        self.tree(folder, Tree::Ipc, true)
    }

    /// `data/sessions/{folder}/.claude/` as a confined handle, created
    /// when missing.
    pub fn claude_tree(&self, folder: &GroupFolder) -> Result<Dir> {
        self.tree(folder, Tree::Claude, true)
    }

    /// The group's three trees the agent writes that exist (none is
    /// created: counting a group's files makes no folder).
    pub fn existing_trees(&self, folder: &GroupFolder) -> Result<Vec<Dir>> {
        let mut out = Vec::new();
        for t in [Tree::Group, Tree::Ipc, Tree::Claude] {
            match self.tree(folder, t, false) {
                Ok(d) => out.push(d),
                Err(crate::Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// One of a group's trees as a confined handle (`create`: made when
    /// missing).
    fn tree(&self, folder: &GroupFolder, tree: Tree, create: bool) -> Result<Dir> {
        let (base, rel, what) = match tree {
            Tree::Group => (
                self.groups_dir(),
                PathBuf::from(folder.as_str()),
                "the group folder",
            ),
            Tree::Ipc => (
                self.data_dir().join("ipc"),
                PathBuf::from(folder.as_str()),
                "the IPC folder",
            ),
            Tree::Claude => (
                self.data_dir().join("sessions"),
                Path::new(folder.as_str()).join(".claude"),
                "the .claude folder",
            ),
        };
        self.confined(folder, what, Dir::open_beneath(&base, &rel, create))
            .map(agent_owned)
    }

    /// The folder `name` in a group's tree, made a real folder again if
    /// something else was put in its place (recorded).
    pub fn ensure_sub(&self, folder: &GroupFolder, tree: &Dir, name: &str) -> Result<Dir> {
        let (dir, replaced) = self.confined(folder, name, tree.ensure_dir(name))?;
        if replaced {
            self.planted(
                folder,
                &format!("{name}/ was replaced; made a folder again"),
            );
        }
        Ok(dir)
    }

    /// `groups/{folder}/conversations/` as a confined handle.
    pub fn conversations_tree(&self, folder: &GroupFolder) -> Result<Dir> {
        self.ensure_sub(folder, &self.group_tree(folder)?, wire::CONVERSATIONS_DIR)
    }

    /// A subfolder of the group's IPC folder (`input`, `tasks`, …).
    pub fn ipc_sub(&self, folder: &GroupFolder, name: &str) -> Result<Dir> {
        self.ensure_sub(folder, &self.ipc_tree(folder)?, name)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn groups_dir(&self) -> PathBuf {
        self.root.join("groups")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    pub fn db_path(&self) -> PathBuf {
        self.data_dir().join("g2.db")
    }

    /// The store `store.url` names, as a log may name it: the SQLite file,
    /// or PostgreSQL's host, port and database (never its user or a
    /// password).
    pub fn store_name(&self, url: &str) -> String {
        match crate::store::Backend::of(url) {
            Ok(crate::store::Backend::Postgres) => {
                let rest = url.split_once("://").map_or("", |(_, r)| r);
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                format!("postgres://{}", host.split('?').next().unwrap_or_default())
            }
            Ok(crate::store::Backend::Sqlite(Some(path))) => path.to_string(),
            _ => self.db_path().display().to_string(),
        }
    }

    /// `data/ipc/`: every group's IPC folder is in here.
    pub fn ipc_root(&self) -> PathBuf {
        self.data_dir().join("ipc")
    }

    /// This host's own folder when several hosts share the home folder
    /// (`cluster.runtime_dir`, relative to the home); `data/` otherwise.
    pub fn with_runtime_dir(mut self, dir: Option<&Path>) -> Self {
        self.runtime = dir.map(|d| self.root.join(d));
        self
    }

    /// The host's own folder: its lock and scratch folder are in here.
    pub fn runtime_dir(&self) -> PathBuf {
        self.runtime.clone().unwrap_or_else(|| self.data_dir())
    }

    /// `data/run/` (in the runtime folder): the host's own scratch
    /// folder, never mounted.
    pub fn run_dir(&self) -> PathBuf {
        self.runtime_dir().join("run")
    }

    /// `data/host.lock` (in the runtime folder; see `lock`).
    pub fn lock_path(&self) -> PathBuf {
        self.runtime_dir().join("host.lock")
    }

    /// A path stored relative to the home (archives), made absolute.
    pub fn resolve(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// `groups/{folder}/`; an error when it leads outside `groups/` (a
    /// link put in its place).
    pub fn group_dir(&self, folder: &GroupFolder) -> Result<PathBuf> {
        Ok(validate::within(
            &self.groups_dir(),
            Path::new(folder.as_str()),
        )?)
    }

    /// `groups/global/`: the memory every non-main group reads (never a
    /// registered group, so not a [`GroupFolder`]).
    pub fn global_dir(&self) -> PathBuf {
        self.groups_dir().join("global")
    }

    pub fn conversations_dir(&self, folder: &GroupFolder) -> Result<PathBuf> {
        Ok(self.group_dir(folder)?.join(wire::CONVERSATIONS_DIR))
    }

    /// `data/sessions/{folder}/.claude/`, mounted at `/home/node/.claude`.
    pub fn claude_dir(&self, folder: &GroupFolder) -> Result<PathBuf> {
        let sessions = self.data_dir().join("sessions");
        Ok(validate::within(&sessions, Path::new(folder.as_str()))?.join(".claude"))
    }

    /// Where Claude Code keeps the transcript of `session_id` for a group.
    pub fn transcript_path(&self, folder: &GroupFolder, session_id: &str) -> Result<PathBuf> {
        let id = validate::session_id(session_id)?;
        Ok(self
            .claude_dir(folder)?
            .join("projects")
            .join(PROJECT_DIR)
            .join(format!("{id}.jsonl")))
    }

    /// `data/ipc/{folder}/`; an error when it leads outside `data/ipc/`.
    pub fn ipc_dir(&self, folder: &GroupFolder) -> Result<PathBuf> {
        Ok(validate::within(
            &self.data_dir().join("ipc"),
            Path::new(folder.as_str()),
        )?)
    }

    /// A path relative to the home when it is under it (as stored in the
    /// database), else the path as given.
    pub fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| path.to_path_buf())
    }

    /// Creates the folders every home has and the global memory file.
    pub fn ensure_layout(&self) -> Result<()> {
        for dir in [
            self.groups_dir(),
            self.data_dir().join("sessions"),
            self.data_dir().join("ipc"),
            self.global_dir(),
        ] {
            std::fs::create_dir_all(&dir).ctx(|| format!("creating {}", dir.display()))?;
        }
        write_if_missing(
            &self.global_dir().join(wire::MEMORY_FILE),
            GLOBAL_TEMPLATE,
            0o666,
        )
        .map(drop)
    }

    /// Creates a group's folders and its CLAUDE.md (from the main template
    /// for the main group, a short one otherwise). Existing files are kept.
    pub fn ensure_group(&self, folder: &GroupFolder, name: &str, is_main: bool) -> Result<()> {
        let group = self.group_tree(folder)?;
        self.ensure_sub(folder, &group, wire::CONVERSATIONS_DIR)?;
        self.claude_tree(folder)?;
        self.ipc_tree(folder)?;
        let memory = if is_main {
            MAIN_TEMPLATE.to_string()
        } else {
            format!(
                "# {name}\n\nThis is the memory of the group \"{name}\". Write down here what \
                 you should remember about this group.\n\nThe `conversations/` folder holds \
                 searchable archives of earlier sessions.\n"
            )
        };
        // Never replaces the group's memory, nor writes through a link.
        self.confined(
            folder,
            wire::MEMORY_FILE,
            group.create_new(wire::MEMORY_FILE, memory.as_bytes()),
        )?;
        Ok(())
    }
}

/// The trees of a group its agent writes.
#[derive(Debug, Clone, Copy)]
enum Tree {
    Group,
    Ipc,
    Claude,
}

/// Where what `scripts/setup.sh` installs under `tools/` is looked for:
/// the home, then each folder above the running binary (a build in the
/// project's `target/`).
pub fn install_roots(home: &Path) -> Vec<PathBuf> {
    let mut roots = vec![home.to_path_buf()];
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots
}

/// What the host creates in a group's trees belongs to the agent's user
/// when the host runs as root: the host acts for the agent, never as root
/// over the agent's files.
fn agent_owned(dir: Dir) -> Dir {
    match agent_owner() {
        Some((uid, gid)) => dir.owned_by(uid, gid),
        None => dir,
    }
}

/// Creates a file of the host's own (not in a group's trees) with
/// `contents` and permission bits `mode`, unless something is there
/// already: `false` then, and it is left as it is.
pub fn write_if_missing(path: &Path, contents: &str, mode: u32) -> Result<bool> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
    {
        Ok(mut f) => f
            .write_all(contents.as_bytes())
            .map(|()| true)
            .ctx(|| format!("writing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(crate::Error::io(format!("creating {}", path.display()), e)),
    }
}

// Whose files: the ids are the host process's, so they live with the
// home the host owns; the container image and the agent's mounts read them
// from here.

/// The uid and gid this process runs as (from `/proc/self/status`).
pub fn host_ids() -> (u32, u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    };
    (field("Uid:"), field("Gid:"))
}

/// The uid/gid agents run as: the host's, or 1000 when the host is root
/// (never root inside the container).
pub fn agent_ids() -> (u32, u32) {
    match host_ids() {
        (0, _) | (_, 0) => (1000, 1000),
        ids => ids,
    }
}

/// Whom the host gives what it finds or makes in a group's trees: the
/// agent's user when the host runs as root (it acts for the agent, never
/// as root over the agent's files); None otherwise.
pub fn agent_owner() -> Option<(u32, u32)> {
    (host_ids().0 == 0).then(agent_ids)
}

/// A path stored relative to the home (`groups/{folder}/…`) as the
/// group's agent sees it, relative to its folder (`conversations/…`);
/// another path as it is.
pub fn in_group<'a>(folder: &str, rel: &'a str) -> &'a str {
    rel.strip_prefix("groups/")
        .and_then(|r| r.strip_prefix(folder))
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_refuse_traversal() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path()).unwrap();
        let main = GroupFolder::new("main").unwrap();
        assert!(home.group_dir(&main).unwrap().ends_with("groups/main"));
        assert!(home.global_dir().ends_with("groups/global"));
        // A name that could leave its folder is not a GroupFolder at all,
        // so no path is ever built from it.
        assert!(GroupFolder::new("global").is_err());
        for bad in ["..", "../x", "a/b", "/etc", ""] {
            assert!(GroupFolder::new(bad).is_err(), "{bad:?}");
        }
        assert!(home.transcript_path(&main, "../../../etc/passwd").is_err());
        let p = home
            .transcript_path(&main, "D58A79A7-451E-4AF5-86D1-3E839200D98D")
            .unwrap();
        assert!(p.ends_with(
            "data/sessions/main/.claude/projects/-workspace-group/d58a79a7-451e-4af5-86d1-3e839200d98d.jsonl"
        ));
    }

    #[test]
    fn symlinked_group_folder_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path()).unwrap();
        home.ensure_layout().unwrap();
        std::os::unix::fs::symlink(outside.path(), home.groups_dir().join("evil")).unwrap();
        assert!(home.group_dir(&GroupFolder::new("evil").unwrap()).is_err());
    }
}
