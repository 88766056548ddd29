//! `g2 migrate`: a SQLite store's rows copied into an empty PostgreSQL
//! store, in one PostgreSQL transaction (all or nothing), from one SQLite
//! read transaction (a consistent snapshot; the file is only read).
//!
//! Every table is copied row for row with its keys, so ids, `seq`s and
//! vectors' `rowid`s stay what they were. The full-text indexes PostgreSQL
//! keeps by trigger (passages, prompts, tool calls, observations,
//! summaries) are made by those triggers as the rows go in; `archives_fts`,
//! which the store writes itself, is copied. The embedding jobs and delete
//! counts the triggers make on the way are replaced by the source's. Then
//! the identity sequences move past the copied keys, and every table's
//! count is compared with the source's.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::db::{Db, Dialect, Value};
use crate::{Error, Result, Store};

/// The tables, in an order their references allow. `embeddings` carries
/// its `rowid` (the vector cache's cursor); `archives_fts` is the archive
/// bodies' index, which the store writes itself.
pub(crate) const TABLES: &[&str] = &[
    "registered_groups",
    "chats",
    "messages",
    "deliveries",
    "sessions",
    "session_history",
    "conversation_archives",
    "archives_fts",
    "archive_passages",
    "scheduled_tasks",
    "task_run_logs",
    "router_state",
    "model_usage",
    "ipc_log",
    "memory_sessions",
    "prompt_batches",
    "activities",
    "memory_events",
    "memory_queue",
    "observations",
    "session_summaries",
    "summary_queue",
    "embeddings",
    "embedding_jobs",
    "embedding_deletes",
    "mcp_tokens",
    "mcp_calls",
];

/// Tables the target's triggers write as rows go in: copied last, over
/// what the triggers wrote.
const QUEUED: [&str; 2] = ["embedding_jobs", "embedding_deletes"];

/// The keys PostgreSQL numbers itself (identity columns).
const IDENTITIES: &[(&str, &str)] = &[
    ("messages", "seq"),
    ("session_history", "id"),
    ("conversation_archives", "id"),
    ("task_run_logs", "id"),
    ("model_usage", "id"),
    ("ipc_log", "id"),
    ("mcp_tokens", "id"),
    ("mcp_calls", "id"),
    ("memory_sessions", "id"),
    ("prompt_batches", "id"),
    ("activities", "id"),
    ("archive_passages", "id"),
    ("observations", "id"),
    ("session_summaries", "id"),
    ("embeddings", "rowid"),
];

/// The indexes the target's triggers fill, each with the table whose rows
/// it indexes: their counts must match too.
const DERIVED: &[(&str, &str)] = &[
    ("passages_fts", "archive_passages"),
    ("prompts_fts", "prompt_batches"),
    ("activities_fts", "activities"),
    ("observations_fts", "observations"),
    ("summaries_fts", "session_summaries"),
];

/// How far a copy is: a table, rows copied of it, its rows.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    pub table: &'a str,
    pub done: u64,
    pub total: u64,
}

/// A table's rows in the source and, after the copy, in the target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Count {
    pub table: String,
    pub source: i64,
    pub target: i64,
}

/// Copies the SQLite database at `source` into `target`, which must be a
/// PostgreSQL store with no groups, messages or archives yet. `progress`
/// is called as rows go in. Returns each table's counts, all equal, or an
/// error and nothing written.
pub fn sqlite_to_postgres(
    source: &Path,
    target: &Store,
    mut progress: impl FnMut(Progress<'_>) + Send,
) -> Result<Vec<Count>> {
    if target.dialect() != Dialect::Postgres {
        return Err(Error::Invalid(
            "the target of a migration must be PostgreSQL".into(),
        ));
    }
    let src = crate::backup::open_existing(source, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    // One snapshot for the whole copy.
    src.execute_batch("BEGIN")?;
    let version: i64 = src.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let latest = crate::SQLITE_SCHEMA_VERSION;
    if version != latest {
        return Err(Error::Invalid(format!(
            "the SQLite store is at schema version {version}, this g2 at {latest}: open it with this g2 first (any command migrates it)"
        )));
    }
    target.write_blocking(move |dst| {
        refuse_if_used(dst)?;
        for &table in TABLES.iter().filter(|t| !QUEUED.contains(t)) {
            copy_table(&src, dst, table, &mut progress)?;
        }
        // What the triggers queued while rows went in is the source's.
        dst.execute_batch("DELETE FROM embedding_jobs; DELETE FROM embedding_deletes;")?;
        for table in QUEUED {
            copy_table(&src, dst, table, &mut progress)?;
        }
        for (table, column) in IDENTITIES {
            dst.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', '{column}'),
                                   coalesce((SELECT max({column}) FROM {table}), 0) + 1, false)"
                ),
                (),
            )?;
        }
        verify(&src, dst)
    })
}

