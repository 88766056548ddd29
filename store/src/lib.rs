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

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use rusqlite_migration::{M, Migrations};

use g2_core::validate::GroupFolder;

pub mod archives;
pub mod backup;
pub mod copy;
pub mod db;
pub mod deliveries;
pub mod embeddings;
pub mod error;
mod fts;
pub mod groups;
pub mod leases;
pub mod mcp;
pub mod memory;
pub mod messages;
pub mod notify;
pub mod observations;
pub mod passages;
mod postgres_store;
pub mod presence;
pub mod recall;
pub mod requests;
pub mod router_state;
pub mod search;
pub mod sessions;
pub mod tasks;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod usage;

pub use db::{Db, Dialect, Optional, Row};
pub use error::{Error, IoContext, Result};

/// Current time as stored in the database: RFC 3339, UTC, milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The SQLite schema, one entry per file in `migrations/`, in order.
const SQLITE_MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_foundation.sql"),
    include_str!("../../migrations/0002_model_usage.sql"),
    include_str!("../../migrations/0003_agent_events.sql"),
    include_str!("../../migrations/0004_ipc_log.sql"),
    include_str!("../../migrations/0005_memory_capture.sql"),
    include_str!("../../migrations/0006_drop_hook_events.sql"),
    include_str!("../../migrations/0007_archive_passages.sql"),
    include_str!("../../migrations/0008_observations.sql"),
    include_str!("../../migrations/0009_usage_purpose.sql"),
    include_str!("../../migrations/0010_archives_by_session.sql"),
    include_str!("../../migrations/0011_channels.sql"),
    include_str!("../../migrations/0012_embeddings.sql"),
    include_str!("../../migrations/0013_receipts.sql"),
    include_str!("../../migrations/0014_cluster.sql"),
    include_str!("../../migrations/0015_job_claims.sql"),
    include_str!("../../migrations/0016_passed_over.sql"),
    include_str!("../../migrations/0017_attachments.sql"),
    include_str!("../../migrations/0018_mcp_tokens.sql"),
    include_str!("../../migrations/0019_said_times.sql"),
];

/// The schema version of an up-to-date SQLite store (`PRAGMA
/// user_version`).
#[allow(clippy::cast_possible_wrap)]
pub const SQLITE_SCHEMA_VERSION: i64 = SQLITE_MIGRATIONS.len() as i64;

/// The schema version of an up-to-date PostgreSQL store (the newest row of
/// `schema_migrations`).
#[allow(clippy::cast_possible_wrap)]
pub const POSTGRES_SCHEMA_VERSION: i64 = postgres_store::MIGRATIONS.len() as i64;

/// The schema's migrations, applied at open.
pub static MIGRATIONS: LazyLock<Migrations<'static>> =
    LazyLock::new(|| Migrations::new(SQLITE_MIGRATIONS.iter().map(|sql| M::up(sql)).collect()));

/// Idle read connections kept open.
const MAX_IDLE_READERS: usize = 4;

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// Run first in every write transaction ([`Store::guarded`]).
    guard: Option<Guard>,
}

