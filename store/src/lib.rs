//! The g2 host's store: the SQLite database (`data/g2.db`) and **all of
//! the host's SQL**, the schema's migrations (the project's `migrations/`
//! folder, compiled in and applied at open) and the rows it reads and
//! writes ([`groups::Group`], [`messages::Message`],
//! [`archives::ArchiveRecord`], [`tasks::Task`], [`usage::Record`], …).
//!
//! Invariant: this crate imports nothing from the host (only `g2-core` and
//! `g2-settings`), so the host's layering starts here and the compiler
//! keeps it. Its rows are plain data; a domain module of the host that
//! needs more (rules, files, names checked) re-exports them or converts
//! them to its own types, and holds the rules itself. [`Store`] is the one
//! door to the database: no statement is written anywhere else.
//!
//! One database file, WAL, foreign keys, a busy timeout; one module per
//! table family (`groups`, `messages`, `router_state`, `sessions`,
//! `archives`, `search`, `recall`, `memory`, `observations`, `embeddings`,
//! `tasks`, `usage`, `requests`, `deliveries`). [`query_all`] and
//! [`folder_at`] are the row helpers every family uses. The error type the
//! store and the host share is [`error::Error`].
//!
//! Every call runs on tokio's blocking pool ([`Store::read`],
//! [`Store::write`]), so the async runtime never waits on SQLite. Writes go
//! through one connection in `BEGIN IMMEDIATE` transactions: the write lock
//! is taken up front, so two writers never deadlock on a lock upgrade.
//! Reads use a small pool of connections that WAL lets run beside the writer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Params, Row, Transaction, TransactionBehavior};
use rusqlite_migration::{M, Migrations};

use g2_core::validate::GroupFolder;

pub mod archives;
pub mod deliveries;
pub mod embeddings;
pub mod error;
pub mod groups;
pub mod memory;
pub mod messages;
pub mod observations;
pub mod passages;
pub mod recall;
pub mod requests;
pub mod router_state;
pub mod search;
pub mod sessions;
pub mod tasks;
pub mod usage;

pub use error::{Error, IoContext, Result};

/// Current time as stored in the database: RFC 3339, UTC, milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The schema, one entry per file in `migrations/`, in order.
pub static MIGRATIONS: LazyLock<Migrations<'static>> = LazyLock::new(|| {
    Migrations::new(vec![
        M::up(include_str!("../../migrations/0001_foundation.sql")),
        M::up(include_str!("../../migrations/0002_model_usage.sql")),
        M::up(include_str!("../../migrations/0003_agent_events.sql")),
        M::up(include_str!("../../migrations/0004_ipc_log.sql")),
        M::up(include_str!("../../migrations/0005_memory_capture.sql")),
        M::up(include_str!("../../migrations/0006_drop_hook_events.sql")),
        M::up(include_str!("../../migrations/0007_archive_passages.sql")),
        M::up(include_str!("../../migrations/0008_observations.sql")),
        M::up(include_str!("../../migrations/0009_usage_purpose.sql")),
        M::up(include_str!(
            "../../migrations/0010_archives_by_session.sql"
        )),
        M::up(include_str!("../../migrations/0011_channels.sql")),
        M::up(include_str!("../../migrations/0012_embeddings.sql")),
        M::up(include_str!("../../migrations/0013_receipts.sql")),
    ])
});

/// Idle read connections kept open.
const MAX_IDLE_READERS: usize = 4;

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    busy_timeout: Duration,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date. Blocking: call before the runtime is busy, or
    /// through `spawn_blocking`.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
        }
        let mut writer = connect(path, busy_timeout)?;
        MIGRATIONS.to_latest(&mut writer)?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                busy_timeout,
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// [`Store::open`] on the blocking pool, for async callers.
    pub async fn open_async(path: PathBuf, busy_timeout: Duration) -> Result<Self> {
        tokio::task::spawn_blocking(move || Self::open(&path, busy_timeout)).await?
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in an immediate transaction on the blocking pool; commits
    /// when `f` returns `Ok`, rolls back otherwise.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write_blocking(f)).await?
    }

    /// Runs `f` with a read connection on the blocking pool.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.read_blocking(f)).await?
    }

    /// [`Store::write`] for code already off the async runtime.
    pub fn write_blocking<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        // A panic in another writer poisons the lock but leaves the
        // connection usable (its transaction was rolled back on drop).
        let mut conn = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// [`Store::read`] for code already off the async runtime.
    pub fn read_blocking<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let pooled = self
            .inner
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let conn = match pooled {
            Some(c) => c,
            None => connect(&self.inner.path, self.inner.busy_timeout)?,
        };
        let value = f(&conn);
        let mut idle = self
            .inner
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        value
    }
}

