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
//! **One path each.** [`SessionManager::clear_active`] and
//! [`SessionManager::resume_active`] are how the CLI, the HTTP API and the
//! agents' tools clear and resume: the group must be registered, the pointer
//! and its generation are read, then [`SessionManager::clear`] /
//! [`SessionManager::resume`] (the generation-taking core) archive
//! (transcript to markdown, pointer to history) or restore, each in one
//! transaction. Closing the group's container afterwards is the caller's.
//!
//! The rows and their SQL are `crate::store::sessions`'s; [`Pointer`] and
//! [`HistoryEntry`] are re-exported here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::store::db::Db;
use serde::{Deserialize, Serialize};

use g2_core::archive::ArchiveOptions;
use g2_core::validate;

use crate::archives::{self, ArchiveRecord, Prepared, Trigger};
use crate::groups;
use crate::home::Home;
use crate::store::Store;
use crate::store::sessions::{delete_history, history_entry, insert_history, pointer, write};
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

pub use crate::store::sessions::{HistoryEntry, Pointer, history};

/// What [`SessionManager::clear`] did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cleared {
    pub history: HistoryEntry,
    /// `None` when the session had no transcript on disk.
    pub archive: Option<ArchiveRecord>,
    pub pointer: Pointer,
}

/// What [`SessionManager::resume`] did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Resumed {
    pub pointer: Pointer,
    /// The session that was active before, bookmarked.
    pub saved: Option<HistoryEntry>,
    pub saved_archive: Option<ArchiveRecord>,
}

// --- the generation guard ----------------------------------------------------