/// A check a write must pass, in its own transaction: an `Err` refuses
/// (rolls back) the write.
pub type Guard = Arc<dyn Fn(&Db<'_>) -> Result<()> + Send + Sync>;

enum Inner {
    Sqlite {
        path: PathBuf,
        busy_timeout: Duration,
        writer: Mutex<Connection>,
        readers: Mutex<Vec<Connection>>,
    },
    Postgres(postgres_store::Pool),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.inner {
            Inner::Sqlite { path, .. } => f.debug_struct("Store").field("sqlite", path).finish(),
            Inner::Postgres(pool) => f
                .debug_struct("Store")
                .field("postgres", &pool.target())
                .finish(),
        }
    }
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and brings
    /// its schema up to date. Blocking: call before the runtime is busy, or
    /// through `spawn_blocking`.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
        }
        let mut writer = connect(path, busy_timeout)?;
        MIGRATIONS.to_latest(&mut writer)?;
        Ok(Self {
            inner: Arc::new(Inner::Sqlite {
                path: path.to_path_buf(),
                busy_timeout,
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
            }),
            guard: None,
        })
    }

    /// Connects to the PostgreSQL database at `url` (`postgres://…`) and
    /// brings its schema up to date (several hosts starting at once apply
    /// each migration once). Blocking.
    pub fn open_postgres(url: &str, busy_timeout: Duration) -> Result<Self> {
        let pool = postgres_store::Pool::open(url, busy_timeout)?;
        Ok(Self {
            inner: Arc::new(Inner::Postgres(pool)),
            guard: None,
        })
    }

    /// This store (the same database and connections), with `guard` run
    /// first in every write transaction: a write it refuses stores nothing.
    /// Reads are not guarded. What serves a group for a host that may lose
    /// it (several hosts on one store) writes through one guarded by the
    /// group's lease.
    pub fn guarded(&self, guard: Guard) -> Store {
        Store {
            inner: self.inner.clone(),
            guard: Some(guard),
        }
    }

    /// The store `url` names: `sqlite:` (or a path) opens `default_path`
    /// or the path after the colon, `postgres://` or `postgresql://`
    /// connects. Blocking.
    pub fn open_url(url: &str, default_path: &Path, busy_timeout: Duration) -> Result<Self> {
        match Backend::of(url)?.sqlite_file(default_path) {
            Some(path) => Self::open(&path, busy_timeout),
            None => Self::open_postgres(url, busy_timeout),
        }
    }

    /// [`Store::open`] on the blocking pool, for async callers.
    pub async fn open_async(path: PathBuf, busy_timeout: Duration) -> Result<Self> {
        tokio::task::spawn_blocking(move || Self::open(&path, busy_timeout)).await?
    }

    /// [`Store::open_url`] on the blocking pool, for async callers.
    pub async fn open_url_async(
        url: String,
        default_path: PathBuf,
        busy_timeout: Duration,
    ) -> Result<Self> {
        tokio::task::spawn_blocking(move || Self::open_url(&url, &default_path, busy_timeout))
            .await?
    }

    /// Which backend this store runs on.
    pub fn dialect(&self) -> Dialect {
        match &*self.inner {
            Inner::Sqlite { .. } => Dialect::Sqlite,
            Inner::Postgres(_) => Dialect::Postgres,
        }
    }

    /// How to connect to PostgreSQL, and this store's name in its notices
    /// (`None` on SQLite).
    fn postgres_config(&self) -> Option<(&postgres::Config, &str)> {
        match &*self.inner {
            Inner::Sqlite { .. } => None,
            Inner::Postgres(pool) => Some((pool.config(), pool.origin())),
        }
    }

    /// The SQLite file, or `None` on PostgreSQL.
    pub fn path(&self) -> Option<&Path> {
        match &*self.inner {
            Inner::Sqlite { path, .. } => Some(path),
            Inner::Postgres(_) => None,
        }
    }

    /// Runs `f` in a write transaction on the blocking pool; commits when
    /// `f` returns `Ok`, rolls back otherwise.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Db<'_>) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write_here(f)).await?
    }

    /// Runs `f` with a read connection on the blocking pool.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Db<'_>) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.read_here(f)).await?
    }

    /// [`Store::write`] for code already off the async runtime. Writes are
    /// serialised: SQLite's `BEGIN IMMEDIATE` takes the file's write lock
    /// up front, and PostgreSQL's write transactions take one advisory lock
    /// first (every host's), so a write never sees another half done.
    pub fn write_blocking<T: Send>(
        &self,
        f: impl FnOnce(&Db<'_>) -> Result<T> + Send,
    ) -> Result<T> {
        match &*self.inner {
            Inner::Postgres(_) => off_runtime(|| self.write_here(f)),
            Inner::Sqlite { .. } => self.write_here(f),
        }
    }

    /// [`Store::write_blocking`] on a thread known to run no async code.
    fn write_here<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let f = |tx: &Db<'_>| {
            if let Some(guard) = &self.guard {
                guard(tx)?;
            }
            f(tx)
        };
        match &*self.inner {
            Inner::Sqlite { writer, .. } => {
                // A panic in another writer poisons the lock but leaves the
                // connection usable (its transaction was rolled back on drop).
                let mut conn = writer
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let value = f(&Db::sqlite(&tx))?;
                tx.commit()?;
                Ok(value)
            }
            Inner::Postgres(pool) => pool.write(f),
        }
    }

    /// [`Store::read`] for code already off the async runtime.
    pub fn read_blocking<T: Send>(&self, f: impl FnOnce(&Db<'_>) -> Result<T> + Send) -> Result<T> {
        match &*self.inner {
            Inner::Postgres(_) => off_runtime(|| self.read_here(f)),
            Inner::Sqlite { .. } => self.read_here(f),
        }
    }

    /// [`Store::read_blocking`] on a thread known to run no async code.
    fn read_here<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        match &*self.inner {
            Inner::Sqlite {
                path,
                busy_timeout,
                readers,
                ..
            } => {
                let pooled = readers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .pop();
                let conn = match pooled {
                    Some(c) => c,
                    None => connect(path, *busy_timeout)?,
                };
                let value = f(&Db::sqlite(&conn));
                let mut idle = readers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if idle.len() < MAX_IDLE_READERS {
                    idle.push(conn);
                }
                value
            }
            Inner::Postgres(pool) => pool.read(f),
        }
    }
}

