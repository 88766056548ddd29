//! Watching the groups' request folders and moving each request through
//! them: claim (rename to `.claimed-…`; whoever renames owns it), read and
//! parse, hand to [`RequestServer::handle`], answer in
//! `responses/{requestId}.json`, or keep it in `errors/` beside a note
//! saying why.
//!
//! In `g2 serve`, [`RequestServer::watch_all`] watches `data/ipc/` and every
//! group's `messages/` and `tasks/` (inotify), rescans everything on a
//! timer and when the kernel reports an overflow, and drains what an
//! earlier host left; `g2 run` watches its one group while its container
//! runs ([`RequestServer::watch`]). Every file operation in a group's
//! tree goes through its confined handles (`crate::home`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use g2_core::watch::{Wake, Watch};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use g2_core::confined::Dir;
use g2_core::ipc;
use g2_core::wire::{Action, TaskRequest, TaskResponse};

use super::RequestServer;
use crate::background::Background;
use crate::home::Home;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

/// How often a running group's folders are rescanned without an event.
const RESCAN: Duration = Duration::from_secs(2);
/// How often every group's folders are rescanned by [`RequestServer::watch_all`].
const FULL_RESCAN: Duration = Duration::from_secs(10);

impl RequestServer {
    /// Serves only the groups `leases` holds (hosts sharing a store).
    pub fn with_leases(mut self, leases: crate::cluster::Leases) -> Self {
        self.leases = Some(leases);
        self
    }