impl Store {
    /// Copies the WAL into the database and truncates it, so that no old
    /// version of an overwritten row is left in the `-wal` file; false
    /// when readers kept it from finishing (it is tried again after the
    /// next such change). Blocking.
    pub fn truncate_wal_blocking(&self) -> Result<bool> {
        let conn = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        Ok(busy == 0)
    }

    /// [`Store::truncate_wal_blocking`] in the background; a failure is
    /// logged.
    pub fn truncate_wal(&self) {
        let store = self.clone();
        tokio::task::spawn_blocking(move || match store.truncate_wal_blocking() {
            Ok(true) => {}
            Ok(false) => tracing::debug!("the WAL was in use; truncated at a later change"),
            Err(e) => tracing::warn!(error = %e, "truncating the WAL"),
        });
    }
}

/// Whether the database answers a query at all (the API's health check).
pub fn answers(conn: &Connection) -> Result<()> {
    conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?;
    Ok(())
}

/// SQLite's quick integrity check (`"ok"` when sound) and the schema
/// version (`g2 doctor`).
pub fn quick_check(conn: &Connection) -> Result<(String, i64)> {
    Ok((
        conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?,
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))?,
    ))
}

/// Column `i` of a row as a group folder: a stored name is checked like
/// any other coming in, and a bad one is an error naming it.
pub fn folder_at(r: &Row<'_>, i: usize) -> rusqlite::Result<GroupFolder> {
    let name: String = r.get(i)?;
    GroupFolder::new(name).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Every row `sql` returns for `params`, each mapped by `f`. The statement
/// is cached on the connection: the same queries run again and again.
pub fn query_all<T, P: Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, f)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // What is deleted or overwritten is zeroed, not left in free space:
    // a forgotten observation or a message cleaned of a secret is gone
    // from the file (the WAL is truncated after such a change:
    // `Store::truncate_wal`).
    conn.pragma_update(None, "secure_delete", "ON")?;
    // 32 MB of pages per connection (SQLite's default is 2 MB): recall
    // reads the same index pages question after question, and a page
    // cached here costs no system call.
    conn.pragma_update(None, "cache_size", -32_000)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        MIGRATIONS.validate().unwrap();
    }

    #[test]
    fn open_applies_schema_and_pragmas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/g2.db");
        let store = Store::open(&path, Duration::from_secs(1)).unwrap();
        let (mode, fk, tables): (String, i64, Vec<String>) = store
            .read_blocking(|c| {
                let mode = c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
                let fk = c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
                let mut stmt = c.prepare(
                    "SELECT name FROM sqlite_master WHERE type IN ('table') ORDER BY name",
                )?;
                let tables = stmt
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                Ok((mode, fk, tables))
            })
            .unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(fk, 1);
        for t in [
            "registered_groups",
            "chats",
            "messages",
            "sessions",
            "session_history",
            "conversation_archives",
            "archives_fts",
            "scheduled_tasks",
            "task_run_logs",
            "router_state",
        ] {
            assert!(
                tables.iter().any(|n| n == t),
                "missing table {t}: {tables:?}"
            );
        }
        // Reopening an up-to-date database is a no-op.
        drop(store);
        Store::open(&path, Duration::from_secs(1)).unwrap();
    }

    #[test]
    fn failed_write_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let r: Result<()> = store.write_blocking(|tx| {
            tx.execute(
                "INSERT INTO router_state (key, value) VALUES ('k', 'v')",
                [],
            )?;
            Err(Error::Invalid("boom".into()))
        });
        assert!(r.is_err());
        let n: i64 = store
            .read_blocking(|c| {
                Ok(c.query_row("SELECT count(*) FROM router_state", [], |r| r.get(0))?)
            })
            .unwrap();
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn concurrent_writers_all_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("g2.db"), Duration::from_secs(5)).unwrap();
        let mut tasks = Vec::new();
        for i in 0..32 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                s.write(move |tx| {
                    tx.execute(
                        "INSERT INTO router_state (key, value) VALUES (?1, 'v')",
                        [format!("k{i}")],
                    )?;
                    Ok(())
                })
                .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let n: i64 = store
            .read(|c| Ok(c.query_row("SELECT count(*) FROM router_state", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(n, 32);
    }
}
