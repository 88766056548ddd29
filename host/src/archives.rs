//! Conversation archives: transcripts turned into markdown files under
//! `groups/{folder}/conversations/`, recorded in `conversation_archives` and
//! indexed for full-text search.
//!
//! Writing is two steps so that the database never names a file that is not
//! there: [`prepare`] parses, renders and writes the file (atomically, never
//! overwriting); [`insert`] records and indexes it inside the caller's
//! transaction, which may carry other writes (the session pointer and
//! history, for a clear). If that transaction fails (or does not commit), the
//! caller removes the file again.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Local};
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};
use serde::{Deserialize, Serialize};

use g2_core::{archive, transcript, validate};

use crate::error::IoContext;
use crate::home::Home;
use crate::store::Store;
use crate::{Error, Result};

/// What started an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The session was cleared (or left for another one).
    Clear,
    /// Claude Code compacted the session.
    Precompact,
    /// Someone ran `g2 archive`.
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Clear => "clear",
            Trigger::Precompact => "precompact",
            Trigger::Manual => "manual",
        }
    }
}

/// A row of `conversation_archives`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveRecord {
    pub id: i64,
    pub group: String,
    pub session_id: Option<String>,
    /// The archive's title.
    pub name: String,
    /// Relative to the home directory.
    pub path: String,
    pub trigger: Trigger,
    pub created_at: String,
}

/// An archive file written but not yet recorded.
#[derive(Debug)]
pub struct Prepared {
    pub group: String,
    pub session_id: Option<String>,
    pub title: String,
    /// Absolute path of the file.
    pub file: PathBuf,
    /// Path as stored (relative to the home).
    pub rel_path: String,
    pub body: String,
    pub trigger: Trigger,
    pub created_at: String,
    /// Parser counts, for reporting.
    pub stats: transcript::Stats,
}

impl Prepared {
    /// An archive file the agent's PreCompact hook wrote into the group's
    /// `conversations/` folder, ready to be recorded. `rel` is relative to
    /// the group folder and must stay inside `conversations/`.
    pub fn adopt(
        home: &Home,
        group: &str,
        rel: &str,
        title: &str,
        session_id: Option<&str>,
    ) -> Result<Prepared> {
        let conversations = home.conversations_dir(group)?;
        let name = rel.strip_prefix("conversations/").ok_or_else(|| {
            Error::Invalid(format!(
                "archive notice path {rel:?} is not in conversations/"
            ))
        })?;
        let file = validate::within(&conversations, Path::new(name))?;
        if file.extension().is_none_or(|e| e != "md")
            || file.parent() != Some(conversations.as_path())
        {
            return Err(Error::Invalid(format!(
                "archive notice path {rel:?} is not a markdown file in conversations/"
            )));
        }
        // The agent wrote this file: read it only if it is one (no link).
        let bytes = g2_core::ipc::read_regular(&file, 64 << 20)
            .ctx(|| format!("reading {}", file.display()))?;
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let title: String = title
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        Ok(Prepared {
            group: group.to_string(),
            session_id: session_id.and_then(|s| validate::session_id(s).ok()),
            title: if title.trim().is_empty() {
                name.trim_end_matches(".md").to_string()
            } else {
                title
            },
            rel_path: home.relative(&file).to_string_lossy().into_owned(),
            file,
            body,
            trigger: Trigger::Precompact,
            created_at: crate::now_rfc3339(),
            stats: transcript::Stats::default(),
        })
    }
}

/// Parses `transcript` and writes its markdown archive into the group's
/// `conversations/` folder. Blocking (parsing is CPU and I/O).
#[allow(clippy::too_many_arguments)] // each is a distinct input; a struct would only rename them
pub fn prepare(
    home: &Home,
    store: &Store,
    opts: &archive::ArchiveOptions,
    group: &str,
    transcript_path: &Path,
    name: Option<&str>,
    session_id: Option<&str>,
    trigger: Trigger,
) -> Result<Prepared> {
    validate::group_folder(group)?;
    let parsed = transcript::parse_file(transcript_path)
        .ctx(|| format!("reading transcript {}", transcript_path.display()))?;
    let session_id = match session_id.or(parsed.session_id.as_deref()) {
        Some(id) => validate::session_id(id).ok(),
        None => None,
    };
    let now: DateTime<Local> = Local::now();
    let title = archive::title(name, &parsed, &now);
    let body = archive::render(&title, &parsed, &now, opts);
    let dir = home.conversations_dir(group)?;
    let stem = archive::stem(&title, &now);
    // A row may still hold a name whose file was deleted by hand; never
    // reuse it (the path column is unique and the old row stays searchable).
    let recorded = |path: &Path| {
        let rel = home.relative(path).to_string_lossy().into_owned();
        store
            .read_blocking(|c| is_recorded(c, &rel))
            .unwrap_or(false)
    };
    let file = archive::write_new(
        &dir,
        &now.format("%Y-%m-%d").to_string(),
        &stem,
        &body,
        &recorded,
    )
    .ctx(|| format!("writing archive into {}", dir.display()))?;
    Ok(Prepared {
        group: group.to_string(),
        session_id,
        title,
        rel_path: home.relative(&file).to_string_lossy().into_owned(),
        file,
        body,
        trigger,
        created_at: crate::now_rfc3339(),
        stats: parsed.stats,
    })
}