    /// Serves a group's requests until stopped; a last drain runs at stop
    /// (`g2 run`; a no-op while [`RequestServer::watch_all`] runs).
    pub fn watch(&self, folder: &GroupFolder) -> Result<Background> {
        if self.watching_all.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(Background::spawn(|stopped| async move {
                let _ = stopped.await;
            }));
        }
        let ipc_dir = self.home.ipc_dir(folder)?;
        let dirs = [
            ipc_dir.join(ipc::TASKS_DIR),
            ipc_dir.join(ipc::MESSAGES_DIR),
        ];
        for sub in [ipc::TASKS_DIR, ipc::MESSAGES_DIR] {
            self.home.ipc_sub(folder, sub)?;
        }
        let (wake_tx, mut wake) = mpsc::unbounded_channel::<()>();
        let mut watcher = Watch::new(move |_| {
            let _ = wake_tx.send(());
        })?;
        for dir in &dirs {
            watcher.add(dir)?;
        }
        let (server, folder) = (self.clone(), folder.clone());
        Ok(Background::spawn(|mut stopped| async move {
            let _watcher = watcher;
            loop {
                server.drain(&folder).await;
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = wake.recv() => {}
                    _ = tokio::time::sleep(RESCAN) => {}
                }
            }
            server.drain(&folder).await;
        }))
    }

    /// Serves every group's requests until stopped (`g2 serve`): inotify on
    /// `data/ipc/` (new group folders) and on each group's `messages/` and
    /// `tasks/`, each event draining the folder it names; a full rescan
    /// every `FULL_RESCAN` and whenever the kernel's queue overflowed.
    /// Starts with a full drain (what an earlier host left). Each group is
    /// drained by its own task (`Lanes`): its requests in order, groups
    /// side by side, so one group's long request never delays another's.
    pub fn watch_all(&self) -> Result<Background> {
        let root = self.home.ipc_root();
        std::fs::create_dir_all(&root)
            .map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        // None: rescan everything.
        let (wake_tx, mut wake) = mpsc::unbounded_channel::<Option<GroupFolder>>();
        let cb_root = root.clone();
        let mut watcher = Watch::new(move |wake| match wake {
            Wake::Rescan => {
                let _ = wake_tx.send(None);
            }
            Wake::Paths(paths) => {
                for p in &paths {
                    if let Some(folder) = folder_of(&cb_root, p) {
                        let _ = wake_tx.send(Some(folder));
                    }
                }
            }
        })?;
        watcher.add(&root)?;
        self.watching_all
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (server, home) = (self.clone(), self.home.clone());
        Ok(Background::spawn(|mut stopped| async move {
            let mut watched = std::collections::HashSet::new();
            let mut watch_group = |watcher: &mut Watch, folder: &GroupFolder| {
                if watched.contains(folder) {
                    return;
                }
                for sub in [ipc::MESSAGES_DIR, ipc::TASKS_DIR, ipc::EVENTS_DIR] {
                    let dir = root.join(folder).join(sub);
                    // Made a real folder first: a planted link is never watched.
                    let ok = home.ipc_sub(folder, sub).is_ok() && watcher.add(&dir).is_ok();
                    if !ok {
                        tracing::warn!(dir = %dir.display(), "cannot watch; the timed rescan covers it");
                    }
                }
                watched.insert(folder.clone());
            };
            let registered = server
                .store
                .read(crate::store::groups::list)
                .await
                .unwrap_or_default();
            for g in &registered {
                watch_group(&mut watcher, &g.folder);
            }
            for f in list_folders(&root) {
                watch_group(&mut watcher, &f);
            }
            let mut lanes = Lanes::new(server.clone());
            lanes.ring_all(&root);
            loop {
                lanes.reap();
                tokio::select! {
                    _ = &mut stopped => break,
                    w = wake.recv() => match w {
                        Some(Some(folder)) => {
                            watch_group(&mut watcher, &folder);
                            lanes.ring(&folder);
                        }
                        _ => lanes.ring_all(&root),
                    },
                    _ = tokio::time::sleep(FULL_RESCAN) => {
                        for f in list_folders(&root) {
                            watch_group(&mut watcher, &f);
                        }
                        lanes.ring_all(&root);
                    }
                }
            }
            // What is being served is finished (each request's cost is
            // bounded); what waits is served by the next host.
            lanes.finish().await;
        }))
    }

    /// Handles every request of every group (leftovers of an earlier host).
    pub async fn drain_all(&self) {
        for folder in list_folders(&self.home.ipc_root()) {
            self.drain(&folder).await;
        }
    }

    /// Handles every request waiting in the group's `messages/` and
    /// `tasks/` (messages first: they are what the agent said before), then
    /// tells whoever takes in `events/` to look (`Links::events_arrived`).
    pub async fn drain(&self, folder: &GroupFolder) {
        // Another host's group is its to serve (its container writes them).
        // Asked of the store, not of what this host believes: a host paused
        // past its lease still believes it holds the group, and must not act
        // on what its old container asked once it runs again. Every write
        // the requests make is fenced by that lease (a lease lost while they
        // are served stops them).
        let fenced;
        let server = match &self.leases {
            None => self,
            Some(l) => match l.confirm(folder).await {
                Ok(Some(g)) => {
                    fenced = self.fenced(folder, l.at(g));
                    &fenced
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(group = %folder, error = %e, "agent requests wait: the lease could not be confirmed");
                    return;
                }
            },
        };
        // Beneath directory handles: a link planted in place of a folder or
        // a request is refused (and recorded), never followed. The file
        // work (listing, claiming, reading up to 1 MiB and parsing it,
        // answering) runs on the blocking pool, never on the runtime's
        // workers.
        let (home, f) = (self.home.clone(), folder.clone());
        let Some(Ok(tree)) = off(move || home.ipc_tree(&f)).await else {
            return;
        };
        let tree = Arc::new(tree);
        for sub in [ipc::MESSAGES_DIR, ipc::TASKS_DIR] {
            let (home, f, t) = (self.home.clone(), folder.clone(), tree.clone());
            let listed = off(move || {
                let dir = home.ensure_sub(&f, &t, sub).ok()?;
                let pending = dir.pending();
                Some((Arc::new(dir), pending))
            });
            let Some(Some((dir, pending))) = listed.await else {
                continue;
            };
            for name in pending {
                let claimed = format!(".claimed-{name}");
                let (home, f, d, n, c) = (
                    self.home.clone(),
                    folder.clone(),
                    dir.clone(),
                    name.clone(),
                    claimed.clone(),
                );
                let read = off(move || {
                    // Someone else took it when the rename fails.
                    d.rename_to(&n, &d, &c).ok()?;
                    Some(read_request(&home, &f, &d, &c, sub))
                });
                let Some(Some(read)) = read.await else {
                    continue;
                };
                let answered = match read {
                    Ok((req, named)) => Ok(server.handle(folder, req, named.as_deref()).await),
                    Err(why) => {
                        self.log(folder, None, "unreadable", "failed", &why).await;
                        Err(why)
                    }
                };
                let (home, f, t, d) =
                    (self.home.clone(), folder.clone(), tree.clone(), dir.clone());
                off(move || {
                    let outcome = answered.and_then(|r| respond(&home, &f, &t, &r).map_err(|e| e.to_string()));
                    match outcome {
                        Ok(()) => {
                            let _ = d.remove(&claimed);
                        }
                        Err(why) => {
                            tracing::warn!(group = %f, file = %name, reason = %why, "agent request kept in errors/");
                            keep_failed(&home, &f, &t, &d, &claimed, &name, &why);
                        }
                    }
                })
                .await;
            }
        }
        if let Some(arrived) = &self.links.events_arrived {
            arrived(folder);
        }
    }
}

