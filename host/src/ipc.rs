//! The host side of the agents' requests (`data/ipc/{group}/tasks/`).
//!
//! A watcher (inotify, plus a rescan on a timer in case an event is lost)
//! wakes [`TaskServer::drain`], which claims each request by renaming it
//! (`.claimed-…`; whoever renames owns it), carries it out, and answers in
//! `responses/{requestId}.json`. A request that cannot be read is moved to
//! `errors/` beside a note saying why.
//!
//! **Identity is the folder.** The group a request acts for is the IPC
//! folder it was found in, never anything in the request. The session tools
//! act on that group only: there is no way to name another group.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use g2_core::ipc;
use g2_core::wire::{Action, TaskRequest, TaskResponse};

use crate::background::Background;
use crate::home::Home;
use crate::search;
use crate::sessions::SessionManager;
use crate::store::Store;
use crate::{Error, Result};

/// How often the tasks folder is rescanned without an event.
const RESCAN: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct TaskServer {
    home: Home,
    store: Store,
    sessions: SessionManager,
}

impl TaskServer {
    pub fn new(home: Home, store: Store, sessions: SessionManager) -> Self {
        TaskServer { home, store, sessions }
    }

    /// Serves a group's requests until stopped; a last drain runs at stop.
    pub fn watch(&self, folder: &str) -> Result<Background> {
        let dir = self.home.ipc_dir(folder)?.join(ipc::TASKS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
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
        .map_err(|e| Error::Invalid(format!("watching {}: {e}", dir.display())))?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| Error::Invalid(format!("watching {}: {e}", dir.display())))?;
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

    /// Handles every request waiting in the group's `tasks/`.
    pub async fn drain(&self, folder: &str) {
        let Ok(ipc_dir) = self.home.ipc_dir(folder) else { return };
        let dir = ipc_dir.join(ipc::TASKS_DIR);
        for name in ipc::pending(&dir) {
            let claimed = dir.join(format!(".claimed-{name}"));
            if std::fs::rename(dir.join(&name), &claimed).is_err() {
                continue; // someone else took it
            }
            let outcome = match std::fs::read(&claimed).map_err(|e| e.to_string()).and_then(|b| {
                serde_json::from_slice::<TaskRequest>(&b).map_err(|e| format!("not a valid request: {e}"))
            }) {
                Ok(req) => {
                    let response = self.handle(folder, req).await;
                    respond(&ipc_dir, &response).map_err(|e| e.to_string())
                }
                Err(why) => Err(why),
            };
            match outcome {
                Ok(_) => {
                    let _ = std::fs::remove_file(&claimed);
                }
                Err(why) => {
                    tracing::warn!(group = folder, file = %name, reason = %why, "agent request refused");
                    keep_failed(&ipc_dir, &claimed, &name, &why);
                }
            }
        }
    }

    /// Carries out one request for `folder` (the folder it came from).
    pub async fn handle(&self, folder: &str, req: TaskRequest) -> TaskResponse {
        let result = match req.action {
            Action::ClearSession { name } => self.clear(folder, &name).await,
            Action::ListSessions {} => self.list(folder).await,
            Action::ResumeSession { history_id, save_current_as } => {
                self.resume(folder, history_id, save_current_as.as_deref()).await
            }
            Action::SearchSessions { query, limit } => self.search(folder, &query, limit.unwrap_or(10)).await,
            other => Err(Error::Invalid(format!("{} is not served here", other.name()))),
        };
        match result {
            Ok(text) => TaskResponse { request_id: req.request_id, ok: true, text },
            Err(e) => {
                tracing::info!(group = folder, error = %e, "agent request failed");
                TaskResponse { request_id: req.request_id, ok: false, text: e.to_string() }
            }
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
        let r = self.sessions.resume(folder, history_id, p.generation, save_as).await?;
        let mut s = format!(
            "Resumed session {}. It takes effect with the next message.",
            r.pointer.session_id.clone().unwrap_or_default()
        );
        if let Some(saved) = &r.saved {
            s.push_str(&format!(" The previous conversation is bookmarked as \"{}\" (history #{}).", saved.name, saved.id));
        }
        Ok(s)
    }

    async fn search(&self, folder: &str, query: &str, limit: usize) -> Result<String> {
        let (q, g) = (query.to_string(), folder.to_string());
        let hits = self.store.read(move |c| search::search(c, &q, Some(&g), limit.clamp(1, 50))).await?;
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

fn respond(ipc_dir: &Path, r: &TaskResponse) -> std::io::Result<PathBuf> {
    let body = serde_json::to_vec(r).map_err(std::io::Error::other)?;
    ipc::write_atomic(&ipc_dir.join(ipc::RESPONSES_DIR), &format!("{}.json", safe_name(&r.request_id)), &body)
}

/// Request ids become file names: keep them harmless.
fn safe_name(id: &str) -> String {
    let s: String = id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(64).collect();
    if s.is_empty() { "invalid".into() } else { s }
}

fn keep_failed(ipc_dir: &Path, claimed: &Path, name: &str, why: &str) {
    let errors = ipc_dir.join(ipc::ERRORS_DIR);
    let _ = std::fs::create_dir_all(&errors);
    let _ = std::fs::rename(claimed, errors.join(name));
    let _ = std::fs::write(errors.join(format!("{name}.reason.txt")), why);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_cannot_escape() {
        assert_eq!(safe_name("../../etc/passwd"), "etcpasswd");
        assert_eq!(safe_name(""), "invalid");
        assert_eq!(safe_name("0b9c3f6e-1c1d"), "0b9c3f6e-1c1d");
    }
}
