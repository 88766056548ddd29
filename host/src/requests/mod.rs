//! The host side of the agents' requests (`data/ipc/{group}/tasks/` and
//! `messages/`).
//!
//! In `g2 serve`, [`RequestServer::watch_all`] watches `data/ipc/` and every
//! group's `messages/` and `tasks/` (inotify), rescans everything on a
//! timer and when the kernel reports an overflow, and drains what an
//! earlier host left; `g2 run` watches its one group while its container
//! runs ([`RequestServer::watch`]). [`RequestServer::drain`] claims each request
//! by renaming it (`.claimed-…`; whoever renames owns it), carries it out,
//! and answers in `responses/{requestId}.json`. A request that cannot be
//! read is moved to `errors/` beside a note saying why.
//!
//! **Identity is the folder.** The group a request acts for is the IPC
//! folder it was found in, never anything in the request. Authorization
//! (contracts §2):
//!
//! | action | main group | other groups |
//! |---|---|---|
//! | send_message | to any known chat | only its own chat |
//! | schedule / pause / resume / cancel / list tasks | any group | only its own |
//! | register_group, refresh_groups | yes | no |
//! | clear / list / resume / search sessions | its own | its own |
//!
//! Every request is recorded in `ipc_log` with its outcome (`ok`,
//! `refused`, `failed`); refusals are also logged as warnings.

use std::path::Path;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use g2_core::confined::Dir;
use g2_core::ipc;
use g2_core::wire::{Action, TaskRequest, TaskResponse};

use crate::background::Background;
use crate::groups::{self, Group};
use crate::home::Home;
use crate::routing::channels::Channels;
use crate::search;
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use crate::tasks::{self, StatusAction};
use crate::{Error, Result};

/// How often a running group's folders are rescanned without an event.
const RESCAN: Duration = Duration::from_secs(2);
/// How often every group's folders are rescanned by [`RequestServer::watch_all`].
const FULL_RESCAN: Duration = Duration::from_secs(10);

/// Callback with a group's folder.
pub type FolderHook = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// What the requests reach beyond the store.
#[derive(Clone)]
pub struct Links {
    /// Where `send_message` and its channels go.
    pub channels: Channels,
    /// Name the assistant's messages carry.
    pub assistant_name: String,
    /// A group's session was cleared or resumed: its container should close
    /// after the current turn, so the next message starts accordingly.
    pub session_changed: Option<FolderHook>,
    /// Scheduled tasks changed: the scheduler should look again.
    pub tasks_changed: Option<std::sync::Arc<tokio::sync::Notify>>,
}