/// One drain task per group with requests to serve: a group's requests in
/// order, groups side by side. A wake for a group being drained asks for
/// one more drain after it (wakes coalesce: at most one waits per group).
struct Lanes {
    server: RequestServer,
    /// Groups being drained, and whether one more drain is asked.
    again: Arc<Mutex<HashMap<GroupFolder, bool>>>,
    tasks: JoinSet<()>,
}

impl Lanes {
    fn new(server: RequestServer) -> Self {
        Lanes {
            server,
            again: Arc::default(),
            tasks: JoinSet::new(),
        }
    }

    /// Drains `folder` now, or once more after the drain under way.
    fn ring(&mut self, folder: &GroupFolder) {
        {
            let mut again = self
                .again
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(more) = again.get_mut(folder) {
                *more = true;
                return;
            }
            again.insert(folder.clone(), false);
        }
        let (server, again, folder) = (self.server.clone(), self.again.clone(), folder.clone());
        self.tasks.spawn(async move {
            loop {
                server.drain(&folder).await;
                let mut again = again
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match again.get_mut(&folder) {
                    Some(more) if *more => *more = false,
                    _ => {
                        again.remove(&folder);
                        return;
                    }
                }
            }
        });
    }

    /// Drains every group folder under `root`.
    fn ring_all(&mut self, root: &Path) {
        for folder in list_folders(root) {
            self.ring(&folder);
        }
    }

    /// Lets go of finished drains.
    fn reap(&mut self) {
        while self.tasks.try_join_next().is_some() {}
    }

    /// Waits for the drains under way.
    async fn finish(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Runs file work on the blocking pool; `None` if it panicked.
async fn off<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

/// Largest request file read.
const MAX_REQUEST: u64 = 1 << 20;

/// Fields a forged request might use to name another group.
const GROUP_FIELDS: &[&str] = &[
    "groupFolder",
    "group_folder",
    "targetGroup",
    "target_group",
    "group",
    "targetJid",
    "target_jid",
];

/// The group folder an event path belongs to: `ipc/{folder}` itself or a
/// file in its `messages/` or `tasks/`.
fn folder_of(root: &Path, path: &Path) -> Option<GroupFolder> {
    let rel = path.strip_prefix(root).ok()?;
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let folder = parts.next()?;
    match parts.next().as_deref() {
        // A folder name from the kernel: checked here, where it comes in.
        None | Some(ipc::MESSAGES_DIR) | Some(ipc::TASKS_DIR) | Some(ipc::EVENTS_DIR) => {
            GroupFolder::new(folder).ok()
        }
        _ => None,
    }
}

/// The group folders under `data/ipc/`.
fn list_folders(root: &Path) -> Vec<GroupFolder> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| GroupFolder::new(e.file_name().to_string_lossy()).ok())
        .collect()
}