/// Whether an archive row holds this path (relative to the home).
pub fn is_recorded(conn: &Connection, rel_path: &str) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM conversation_archives WHERE path = ?1)",
        [rel_path],
        |r| r.get::<_, bool>(0),
    )?)
}

/// Records and indexes a prepared archive in the caller's transaction.
pub fn insert(tx: &Transaction<'_>, p: &Prepared) -> Result<ArchiveRecord> {
    tx.execute(
        "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![p.group, p.session_id, p.title, p.rel_path, p.trigger.as_str(), p.created_at],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
        params![id, p.title, p.body],
    )?;
    Ok(ArchiveRecord {
        id,
        group: p.group.clone(),
        session_id: p.session_id.clone(),
        name: p.title.clone(),
        path: p.rel_path.clone(),
        trigger: p.trigger,
        created_at: p.created_at.clone(),
    })
}

/// Archives a transcript on its own (`g2 archive`): prepare, then record in
/// one transaction; the file is removed again if recording fails.
pub async fn archive_transcript(
    home: &Home,
    store: &Store,
    opts: archive::ArchiveOptions,
    group: &str,
    transcript_path: PathBuf,
    name: Option<String>,
    trigger: Trigger,
) -> Result<(ArchiveRecord, transcript::Stats)> {
    let (home, group_owned, st) = (home.clone(), group.to_string(), store.clone());
    let prepared = tokio::task::spawn_blocking(move || {
        prepare(
            &home,
            &st,
            &opts,
            &group_owned,
            &transcript_path,
            name.as_deref(),
            None,
            trigger,
        )
    })
    .await??;
    record(store, prepared).await
}

/// Records a prepared archive in a transaction of its own; removes the file
/// when that fails.
pub async fn record(
    store: &Store,
    prepared: Prepared,
) -> Result<(ArchiveRecord, transcript::Stats)> {
    let file = prepared.file.clone();
    let stats = prepared.stats.clone();
    match store.write(move |tx| insert(tx, &prepared)).await {
        Ok(rec) => Ok((rec, stats)),
        Err(e) => {
            let _ = std::fs::remove_file(file);
            Err(e)
        }
    }
}

const COLUMNS: &str = "id, group_folder, session_id, name, path, trigger, created_at";

pub(crate) fn from_row(r: &Row<'_>) -> rusqlite::Result<ArchiveRecord> {
    let trigger: String = r.get(5)?;
    Ok(ArchiveRecord {
        id: r.get(0)?,
        group: r.get(1)?,
        session_id: r.get(2)?,
        name: r.get(3)?,
        path: r.get(4)?,
        trigger: match trigger.as_str() {
            "clear" => Trigger::Clear,
            "precompact" => Trigger::Precompact,
            _ => Trigger::Manual,
        },
        created_at: r.get(6)?,
    })
}

/// A group's archives, newest first.
pub fn list(conn: &Connection, group: &str) -> Result<Vec<ArchiveRecord>> {
    validate::any_folder(group)?;
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM conversation_archives WHERE group_folder = ?1 ORDER BY created_at DESC, id DESC"
    ))?;
    let rows = stmt.query_map([group], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn get(conn: &Connection, id: i64) -> Result<Option<ArchiveRecord>> {
    Ok(conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM conversation_archives WHERE id = ?1"),
            [id],
            from_row,
        )
        .optional()?)
}

/// Fails with a clear error when the transcript is missing, instead of an
/// empty archive.
pub fn require_transcript(path: &Path) -> Result<()> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::NotFound(format!("transcript {}", path.display())))
    }
}
