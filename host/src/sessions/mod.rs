//! Session pointers and history (layer 2 of the memory system).
//!
//! `sessions` holds each group's active Claude Code session id; the row
//! stays when the pointer is removed, so its `generation` only grows.
//! `session_history` holds bookmarks of earlier sessions by name.
//!
//! **The generation guard.** Every pointer write names the generation it
//! was read at and is refused ([`Error::StaleGeneration`]) when the pointer
//! has moved on since. A turn that started before a `clear_session` can
//! therefore not write the old session id back when it ends. The check runs
//! inside the write transaction, so it holds across processes too; the
//! in-memory cache only serves reads and is refreshed from every write.
//!
//! [`SessionManager::clear`] and [`SessionManager::resume`] are the
//! operations behind the agents' tools and the CLI: archive (transcript to
//! markdown, pointer to history) and restore, each in one transaction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};
use serde::{Deserialize, Serialize};

use g2_core::archive::ArchiveOptions;
use g2_core::validate;

use crate::archives::{self, ArchiveRecord, Prepared, Trigger};
use crate::home::Home;
use crate::store::{self, Store};
use crate::{Error, Result};

/// A group's active session pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    pub group: String,
    /// `None`: no active session; the next message starts a new one.
    pub session_id: Option<String>,
    /// Grows by one with every change of the pointer.
    pub generation: i64,
    /// When this session became the active one.
    pub created_at: Option<String>,
}

/// A bookmark of an earlier session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub id: i64,
    pub group: String,
    pub session_id: String,
    pub name: String,
    pub created_at: String,
    pub archived_at: String,
}

/// What [`SessionManager::clear`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Cleared {
    pub history: HistoryEntry,
    /// `None` when the session had no transcript on disk.
    pub archive: Option<ArchiveRecord>,
    pub pointer: Pointer,
}

/// What [`SessionManager::resume`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Resumed {
    pub pointer: Pointer,
    /// The session that was active before, bookmarked.
    pub saved: Option<HistoryEntry>,
    pub saved_archive: Option<ArchiveRecord>,
}

// --- transaction-level operations -------------------------------------------

pub fn pointer(conn: &Connection, group: &str) -> Result<Pointer> {
    Ok(conn
        .query_row(
            "SELECT session_id, generation, created_at FROM sessions WHERE group_folder = ?1",
            [group],
            |r| {
                Ok(Pointer {
                    group: group.to_string(),
                    session_id: r.get(0)?,
                    generation: r.get(1)?,
                    created_at: r.get(2)?,
                })
            },
        )
        .optional()?
        .unwrap_or_else(|| Pointer {
            group: group.to_string(),
            session_id: None,
            generation: 0,
            created_at: None,
        }))
}

/// Reads the pointer and refuses if it is not at `read_generation`.
fn check(tx: &Transaction<'_>, group: &str, read_generation: i64) -> Result<Pointer> {
    let current = pointer(tx, group)?;
    if current.generation != read_generation {
        return Err(Error::StaleGeneration {
            group: group.to_string(),
            read: read_generation,
            current: current.generation,
        });
    }
    Ok(current)
}

/// Writes the pointer and bumps its generation.
fn write(
    tx: &Transaction<'_>,
    current: &Pointer,
    session_id: Option<&str>,
    created_at: Option<&str>,
) -> Result<Pointer> {
    let now = crate::now_rfc3339();
    let generation = current.generation + 1;
    tx.execute(
        "INSERT INTO sessions (group_folder, session_id, generation, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (group_folder) DO UPDATE SET
           session_id = excluded.session_id, generation = excluded.generation,
           created_at = excluded.created_at, updated_at = excluded.updated_at",
        params![current.group, session_id, generation, created_at, now],
    )?;
    Ok(Pointer {
        group: current.group.clone(),
        session_id: session_id.map(str::to_string),
        generation,
        created_at: created_at.map(str::to_string),
    })
}

fn insert_history(
    tx: &Transaction<'_>,
    current: &Pointer,
    session_id: &str,
    name: &str,
) -> Result<HistoryEntry> {
    let name = clean_name(name)?;
    let archived_at = crate::now_rfc3339();
    let created_at = current
        .created_at
        .clone()
        .unwrap_or_else(|| archived_at.clone());
    tx.execute(
        "INSERT INTO session_history (group_folder, session_id, name, created_at, archived_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![current.group, session_id, name, created_at, archived_at],
    )?;
    Ok(HistoryEntry {
        id: tx.last_insert_rowid(),
        group: current.group.clone(),
        session_id: session_id.to_string(),
        name,
        created_at,
        archived_at,
    })
}

fn history_from_row(r: &Row<'_>) -> rusqlite::Result<HistoryEntry> {
    Ok(HistoryEntry {
        id: r.get(0)?,
        group: r.get(1)?,
        session_id: r.get(2)?,
        name: r.get(3)?,
        created_at: r.get(4)?,
        archived_at: r.get(5)?,
    })
}