/// The target already holds a store's rows: a migration would mix two.
fn refuse_if_used(dst: &Db<'_>) -> Result<()> {
    let used: i64 = dst.query_row(
        "SELECT (SELECT count(*) FROM registered_groups) + (SELECT count(*) FROM messages)
              + (SELECT count(*) FROM conversation_archives)",
        (),
        |r| r.get(0),
    )?;
    if used > 0 {
        return Err(Error::Conflict(
            "the PostgreSQL database already holds a g2 store (groups, messages or archives); migrate into an empty one".into(),
        ));
    }
    Ok(())
}

fn columns(src: &Connection, table: &str) -> Result<Vec<String>> {
    Ok(match table {
        "archives_fts" => vec!["rowid".into(), "name".into(), "body".into()],
        _ => {
            let mut stmt =
                src.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
            let mut names: Vec<String> = stmt
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            if table == "embeddings" {
                names.insert(0, "rowid".into());
            }
            names
        }
    })
}

fn copy_table(
    src: &Connection,
    dst: &Db<'_>,
    table: &str,
    progress: &mut impl FnMut(Progress<'_>),
) -> Result<()> {
    let columns = columns(src, table)?;
    let total: i64 = src.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
    let total = u64::try_from(total).unwrap_or(0);
    let list = columns.join(", ");
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    // An observation may name a newer one as its successor: the links are
    // set once every observation is in.
    let self_ref = table == "observations";
    let insert = format!("INSERT INTO {table} ({list}) VALUES ({})", marks.join(", "));
    let superseded = columns.iter().position(|c| c == "superseded_by");
    // In key order where the table has a rowid (WITHOUT ROWID tables have
    // none, and nothing refers to their order).
    let mut stmt = match src.prepare(&format!("SELECT {list} FROM {table} ORDER BY rowid")) {
        Ok(stmt) => stmt,
        Err(_) => src.prepare(&format!("SELECT {list} FROM {table}"))?,
    };
    let mut rows = stmt.query([])?;
    let mut done = 0u64;
    let mut links: Vec<(i64, i64)> = Vec::new();
    progress(Progress { table, done, total });
    while let Some(row) = rows.next()? {
        let mut owned: Vec<rusqlite::types::Value> = (0..columns.len())
            .map(|i| row.get::<_, rusqlite::types::Value>(i))
            .collect::<rusqlite::Result<_>>()?;
        if self_ref && let Some(at) = superseded {
            if let (rusqlite::types::Value::Integer(id), rusqlite::types::Value::Integer(to)) =
                (&owned[0], &owned[at])
            {
                links.push((*id, *to));
            }
            owned[at] = rusqlite::types::Value::Null;
        }
        let values: Vec<Value<'_>> = owned.iter().map(value).collect();
        dst.execute(&insert, values)?;
        done += 1;
        if done.is_multiple_of(500) || done == total {
            progress(Progress { table, done, total });
        }
    }
    for (id, to) in links {
        dst.execute(
            "UPDATE observations SET superseded_by = ?2 WHERE id = ?1",
            [id, to],
        )?;
    }
    Ok(())
}

fn value(v: &rusqlite::types::Value) -> Value<'_> {
    use rusqlite::types::Value as V;
    match v {
        V::Null => Value::Null,
        V::Integer(n) => Value::Int(*n),
        V::Real(f) => Value::Real(*f),
        V::Text(s) => Value::Text(s),
        V::Blob(b) => Value::Blob(b),
    }
}

/// Every table's rows counted on both sides; an error when one differs.
fn verify(src: &Connection, dst: &Db<'_>) -> Result<Vec<Count>> {
    let count_src = |t: &str| -> Result<i64> {
        Ok(src.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))?)
    };
    let count_dst = |t: &str| -> Result<i64> {
        dst.query_row(&format!("SELECT count(*) FROM {t}"), (), |r| r.get(0))
    };
    let mut counts = Vec::new();
    for &table in TABLES {
        counts.push(Count {
            table: table.into(),
            source: count_src(table)?,
            target: count_dst(table)?,
        });
    }
    for (index, rows) in DERIVED {
        counts.push(Count {
            table: (*index).into(),
            source: count_src(rows)?,
            target: count_dst(index)?,
        });
    }
    if let Some(c) = counts.iter().find(|c| c.source != c.target) {
        return Err(Error::Invalid(format!(
            "{}: {} rows in SQLite but {} in PostgreSQL after the copy; nothing was kept",
            c.table, c.source, c.target
        )));
    }
    Ok(counts)
}
