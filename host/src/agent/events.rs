//! What the agent reported through `events/` during a run, taken in after
//! it: `archive` notices (a PreCompact transcript written to
//! `conversations/`) are validated and indexed, `capture` events go to
//! memory capture
//! (`memory::ingest`, one transaction each, a replayed file recognised by
//! name); a file that cannot be read or taken in is moved to `errors/`.
//! Under `g2 serve` they are also taken in as they arrive ([`intake`]).
//!
//! Boundary: reads the group's `events/` beneath its confined handle; writes
//! only through the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use g2_core::ipc;
use g2_core::trace::Stage;
use g2_core::wire::AgentEvent;

use super::Agents;
use crate::archives::{ArchiveRecord, Prepared};
use crate::store;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

/// What to call when a group's agent wrote events: `g2 serve`'s request
/// watcher rings it as files arrive, so what the hooks capture is taken in
/// as it comes, not when the (warm) container exits. Each ring takes the
/// group's events in the background ([`Agents::take_events`]); one intake
/// per group at a time, and a ring during one asks for one more pass (a
/// burst of files is then listed once, not per file).
pub fn intake(agents: Arc<Agents>) -> Arc<dyn Fn(&GroupFolder) + Send + Sync> {
    // Per group taking in: whether a ring came during the pass.
    let taking: Arc<Mutex<HashMap<GroupFolder, bool>>> = Arc::default();
    Arc::new(move |f: &GroupFolder| {
        {
            let mut t = taking.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(again) = t.get_mut(f) {
                *again = true;
                return;
            }
            t.insert(f.clone(), false);
        }
        let (agents, taking, f) = (agents.clone(), taking.clone(), f.clone());
        tokio::spawn(async move {
            loop {
                if let Err(e) = agents.take_events(&f).await {
                    tracing::warn!(group = %f, error = %e, "taking in agent events");
                }
                let mut t = taking.lock().unwrap_or_else(PoisonError::into_inner);
                if t.get(&f) == Some(&true) {
                    t.insert(f.clone(), false);
                } else {
                    t.remove(&f);
                    break;
                }
            }
        });
    })
}

impl Agents {
    /// Takes the agent's IPC events: indexes archive notices, takes
    /// captures into memory; unreadable files go to `errors/`.
    pub async fn take_events(&self, folder: &GroupFolder) -> Result<Vec<ArchiveRecord>> {
        let dir = self.home.ipc_sub(folder, ipc::EVENTS_DIR)?;
        let mut archived = Vec::new();
        // A group whose capture is off keeps none, whatever a hook wrote.
        // Read now rather than taken from the run's row: capture turned
        // off while the agent runs must stop what it captures next.
        let f = folder.clone();
        let captures = self
            .store
            .read(move |c| store::groups::get(c, &f))
            .await?
            .is_none_or(|g| g.container_config.memory.captures());
        for name in dir.pending() {
            // Claimed by rename: the run's end and the host's intake may
            // look at once, and whoever renames owns the file.
            let claimed = format!(".claimed-{name}");
            if dir.rename_to(&name, &dir, &claimed).is_err() {
                continue;
            }
            let outcome = match self
                .home
                .confined(folder, "events/", dir.read(&claimed, 1 << 20))
                .and_then(|b| {
                    serde_json::from_slice::<AgentEvent>(&b)
                        .map_err(|e| Error::Invalid(format!("agent event: {e}")))
                }) {
                Ok(AgentEvent::Archive {
                    path,
                    title,
                    session_id,
                    ..
                }) => self
                    .adopt_archive(folder, &path, &title, session_id.as_deref())
                    .await
                    .map(|r| archived.extend(r)),
                Ok(AgentEvent::Capture {
                    session_id,
                    at,
                    event,
                }) if !captures => {
                    let _ = (session_id, at, event);
                    Ok(())
                }
                Ok(AgentEvent::Capture {
                    session_id,
                    at,
                    event,
                }) => {
                    let (f, n, redactor) = (folder.clone(), name.clone(), self.redactor.clone());
                    let began = std::time::Instant::now();
                    let written = self
                        .store
                        .write(move |tx| {
                            crate::memory::ingest::capture(
                                tx,
                                &f,
                                &n,
                                session_id.as_deref(),
                                &at,
                                &event,
                                &redactor,
                            )
                        })
                        .await
                        .map(|_| ());
                    let took_us = Some(began.elapsed().as_micros() as u64);
                    let d = crate::trace::Detail {
                        took_us,
                        ..Default::default()
                    };
                    crate::trace::record(Stage::EventsTaken, Some(folder), None, d);
                    written
                }
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    let _ = dir.remove(&claimed);
                }
                Err(e) => {
                    tracing::warn!(group = %folder, file = %name, error = %e, "agent event kept in errors/");
                    if let Ok(errors) = self.home.ipc_sub(folder, ipc::ERRORS_DIR) {
                        let _ = dir.rename_to(&claimed, &errors, &name);
                    }
                }
            }
        }
        Ok(archived)
    }

    /// Puts back the events a host killed while taking them in had
    /// claimed, so the next take finds them (memory capture recognises a
    /// file it took in already). Only for the group's owner, under a lease
    /// generation it has just taken (`Agents::adopt`): no one else can be
    /// taking them.
    pub fn release_event_claims(&self, folder: &GroupFolder) -> Result<usize> {
        let dir = self.home.ipc_sub(folder, ipc::EVENTS_DIR)?;
        let mut released = 0;
        for e in dir.entries().unwrap_or_default() {
            if let Some(name) = e.name.strip_prefix(".claimed-")
                && name.ends_with(".json")
                && dir.rename_to(&e.name, &dir, name).is_ok()
            {
                released += 1;
            }
        }
        Ok(released)
    }

    async fn adopt_archive(
        &self,
        folder: &GroupFolder,
        rel: &str,
        title: &str,
        session_id: Option<&str>,
    ) -> Result<Option<ArchiveRecord>> {
        let prepared = Prepared::adopt(&self.home, folder, rel, title, session_id)?;
        let path = prepared.rel_path.clone();
        let known = self
            .store
            .read(move |c| store::archives::is_recorded(c, &path))
            .await?;
        if known {
            return Ok(None);
        }
        let rec = self
            .store
            .write(move |tx| store::archives::insert(tx, &prepared))
            .await?;
        Ok(Some(rec))
    }
}