#[derive(Clone)]
pub struct RequestServer {
    home: Home,
    store: Store,
    sessions: SessionManager,
    links: Links,
    /// [`RequestServer::watch_all`] runs: per-run watches are not needed (and
    /// two drains of one folder at once could reorder its requests).
    watching_all: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl RequestServer {
    /// Must be called inside a Tokio runtime: it also becomes the home's
    /// recorder of planted links, which go to `ipc_log` (action `link`,
    /// outcome `refused`) from a task of their own, since they are found
    /// deep in blocking file code.
    pub fn new(home: Home, store: Store, sessions: SessionManager, links: Links) -> Self {
        let server = RequestServer {
            home,
            store,
            sessions,
            links,
            watching_all: Default::default(),
        };
        let (planted, mut found) = mpsc::unbounded_channel::<(String, String)>();
        server
            .home
            .on_planted(std::sync::Arc::new(move |folder: &str, what: &str| {
                let _ = planted.send((folder.to_string(), what.to_string()));
            }));
        let recorder = server.clone();
        tokio::spawn(async move {
            while let Some((folder, what)) = found.recv().await {
                recorder.log(&folder, None, "link", "refused", &what).await;
            }
        });
        server
    }

    /// Serves a group's requests until stopped; a last drain runs at stop
    /// (`g2 run`; a no-op while [`RequestServer::watch_all`] runs).
    pub fn watch(&self, folder: &str) -> Result<Background> {
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
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Our own reads are access events; reacting to them would loop.
            if let Ok(ev) = &res
                && matches!(ev.kind, notify::EventKind::Access(_))
            {
                return;
            }
            let _ = wake_tx.send(());
        })
        .map_err(|e| Error::Invalid(format!("watching {}: {e}", ipc_dir.display())))?;
        for dir in &dirs {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|e| Error::Invalid(format!("watching {}: {e}", dir.display())))?;
        }
        let (server, folder) = (self.clone(), folder.to_string());
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
    /// every [`FULL_RESCAN`] and whenever the kernel's queue overflowed.
    /// Starts with a full drain (what an earlier host left).
    pub fn watch_all(&self) -> Result<Background> {
        let root = self.home.data_dir().join("ipc");
        std::fs::create_dir_all(&root)
            .map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        // None: rescan everything.
        let (wake_tx, mut wake) = mpsc::unbounded_channel::<Option<String>>();
        let cb_root = root.clone();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
                // Our own reads are access events; reacting to them would loop.
                Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => {}
                Ok(ev) if ev.need_rescan() => {
                    let _ = wake_tx.send(None);
                }
                Ok(ev) => {
                    for p in &ev.paths {
                        if let Some(folder) = folder_of(&cb_root, p) {
                            let _ = wake_tx.send(Some(folder));
                        }
                    }
                }
                Err(_) => {
                    let _ = wake_tx.send(None);
                }
            })
            .map_err(|e| Error::Invalid(format!("watching {}: {e}", root.display())))?;
        watcher
            .watch(&root, RecursiveMode::NonRecursive)
            .map_err(|e| Error::Invalid(format!("watching {}: {e}", root.display())))?;
        self.watching_all
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (server, home) = (self.clone(), self.home.clone());
        Ok(Background::spawn(|mut stopped| async move {
            let mut watched = std::collections::HashSet::new();
            let mut watch_group = |watcher: &mut notify::RecommendedWatcher, folder: &str| {
                if watched.contains(folder) || g2_core::validate::group_folder(folder).is_err() {
                    return;
                }
                for sub in [ipc::MESSAGES_DIR, ipc::TASKS_DIR] {
                    let dir = root.join(folder).join(sub);
                    // Made a real folder first: a planted link is never watched.
                    let ok = home.ipc_sub(folder, sub).is_ok()
                        && watcher.watch(&dir, RecursiveMode::NonRecursive).is_ok();
                    if !ok {
                        tracing::warn!(dir = %dir.display(), "cannot watch; the timed rescan covers it");
                    }
                }
                watched.insert(folder.to_string());
            };
            let registered = server
                .store
                .read(store::groups::list)
                .await
                .unwrap_or_default();
            for g in &registered {
                watch_group(&mut watcher, &g.folder);
            }
            for f in list_folders(&root) {
                watch_group(&mut watcher, &f);
            }
            server.drain_all().await;
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    w = wake.recv() => match w {
                        Some(Some(folder)) => {
                            watch_group(&mut watcher, &folder);
                            server.drain(&folder).await;
                        }
                        _ => server.drain_all().await,
                    },
                    _ = tokio::time::sleep(FULL_RESCAN) => {
                        for f in list_folders(&root) {
                            watch_group(&mut watcher, &f);
                        }
                        server.drain_all().await;
                    }
                }
            }
        }))
    }

    /// Handles every request of every group (leftovers of an earlier host).
    pub async fn drain_all(&self) {
        for folder in list_folders(&self.home.data_dir().join("ipc")) {
            self.drain(&folder).await;
        }
    }

    /// Handles every request waiting in the group's `messages/` and
    /// `tasks/` (messages first: they are what the agent said before).
    pub async fn drain(&self, folder: &str) {
        // Beneath directory handles: a link planted in place of a folder or
        // a request is refused (and recorded), never followed.
        let Ok(tree) = self.home.ipc_tree(folder) else {
            return;
        };
        for sub in [ipc::MESSAGES_DIR, ipc::TASKS_DIR] {
            let Ok(dir) = self.home.ensure_sub(folder, &tree, sub) else {
                continue;
            };
            for name in dir.pending() {
                let claimed = format!(".claimed-{name}");
                if dir.rename_to(&name, &dir, &claimed).is_err() {
                    continue; // someone else took it
                }
                let outcome = match read_request(&self.home, folder, &dir, &claimed, sub) {
                    Ok((req, named)) => {
                        let response = self.handle(folder, req, named.as_deref()).await;
                        respond(&self.home, folder, &tree, &response).map_err(|e| e.to_string())
                    }
                    Err(why) => {
                        self.log(folder, None, "unreadable", "failed", &why).await;
                        Err(why)
                    }
                };
                match outcome {
                    Ok(()) => {
                        let _ = dir.remove(&claimed);
                    }
                    Err(why) => {
                        tracing::warn!(group = folder, file = %name, reason = %why, "agent request kept in errors/");
                        keep_failed(&self.home, folder, &tree, &dir, &claimed, &name, &why);
                    }
                }
            }
        }
    }

    /// Carries out one request for `folder` (the folder it came from) and
    /// records the outcome in `ipc_log`. `named`: a group the request's
    /// payload names in a field the action does not have (a forged target).
    pub async fn handle(
        &self,
        folder: &str,
        req: TaskRequest,
        named: Option<&str>,
    ) -> TaskResponse {
        let action = req.action.name();
        let result = match named {
            Some(other) if other != folder => Err(Error::Forbidden(format!(
                "{action} acts on the group whose folder the request is in ({folder}), never on {other}"
            ))),
            _ => self.act(folder, req.action).await,
        };
        let (ok, text, outcome) = match result {
            Ok(text) => (true, text, "ok"),
            Err(Error::Forbidden(why)) => {
                tracing::warn!(group = folder, action, reason = %why, "agent request refused");
                (false, format!("not allowed: {why}"), "refused")
            }
            Err(e) => {
                tracing::info!(group = folder, action, error = %e, "agent request failed");
                (false, e.to_string(), "failed")
            }
        };
        let detail = if ok { String::new() } else { text.clone() };
        self.log(folder, Some(&req.request_id), action, outcome, &detail)
            .await;
        TaskResponse {
            request_id: req.request_id,
            ok,
            text,
        }
    }

    async fn log(
        &self,
        folder: &str,
        request_id: Option<&str>,
        action: &str,
        outcome: &str,
        detail: &str,
    ) {
        let (f, r, a, o, d) = (
            folder.to_string(),
            request_id.map(str::to_string),
            action.to_string(),
            outcome.to_string(),
            detail.to_string(),
        );
        let res = self
            .store
            .write(move |tx| {
                tx.execute(
                    "INSERT INTO ipc_log (group_folder, request_id, action, outcome, detail, at) VALUES (?1, ?2, ?3, ?4, NULLIF(?5, ''), ?6)",
                    rusqlite::params![f, r, a, o, d, crate::now_rfc3339()],
                )?;
                Ok(())
            })
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, "could not record an agent request");
        }
    }

    async fn act(&self, folder: &str, action: Action) -> Result<String> {
        // An IPC folder without a registered group has no rights at all.
        let me = match groups::require(&self.store, folder).await {
            Ok(g) => g,
            Err(Error::NotFound(_)) => {
                return Err(Error::Forbidden(format!(
                    "{folder} is not a registered group"
                )));
            }
            Err(e) => return Err(e),
        };
        match action {
            Action::ClearSession { name } => {
                let text = self.clear(folder, &name).await?;
                self.session_changed(folder);
                Ok(text)
            }
            Action::ListSessions {} => self.list(folder).await,
            Action::ResumeSession {
                history_id,
                save_current_as,
            } => {
                let text = self
                    .resume(folder, history_id, save_current_as.as_deref())
                    .await?;
                self.session_changed(folder);
                Ok(text)
            }
            Action::SearchSessions { query, limit } => {
                self.search(folder, &query, limit.unwrap_or(10)).await
            }
            Action::SendMessage { text, chat_jid } => self.send(&me, &text, chat_jid).await,
            Action::ScheduleTask {
                prompt,
                schedule_type,
                schedule_value,
                timezone,
                context_mode,
                group_folder,
            } => {
                let target = self
                    .target_group(&me, group_folder.as_deref(), "schedule tasks")
                    .await?;
                let new = tasks::NewTask {
                    group_folder: target.folder.clone(),
                    chat_jid: target.jid.clone(),
                    prompt,
                    schedule_type,
                    schedule_value,
                    timezone,
                    context_mode,
                };
                let t = self
                    .store
                    .write(move |tx| tasks::create(tx, new, chrono::Utc::now()))
                    .await?;
                self.tasks_changed();
                Ok(format!(
                    "Scheduled task {} for {} ({} {} {}, {} context). Next run: {}.",
                    t.id,
                    t.group_folder,
                    t.schedule_type,
                    t.schedule_value,
                    t.timezone,
                    t.context_mode,
                    t.next_run.as_deref().unwrap_or("none")
                ))
            }
            Action::ListTasks {} => {
                let scope = (!me.is_main).then(|| folder.to_string());
                let list = self
                    .store
                    .read(move |c| store::tasks::list(c, scope.as_deref()))
                    .await?;
                if list.is_empty() {
                    return Ok("No scheduled tasks.".into());
                }
                let mut s = String::from("Scheduled tasks:");
                for t in list {
                    s.push_str(&format!(
                        "\n{} [{}] {} {} {} ({}): next {}, last {}: {}",
                        t.id,
                        t.status,
                        t.group_folder,
                        t.schedule_type,
                        t.schedule_value,
                        t.timezone,
                        t.next_run.as_deref().unwrap_or("-"),
                        t.last_run.as_deref().unwrap_or("-"),
                        t.prompt.chars().take(80).collect::<String>()
                    ));
                }
                Ok(s)
            }
            Action::PauseTask { task_id } => {
                self.task_status(&me, &task_id, StatusAction::Pause).await
            }
            Action::ResumeTask { task_id } => {
                self.task_status(&me, &task_id, StatusAction::Resume).await
            }
            Action::CancelTask { task_id } => {
                self.task_status(&me, &task_id, StatusAction::Cancel).await
            }
            Action::RegisterGroup {
                folder: new_folder,
                name,
                jid,
                trigger,
                requires_trigger,
            } => {
                if !me.is_main {
                    return Err(Error::Forbidden(
                        "only the main group registers groups".into(),
                    ));
                }
                let new = groups::NewGroup {
                    folder: new_folder,
                    name,
                    jid,
                    trigger_pattern: trigger,
                    requires_trigger,
                    is_main: false,
                };
                let g = groups::register(&self.store, &self.home, new, &self.links.assistant_name)
                    .await?;
                Ok(format!(
                    "Registered group {} (folder {}, chat {}).",
                    g.name, g.folder, g.jid
                ))
            }
            Action::RefreshGroups {} => {
                if !me.is_main {
                    return Err(Error::Forbidden(
                        "only the main group sees the groups".into(),
                    ));
                }
                let list = self.store.read(store::groups::list).await?;
                let tree = self.home.ipc_tree(folder)?;
                let r = tree.write_atomic(
                    "available_groups.json",
                    &serde_json::to_vec_pretty(&groups::snapshot(&list)).unwrap_or_default(),
                );
                self.home.confined(folder, "available_groups.json", r)?;
                Ok(format!(
                    "available_groups.json lists {} groups.",
                    list.len()
                ))
            }
        }
    }

    /// The group a task request is for: its own, or (main only) another.
    async fn target_group(&self, me: &Group, named: Option<&str>, what: &str) -> Result<Group> {
        match named {
            None => Ok(me.clone()),
            Some(f) if f == me.folder => Ok(me.clone()),
            Some(f) if !me.is_main => Err(Error::Forbidden(format!(
                "group {} may only {what} for itself, not for {f}",
                me.folder
            ))),
            Some(f) => {
                g2_core::validate::group_folder(f)?;
                groups::require(&self.store, f).await
            }
        }
    }

    async fn send(&self, me: &Group, text: &str, chat_jid: Option<String>) -> Result<String> {
        let target = chat_jid.unwrap_or_else(|| me.jid.clone());
        if target != me.jid {
            if !me.is_main {
                return Err(Error::Forbidden(format!(
                    "group {} may only send to its own chat, not to {target}",
                    me.folder
                )));
            }
            let t = target.clone();
            let known = self
                .store
                .read(move |c| {
                    Ok(c.query_row(
                        "SELECT EXISTS (SELECT 1 FROM registered_groups WHERE jid = ?1) OR EXISTS (SELECT 1 FROM chats WHERE jid = ?1)",
                        [&t],
                        |r| r.get::<_, bool>(0),
                    )?)
                })
                .await?;
            if !known {
                return Err(Error::NotFound(format!("chat {target:?}")));
            }
        }
        if text.trim().is_empty() || text.len() > crate::routing::messages::MAX_TEXT {
            return Err(Error::Invalid("text: 1 character to 32 KiB".into()));
        }
        match self
            .links
            .channels
            .say(&target, &self.links.assistant_name, text)
            .await?
        {
            Some(_) => Ok(format!("Sent to {target}.")),
            None => Ok("Nothing to send once internal notes are removed.".into()),
        }
    }

    async fn task_status(&self, me: &Group, id: &str, action: StatusAction) -> Result<String> {
        let scope = (!me.is_main).then(|| me.folder.clone());
        let i = id.to_string();
        let task = self
            .store
            .read(move |c| store::tasks::get(c, &i))
            .await?
            .ok_or_else(|| Error::NotFound(format!("task {id:?}")))?;
        if let Some(own) = &scope
            && &task.group_folder != own
        {
            return Err(Error::Forbidden(format!(
                "task {id} belongs to group {}, not to {own}",
                task.group_folder
            )));
        }
        let i = id.to_string();
        let t = self
            .store
            .write(move |tx| {
                tasks::set_status(tx, &i, scope.as_deref(), action, chrono::Utc::now())
            })
            .await?;
        self.tasks_changed();
        Ok(format!("Task {} is {}.", t.id, t.status))
    }

    fn session_changed(&self, folder: &str) {
        if let Some(f) = &self.links.session_changed {
            f(folder);
        }
    }

    fn tasks_changed(&self) {
        if let Some(n) = &self.links.tasks_changed {
            n.notify_one();
        }
    }

    async fn clear(&self, folder: &str, name: &str) -> Result<String> {
        let p = self.sessions.get(folder).await?;
        let c = self.sessions.clear(folder, name, p.generation).await?;
        let archived = match &c.archive {
            Some(a) => format!("archived to {}", self.in_group(folder, &a.path)),
            None => "there was no transcript to archive".into(),
        };
        Ok(format!(
            "Cleared. The conversation is bookmarked as \"{}\" (history #{}) and {archived}. The next message starts a new session.",
            c.history.name, c.history.id
        ))
    }

    async fn list(&self, folder: &str) -> Result<String> {
        let h = self.sessions.history(folder).await?;
        if h.is_empty() {
            return Ok("No earlier sessions.".into());
        }
        let mut s = String::from("Earlier sessions (newest first):");
        for e in h {
            s.push_str(&format!(
                "\n#{} \"{}\" (session {}, archived {})",
                e.id,
                e.name,
                e.session_id,
                e.archived_at.get(..10).unwrap_or(&e.archived_at)
            ));
        }
        Ok(s)
    }

    async fn resume(&self, folder: &str, history_id: i64, save_as: Option<&str>) -> Result<String> {
        let p = self.sessions.get(folder).await?;
        let r = self
            .sessions
            .resume(folder, history_id, p.generation, save_as)
            .await?;
        let mut s = format!(
            "Resumed session {}. It takes effect with the next message.",
            r.pointer.session_id.clone().unwrap_or_default()
        );
        if let Some(saved) = &r.saved {
            s.push_str(&format!(
                " The previous conversation is bookmarked as \"{}\" (history #{}).",
                saved.name, saved.id
            ));
        }
        Ok(s)
    }

    async fn search(&self, folder: &str, query: &str, limit: usize) -> Result<String> {
        let (q, g) = (query.to_string(), folder.to_string());
        let hits = self
            .store
            .read(move |c| search::search(c, &q, Some(&g), limit.clamp(1, 50)))
            .await?;
        if hits.is_empty() {
            return Ok(format!("No archived conversation matches \"{query}\"."));
        }
        let mut s = format!("{} archived conversation(s) match \"{query}\":", hits.len());
        for (i, h) in hits.iter().enumerate() {
            s.push_str(&format!(
                "\n{}. \"{}\" ({}) {}\n   {}",
                i + 1,
                h.name,
                h.created_at.get(..10).unwrap_or(&h.created_at),
                self.in_group(folder, &h.path),
                h.snippet
            ));
        }
        Ok(s)
    }

    /// A stored path (relative to the home) as the agent sees it: relative
    /// to its group folder (`conversations/…`).
    fn in_group(&self, folder: &str, rel: &str) -> String {
        let prefix = format!("groups/{folder}/");
        rel.strip_prefix(&prefix).unwrap_or(rel).to_string()
    }
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
fn folder_of(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let folder = parts.next()?;
    match parts.next().as_deref() {
        None | Some(ipc::MESSAGES_DIR) | Some(ipc::TASKS_DIR) => Some(folder),
        _ => None,
    }
}

/// The group folders under `data/ipc/`.
fn list_folders(root: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| g2_core::validate::group_folder(n).is_ok())
        .collect()
}

/// Reads a claimed request; `messages/` takes `send_message` only. Also
/// returns a group the payload names outside the action's own fields.
fn read_request(
    home: &Home,
    folder: &str,
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
/// see [`read_request`].
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

fn respond(home: &Home, folder: &str, tree: &Dir, r: &TaskResponse) -> Result<()> {
    let body = serde_json::to_vec(r).map_err(|e| Error::Invalid(e.to_string()))?;
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
    folder: &str,
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