/// Reads a claimed request; `messages/` takes `send_message` only. Also
/// returns a group the payload names outside the action's own fields.
fn read_request(
    home: &Home,
    folder: &GroupFolder,
    dir: &Dir,
    name: &str,
    sub: &str,
) -> std::result::Result<(TaskRequest, Option<String>), String> {
    let bytes = home
        .confined(folder, sub, dir.read(name, MAX_REQUEST))
        .map_err(|e| format!("unreadable request: {e}"))?;
    parse_request(&bytes, sub)
}

/// Parses a request file's bytes found in `sub` (`messages/` or `tasks/`);
/// see `read_request`.
pub fn parse_request(
    bytes: &[u8],
    sub: &str,
) -> std::result::Result<(TaskRequest, Option<String>), String> {
    let raw: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not a valid request: {e}"))?;
    let req: TaskRequest =
        serde_json::from_value(raw.clone()).map_err(|e| format!("not a valid request: {e}"))?;
    if sub == ipc::MESSAGES_DIR && !matches!(req.action, Action::SendMessage { .. }) {
        return Err(format!(
            "{} does not belong in messages/",
            req.action.name()
        ));
    }
    // schedule_task's `groupFolder` is its own field, authorized as such.
    let named = if matches!(req.action, Action::ScheduleTask { .. }) {
        None
    } else {
        GROUP_FIELDS
            .iter()
            .find_map(|k| raw.get(*k).and_then(|v| v.as_str()).map(str::to_string))
    };
    Ok((req, named))
}

fn respond(home: &Home, folder: &GroupFolder, tree: &Dir, r: &TaskResponse) -> Result<()> {
    let body = serde_json::to_vec(r)?;
    let dir = home.ensure_sub(folder, tree, ipc::RESPONSES_DIR)?;
    let w = dir.write_atomic(&format!("{}.json", safe_name(&r.request_id)), &body);
    home.confined(folder, "responses/", w)
}

/// Request ids become file names: keep them harmless.
fn safe_name(id: &str) -> String {
    let s: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect();
    if s.is_empty() { "invalid".into() } else { s }
}

fn keep_failed(
    home: &Home,
    folder: &GroupFolder,
    tree: &Dir,
    dir: &Dir,
    claimed: &str,
    name: &str,
    why: &str,
) {
    let Ok(errors) = home.ensure_sub(folder, tree, ipc::ERRORS_DIR) else {
        return;
    };
    let _ = dir.rename_to(claimed, &errors, name);
    let _ = errors.write_atomic(&format!("{name}.reason.txt"), why.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_paths_name_their_group() {
        let root = Path::new("/h/data/ipc");
        assert_eq!(
            folder_of(root, Path::new("/h/data/ipc/fam/tasks/x.json")).as_deref(),
            Some("fam")
        );
        assert_eq!(
            folder_of(root, Path::new("/h/data/ipc/fam/messages/.x.tmp")).as_deref(),
            Some("fam")
        );
        assert_eq!(
            folder_of(root, Path::new("/h/data/ipc/new")).as_deref(),
            Some("new")
        );
        assert_eq!(
            folder_of(root, Path::new("/h/data/ipc/fam/responses/x.json")),
            None,
            "our own answers"
        );
        assert_eq!(folder_of(root, Path::new("/elsewhere/x")), None);
    }

    #[test]
    fn request_ids_cannot_escape() {
        assert_eq!(safe_name("../../etc/passwd"), "etcpasswd");
        assert_eq!(safe_name(""), "invalid");
        assert_eq!(safe_name("0b9c3f6e-1c1d"), "0b9c3f6e-1c1d");
    }
}