pub fn history(conn: &Connection, group: &str) -> Result<Vec<HistoryEntry>> {
    let mut stmt = conn.prepare(
        "SELECT id, group_folder, session_id, name, created_at, archived_at
         FROM session_history WHERE group_folder = ?1 ORDER BY id DESC",
    )?;
    let rows = stmt.query_map([group], history_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A history name: one line, 1-200 characters.
pub fn clean_name(name: &str) -> Result<String> {
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() || name.chars().count() > 200 {
        return Err(Error::Invalid(format!(
            "session name {name:?}: use 1-200 characters"
        )));
    }
    Ok(name)
}

// --- the manager --------------------------------------------------------------

/// Session pointers with an in-memory read cache, and the clear / resume
/// operations.
#[derive(Clone)]
pub struct SessionManager {
    store: Store,
    home: Home,
    archive: ArchiveOptions,
    cache: Arc<Mutex<HashMap<String, Pointer>>>,
}

impl SessionManager {
    pub fn new(store: Store, home: Home, archive: ArchiveOptions) -> Self {
        Self {
            store,
            home,
            archive,
            cache: Arc::default(),
        }
    }

    fn remember(&self, p: &Pointer) {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.group.clone(), p.clone());
    }

    /// Runs a pointer write whose closure returns the new pointer.
    async fn guarded<T: Send + 'static>(
        &self,
        group: &str,
        f: impl FnOnce(&Transaction<'_>) -> Result<(T, Pointer)> + Send + 'static,
    ) -> Result<T> {
        let outcome = self.store.write(f).await;
        self.settle(group, outcome, None, |(_, p)| p)
            .map(|(v, _)| v)
    }

    /// The active pointer of a group (from the cache when it has it).
    pub async fn get(&self, group: &str) -> Result<Pointer> {
        validate::group_folder(group)?;
        if let Some(p) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(group)
        {
            return Ok(p.clone());
        }
        let g = group.to_string();
        let p = self.store.read(move |c| pointer(c, &g)).await?;
        self.remember(&p);
        Ok(p)
    }

    /// Makes `session_id` the active session. Setting the id that is active
    /// already changes nothing and keeps the generation.
    pub async fn set(
        &self,
        group: &str,
        session_id: &str,
        read_generation: i64,
    ) -> Result<Pointer> {
        validate::group_folder(group)?;
        let id = validate::session_id(session_id)?;
        let g = group.to_string();
        self.guarded(group, move |tx| {
            let current = check(tx, &g, read_generation)?;
            if current.session_id.as_deref() == Some(id.as_str()) {
                return Ok((current.clone(), current));
            }
            let p = write(tx, &current, Some(&id), Some(&crate::now_rfc3339()))?;
            Ok((p.clone(), p))
        })
        .await
    }

    /// Removes the active pointer (the session is not bookmarked).
    pub async fn delete(&self, group: &str, read_generation: i64) -> Result<Pointer> {
        validate::group_folder(group)?;
        let g = group.to_string();
        self.guarded(group, move |tx| {
            let current = check(tx, &g, read_generation)?;
            let p = write(tx, &current, None, None)?;
            Ok((p.clone(), p))
        })
        .await
    }

    /// Moves the active pointer into the history under `name`.
    pub async fn archive(
        &self,
        group: &str,
        name: &str,
        read_generation: i64,
    ) -> Result<HistoryEntry> {
        Ok(self
            .clear_with(group, name, read_generation, None)
            .await?
            .history)
    }

    /// Moves a history entry back to the active pointer and removes it from
    /// the history. The session active before, if any, is bookmarked first
    /// (under `save_current_as`, else a generated name), so nothing is lost.
    pub async fn restore(
        &self,
        group: &str,
        history_id: i64,
        read_generation: i64,
        save_current_as: Option<&str>,
    ) -> Result<Resumed> {
        self.restore_with(
            group,
            history_id,
            read_generation,
            save_current_as.map(str::to_string),
            None,
        )
        .await
    }

    /// A group's bookmarks, newest first.
    pub async fn history(&self, group: &str) -> Result<Vec<HistoryEntry>> {
        validate::group_folder(group)?;
        let g = group.to_string();
        self.store.read(move |c| history(c, &g)).await
    }

    /// `clear_session`: archives the active session's transcript to markdown
    /// (when it exists on disk), bookmarks the session under `name`, removes
    /// the pointer; all recorded in one transaction.
    pub async fn clear(&self, group: &str, name: &str, read_generation: i64) -> Result<Cleared> {
        validate::group_folder(group)?;
        clean_name(name)?;
        let current = self.get(group).await?;
        let prepared = match &current.session_id {
            Some(id) => self.prepare_archive(group, id, name).await?,
            None => None,
        };
        self.clear_with(group, name, read_generation, prepared)
            .await
    }

    /// `resume_session`: bookmarks the active session (and, when
    /// `save_current_as` names it, archives its transcript under that name;
    /// unnamed it is bookmarked as "before resuming <target>"), then
    /// restores the chosen one.
    pub async fn resume(
        &self,
        group: &str,
        history_id: i64,
        read_generation: i64,
        save_current_as: Option<&str>,
    ) -> Result<Resumed> {
        validate::group_folder(group)?;
        let current = self.get(group).await?;
        let prepared = match &current.session_id {
            Some(id) => match save_current_as {
                Some(name) => {
                    clean_name(name)?;
                    self.prepare_archive(group, id, name).await?
                }
                None => None,
            },
            None => None,
        };
        self.restore_with(
            group,
            history_id,
            read_generation,
            save_current_as.map(str::to_string),
            prepared,
        )
        .await
    }

    async fn prepare_archive(
        &self,
        group: &str,
        session_id: &str,
        name: &str,
    ) -> Result<Option<Prepared>> {
        let (home, store, opts, g, id, n) = (
            self.home.clone(),
            self.store.clone(),
            self.archive.clone(),
            group.to_string(),
            session_id.to_string(),
            name.to_string(),
        );
        tokio::task::spawn_blocking(move || {
            // The transcript is in the agent's writable .claude: read
            // without following any link planted there.
            let Some(parsed) = archives::read_transcript(&home, &g, &id)? else {
                return Ok(None);
            };
            archives::prepare(
                &home,
                &store,
                &opts,
                &g,
                parsed,
                Some(&n),
                Some(&id),
                Trigger::Clear,
            )
            .map(Some)
        })
        .await?
    }

    async fn clear_with(
        &self,
        group: &str,
        name: &str,
        read_generation: i64,
        prepared: Option<Prepared>,
    ) -> Result<Cleared> {
        validate::group_folder(group)?;
        let (g, n) = (group.to_string(), name.to_string());
        let file = prepared
            .as_ref()
            .map(|p| (p.group.clone(), p.file_name.clone()));
        let outcome = self
            .store
            .write(move |tx| {
                (|| {
                    let current = check(tx, &g, read_generation)?;
                    let Some(id) = current.session_id.clone() else {
                        return Err(Error::NotFound(format!("an active session in group {g:?}")));
                    };
                    let archive = prepared
                        .as_ref()
                        .map(|p| store::archives::insert(tx, p))
                        .transpose()?;
                    let history = insert_history(tx, &current, &id, &n)?;
                    let pointer = write(tx, &current, None, None)?;
                    Ok(Cleared {
                        history,
                        archive,
                        pointer,
                    })
                })()
            })
            .await;
        self.settle(group, outcome, file, |c| &c.pointer)
    }

    /// After a pointer transaction: keeps the cache in step, and removes
    /// the archive file of a transaction that did not commit (the folder
    /// must not hold an archive the database does not know).
    fn settle<T>(
        &self,
        group: &str,
        outcome: Result<T>,
        archive_file: Option<(String, String)>,
        pointer: impl Fn(&T) -> &Pointer,
    ) -> Result<T> {
        match &outcome {
            Ok(v) => self.remember(pointer(v)),
            Err(e) => {
                if let Some((g, name)) = archive_file {
                    archives::discard(&self.home, &g, &name);
                }
                if matches!(e, Error::StaleGeneration { .. }) {
                    self.cache
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(group);
                }
            }
        }
        outcome
    }

    async fn restore_with(
        &self,
        group: &str,
        history_id: i64,
        read_generation: i64,
        save_current_as: Option<String>,
        prepared: Option<Prepared>,
    ) -> Result<Resumed> {
        validate::group_folder(group)?;
        let g = group.to_string();
        let file = prepared
            .as_ref()
            .map(|p| (p.group.clone(), p.file_name.clone()));
        let outcome = self
            .store
            .write(move |tx| {
                (|| {
                    let current = check(tx, &g, read_generation)?;
                    // Scoped to the group: another group's history id is
                    // simply not found.
                    let target = tx
                        .query_row(
                            "SELECT id, group_folder, session_id, name, created_at, archived_at
                             FROM session_history WHERE id = ?1 AND group_folder = ?2",
                            params![history_id, g],
                            history_from_row,
                        )
                        .optional()?
                        .ok_or_else(|| {
                            Error::NotFound(format!("history entry {history_id} in group {g:?}"))
                        })?;
                    let saved_archive = prepared
                        .as_ref()
                        .map(|p| store::archives::insert(tx, p))
                        .transpose()?;
                    let saved = match &current.session_id {
                        Some(id) if *id != target.session_id => {
                            let name = save_current_as
                                .clone()
                                .unwrap_or_else(|| format!("before resuming {}", target.name));
                            Some(insert_history(tx, &current, id, &name)?)
                        }
                        _ => None,
                    };
                    tx.execute("DELETE FROM session_history WHERE id = ?1", [target.id])?;
                    let pointer = write(
                        tx,
                        &current,
                        Some(&target.session_id),
                        Some(&target.created_at),
                    )?;
                    Ok(Resumed {
                        pointer,
                        saved,
                        saved_archive,
                    })
                })()
            })
            .await;
        self.settle(group, outcome, file, |r| &r.pointer)
    }
}