/// Reads the pointer and refuses if it is not at `read_generation`.
fn check(tx: &Db<'_>, group: &GroupFolder, read_generation: i64) -> Result<Pointer> {
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

/// A history name: one line, 1-200 characters.
pub fn clean_name(name: &str) -> Result<String> {
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() || name.chars().count() > 200 {
        // Not echoed: a name is a member's text, and errors are logged.
        return Err(Error::Invalid(format!(
            "a session name of {} characters: use 1-200",
            name.chars().count()
        )));
    }
    Ok(name)
}

/// A history name as it is stored: [`clean_name`], then cleaned like the
/// archive's title (the name is a member's or an agent's text); one that
/// was all private is `[private]`.
fn stored_name(redactor: &g2_core::privacy::Redactor, name: &str) -> Result<String> {
    let name = clean_name(name)?;
    let cleaned = redactor.clean(&name);
    Ok(clean_name(&g2_core::archive::truncate(&cleaned, 199))
        .unwrap_or_else(|_| "[private]".to_string()))
}

// --- the manager --------------------------------------------------------------

/// Session pointers with an in-memory read cache, and the clear / resume
/// operations.
#[derive(Clone)]
pub struct SessionManager {
    store: Store,
    home: Home,
    archive: ArchiveOptions,
    cache: Arc<Mutex<HashMap<GroupFolder, Pointer>>>,
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

    /// This manager writing through `store` (the same database, guarded:
    /// [`Store::guarded`]); the session cache is shared.
    pub fn with_store(&self, store: Store) -> Self {
        Self {
            store,
            ..self.clone()
        }
    }

    /// What archives are cleaned with (the patterns and the host's own
    /// credential): memory capture cleans with the same.
    pub fn redactor(&self) -> &g2_core::privacy::Redactor {
        &self.archive.redactor
    }

    fn remember(&self, p: &Pointer) {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(p.group.clone(), p.clone());
    }

    /// Runs a pointer write whose closure returns the new pointer.
    async fn guarded<T: Send + 'static>(
        &self,
        group: &GroupFolder,
        f: impl FnOnce(&Db<'_>) -> Result<(T, Pointer)> + Send + 'static,
    ) -> Result<T> {
        let outcome = self.store.write(f).await;
        self.conclude(group, outcome, None, |(_, p)| p, |_| None)
            .await
            .map(|(v, _)| v)
    }

    /// The active pointer of a group (from the cache when it has it).
    pub async fn get(&self, group: &GroupFolder) -> Result<Pointer> {
        if let Some(p) = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(group)
        {
            return Ok(p.clone());
        }
        let g = group.clone();
        let p = self.store.read(move |c| pointer(c, &g)).await?;
        self.remember(&p);
        Ok(p)
    }

    /// Makes `session_id` the active session. Setting the id that is active
    /// already changes nothing and keeps the generation.
    pub async fn set(
        &self,
        group: &GroupFolder,
        session_id: &str,
        read_generation: i64,
    ) -> Result<Pointer> {
        let id = validate::session_id(session_id)?;
        let g = group.clone();
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
    pub async fn delete(&self, group: &GroupFolder, read_generation: i64) -> Result<Pointer> {
        let g = group.clone();
        self.guarded(group, move |tx| {
            let current = check(tx, &g, read_generation)?;
            let p = write(tx, &current, None, None)?;
            Ok((p.clone(), p))
        })
        .await
    }

    /// A group's bookmarks, newest first.
    pub async fn history(&self, group: &GroupFolder) -> Result<Vec<HistoryEntry>> {
        let g = group.clone();
        self.store.read(move |c| history(c, &g)).await
    }

    /// Clears the active session of a registered group: the one clear path
    /// (CLI, API, the agents' `clear_session`). Reads the pointer's
    /// generation and runs [`SessionManager::clear`] with it.
    pub async fn clear_active(&self, group: &GroupFolder, name: &str) -> Result<Cleared> {
        groups::require(&self.store, group).await?;
        let p = self.get(group).await?;
        self.clear(group, name, p.generation).await
    }

    /// Resumes a bookmark of a registered group: the one resume path (CLI,
    /// API, the agents' `resume_session`). Reads the pointer's generation
    /// and runs [`SessionManager::resume`] with it.
    pub async fn resume_active(
        &self,
        group: &GroupFolder,
        history_id: i64,
        save_current_as: Option<&str>,
    ) -> Result<Resumed> {
        groups::require(&self.store, group).await?;
        let p = self.get(group).await?;
        self.resume(group, history_id, p.generation, save_current_as)
            .await
    }

    /// `clear_session`: archives the active session's transcript to markdown
    /// (when it exists on disk), bookmarks the session under `name`, removes
    /// the pointer; all recorded in one transaction.
    pub async fn clear(
        &self,
        group: &GroupFolder,
        name: &str,
        read_generation: i64,
    ) -> Result<Cleared> {
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
    /// unnamed it is bookmarked as "before resuming `<target>`"), then
    /// restores the chosen one.
    pub async fn resume(
        &self,
        group: &GroupFolder,
        history_id: i64,
        read_generation: i64,
        save_current_as: Option<&str>,
    ) -> Result<Resumed> {
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
        group: &GroupFolder,
        session_id: &str,
        name: &str,
    ) -> Result<Option<Prepared>> {
        let (home, store, opts, g, id, n) = (
            self.home.clone(),
            self.store.clone(),
            self.archive.clone(),
            group.clone(),
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
        group: &GroupFolder,
        name: &str,
        read_generation: i64,
        prepared: Option<Prepared>,
    ) -> Result<Cleared> {
        let (g, n) = (group.clone(), stored_name(&self.archive.redactor, name)?);
        let file = prepared.as_ref().map(Prepared::file);
        let outcome = self
            .write_checked(group, read_generation, move |tx, current| {
                let Some(id) = current.session_id.clone() else {
                    return Err(Error::NotFound(format!("an active session in group {g:?}")));
                };
                let archive = prepared
                    .as_ref()
                    .map(|p| crate::store::archives::insert(tx, p))
                    .transpose()?;
                let history = insert_history(tx, &current, &id, &n)?;
                let pointer = write(tx, &current, None, None)?;
                Ok(Cleared {
                    history,
                    archive,
                    pointer,
                })
            })
            .await;
        self.conclude(group, outcome, file, |c| &c.pointer, |c| c.archive.as_mut())
            .await
    }

    /// Runs `f` in one write transaction with the group's pointer, as long
    /// as that is still the one read at `read_generation` (else
    /// `StaleGeneration`, and nothing is written).
    async fn write_checked<T, F>(
        &self,
        group: &GroupFolder,
        read_generation: i64,
        f: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Db<'_>, Pointer) -> Result<T> + Send + 'static,
    {
        let g = group.clone();
        self.store
            .write(move |tx| check(tx, &g, read_generation).and_then(|current| f(tx, current)))
            .await
    }

    /// After a pointer transaction: keeps the cache in step, and settles
    /// the archive file of a transaction that committed or removes that of
    /// one that did not (`archives`: the folder never holds an archive the
    /// database does not know).
    async fn conclude<T>(
        &self,
        group: &GroupFolder,
        mut outcome: Result<T>,
        archive_file: Option<archives::ArchiveFile>,
        pointer: impl Fn(&T) -> &Pointer,
        archive: impl Fn(&mut T) -> Option<&mut ArchiveRecord>,
    ) -> Result<T> {
        match &mut outcome {
            Ok(v) => {
                self.remember(pointer(v));
                if let (Some(file), Some(rec)) = (archive_file, archive(v)) {
                    *rec = archives::settled(&self.home, &self.store, file, rec.clone()).await?;
                }
            }
            Err(e) => {
                if let Some(file) = archive_file {
                    file.discard(&self.home);
                }
                if matches!(e, Error::StaleGeneration { .. }) {
                    self.cache
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(group);
                }
            }
        }
        outcome
    }

    async fn restore_with(
        &self,
        group: &GroupFolder,
        history_id: i64,
        read_generation: i64,
        save_current_as: Option<String>,
        prepared: Option<Prepared>,
    ) -> Result<Resumed> {
        let g = group.clone();
        let redactor = self.archive.redactor.clone();
        let save_current_as = save_current_as
            .map(|n| stored_name(&redactor, &n))
            .transpose()?;
        let file = prepared.as_ref().map(Prepared::file);
        let outcome = self
            .write_checked(group, read_generation, move |tx, current| {
                // Scoped to the group: another group's history id is
                // simply not found.
                let target = history_entry(tx, &g, history_id)?.ok_or_else(|| {
                    Error::NotFound(format!("history entry {history_id} in group {g:?}"))
                })?;
                let saved_archive = prepared
                    .as_ref()
                    .map(|p| crate::store::archives::insert(tx, p))
                    .transpose()?;
                let saved = match &current.session_id {
                    Some(id) if *id != target.session_id => {
                        let name = match &save_current_as {
                            Some(n) => n.clone(),
                            None => {
                                stored_name(&redactor, &format!("before resuming {}", target.name))?
                            }
                        };
                        Some(insert_history(tx, &current, id, &name)?)
                    }
                    _ => None,
                };
                delete_history(tx, target.id)?;
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
            })
            .await;
        self.conclude(
            group,
            outcome,
            file,
            |r| &r.pointer,
            |r| r.saved_archive.as_mut(),
        )
        .await
    }
}