/// Runs `f` where a blocking PostgreSQL call may run: the sync client
/// drives its connection with a `block_on` of its own, which panics on a
/// thread that is running async code (the SQLite store merely blocks
/// there). From such a thread `f` runs on a scoped thread of its own.
fn off_runtime<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// What a `store.url` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend<'a> {
    /// `sqlite:` alone (the home's `data/g2.db`) or `sqlite:<path>`.
    Sqlite(Option<&'a str>),
    /// `postgres://…` or `postgresql://…`.
    Postgres,
}

impl<'a> Backend<'a> {
    pub fn of(url: &'a str) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            let rest = rest.trim_start_matches("//");
            Ok(Backend::Sqlite((!rest.is_empty()).then_some(rest)))
        } else if url.is_empty() {
            Ok(Backend::Sqlite(None))
        } else {
            Err(Error::Config(format!(
                "store.url must start with sqlite: or postgres://, not {:?}",
                url.split(':').next().unwrap_or_default()
            )))
        }
    }

    /// The password a PostgreSQL URL carries (`postgres://user:pw@…`),
    /// which belongs in `PGPASSWORD` instead (docs/postgres.md).
    pub fn password(url: &str) -> Option<String> {
        let config: postgres::Config = url.parse().ok()?;
        config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }

    /// The SQLite file it names (`default` for `sqlite:` alone); `None`
    /// for PostgreSQL.
    pub fn sqlite_file(&self, default: &Path) -> Option<PathBuf> {
        match self {
            Backend::Sqlite(None) => Some(default.to_path_buf()),
            Backend::Sqlite(Some(path)) => Some(PathBuf::from(path)),
            Backend::Postgres => None,
        }
    }
}

impl Store {
    /// Copies the WAL into the database and truncates it, so that no old
    /// version of an overwritten row is left in the `-wal` file; false
    /// when readers kept it from finishing (it is tried again after the
    /// next such change). Blocking.
    pub fn truncate_wal_blocking(&self) -> Result<bool> {
        // PostgreSQL has no WAL file of ours to truncate: its VACUUM
        // reclaims dead rows, and its WAL is the server's to recycle.
        let Inner::Sqlite { writer, .. } = &*self.inner else {
            return Ok(true);
        };
        let conn = writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", (), |r| r.get(0))?;
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
pub fn answers(conn: &Db<'_>) -> Result<()> {
    conn.query_row("SELECT 1", (), |r| r.get::<i64>(0))?;
    Ok(())
}

/// The database's integrity check (`"ok"` when sound; SQLite's quick
/// check, PostgreSQL's own is the server's) and the schema version
/// (`g2 doctor`).
pub fn quick_check(conn: &Db<'_>) -> Result<(String, i64)> {
    match conn.dialect() {
        Dialect::Sqlite => Ok((
            conn.query_row("PRAGMA quick_check", (), |r| r.get(0))?,
            conn.query_row("PRAGMA user_version", (), |r| r.get(0))?,
        )),
        Dialect::Postgres => Ok((
            "ok".into(),
            conn.query_row(
                "SELECT coalesce(max(version), 0) FROM schema_migrations",
                (),
                |r| r.get(0),
            )?,
        )),
    }
}

/// Column `i` of a row as a group folder: a stored name is checked like
/// any other coming in, and a bad one is an error naming it.
pub fn folder_at(r: &Row<'_>, i: usize) -> Result<GroupFolder> {
    let name: String = r.get(i)?;
    GroupFolder::new(name).map_err(|e| Error::Column {
        index: i,
        why: e.to_string(),
    })
}

/// Every row `sql` returns for `params`, each mapped by `f`. The statement
/// is cached on the connection: the same queries run again and again.
pub fn query_all<T>(
    conn: &Db<'_>,
    sql: &str,
    params: impl db::Params,
    f: impl FnMut(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    conn.query_all(sql, params, f)
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
    // Every store query is cached (`Db::query_row`, `Db::query_all`); the
    // default 16 would evict the ones a turn runs each time.
    conn.set_prepared_statement_cache_capacity(128);
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
                let mode = c.query_row("PRAGMA journal_mode", (), |r| r.get(0))?;
                let fk = c.query_row("PRAGMA foreign_keys", (), |r| r.get(0))?;
                let tables = c.query_all(
                    "SELECT name FROM sqlite_master WHERE type IN ('table') ORDER BY name",
                    (),
                    |r| r.get(0),
                )?;
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
}
