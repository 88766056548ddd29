//! The PostgreSQL backend: a small pool of connections, the schema's
//! migrations (`migrations/postgres/`), and the transactions
//! [`Store::read`](crate::Store::read) and
//! [`Store::write`](crate::Store::write) hand out as a [`Db`].
//!
//! Writes are serialised across every host sharing the database by one
//! transaction-scoped advisory lock, taken first: the store's functions
//! read and then write (a session pointer's generation, a group's
//! uniqueness) and were written for SQLite's one writer at a time, so
//! PostgreSQL gives them the same guarantee rather than a weaker isolation
//! each would have to reason about. Reads run beside the writer.

use std::sync::Mutex;
use std::time::Duration;

use postgres::{Client, IsolationLevel, NoTls};

use crate::db::{Db, Statements};
use crate::{Error, Result};

/// The schema, one entry per file in `migrations/postgres/`, in order.
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../../migrations/postgres/0001_schema.sql")),
    (
        2,
        include_str!("../../migrations/postgres/0002_cluster.sql"),
    ),
    (
        3,
        include_str!("../../migrations/postgres/0003_job_claims.sql"),
    ),
    (
        4,
        include_str!("../../migrations/postgres/0004_passages_by_group.sql"),
    ),
    (
        5,
        include_str!("../../migrations/postgres/0005_passed_over.sql"),
    ),
    (
        6,
        include_str!("../../migrations/postgres/0006_attachments.sql"),
    ),
    (
        7,
        include_str!("../../migrations/postgres/0007_mcp_tokens.sql"),
    ),
    (
        8,
        include_str!("../../migrations/postgres/0008_said_times.sql"),
    ),
];

/// The advisory lock every write transaction takes (any constant shared
/// by all hosts; "g2" in ASCII).
const WRITE_LOCK: i64 = 0x6732;
/// The advisory lock migrations run under, so that hosts starting together
/// apply each once.
const MIGRATE_LOCK: i64 = 0x0067_326d;

const MAX_IDLE: usize = 4;

struct PgConn {
    client: Client,
    statements: Statements,
}

pub(crate) struct Pool {
    config: postgres::Config,
    target: String,
    /// This store's name in the notices it sends (`notify`).
    origin: String,
    idle: Mutex<Vec<PgConn>>,
}

impl Pool {
    pub(crate) fn open(url: &str, busy_timeout: Duration) -> Result<Self> {
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| Error::Config(format!("store.url is not a PostgreSQL URL: {e}")))?;
        // The password stays out of settings files and URLs in logs.
        if config.get_password().is_none()
            && let Some(password) = std::env::var_os("PGPASSWORD")
        {
            config.password(password.to_string_lossy().as_bytes());
        }
        config
            .connect_timeout(Duration::from_secs(10))
            .application_name("g2");
        // A statement waits for a lock at most as long as SQLite's busy
        // timeout would, then fails with a clear error. A transaction left
        // open by a host that stopped in it (paused, swapped out, hung) is
        // ended by the server after twice that: its locks would otherwise
        // hold every other host's writes, heartbeats included, for as long
        // as it sleeps.
        let ms = busy_timeout.as_millis();
        let idle = (2 * ms).max(1_000);
        config.options(&format!(
            "-c lock_timeout={ms} -c idle_in_transaction_session_timeout={idle}"
        ));
        let target = target(&config);
        let pool = Pool {
            config,
            target,
            origin: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            idle: Mutex::new(Vec::new()),
        };
        let mut conn = pool.connect()?;
        migrate(&mut conn.client)?;
        pool.put(conn);
        Ok(pool)
    }

    pub(crate) fn config(&self) -> &postgres::Config {
        &self.config
    }

    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// Host, port and database, without user or password (for logs).
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    fn connect(&self) -> Result<PgConn> {
        let client = self.config.connect(NoTls)?;
        Ok(PgConn {
            client,
            statements: Statements::new(),
        })
    }

    fn take(&self) -> Result<PgConn> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match pooled {
            Some(c) if !c.client.is_closed() => Ok(c),
            _ => self.connect(),
        }
    }

    fn put(&self, conn: PgConn) {
        if conn.client.is_closed() {
            return;
        }
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    pub(crate) fn write<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        self.transaction(true, f)
    }

    pub(crate) fn read<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        self.transaction(false, f)
    }

    /// `f` in a transaction on a pooled connection: a write one under the
    /// write lock, or a read-only one; committed when `f` returns `Ok`.
    fn transaction<T>(&self, write: bool, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.take()?;
        let value = (|| {
            let PgConn { client, statements } = &mut conn;
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::ReadCommitted)
                .read_only(!write)
                .start()?;
            if write {
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])?;
            }
            let db = Db::postgres(tx, statements, &self.origin);
            let value = f(&db)?;
            if let Some(tx) = db.into_postgres() {
                tx.commit()?;
            }
            Ok(value)
        })();
        self.put(conn);
        value
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // A sync client closes itself with a `block_on` of its own, which
        // panics on a thread that drives a Tokio runtime (the last `Store`
        // is often dropped in async code): the connections are closed on a
        // thread of their own.
        let idle = std::mem::take(
            self.idle
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !idle.is_empty() {
            let _ = crate::off_runtime(move || {
                drop(idle);
                Ok(())
            });
        }
    }
}

fn target(config: &postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or_default();
    format!("{host}:{port}/{db}")
}

/// Applies the migrations the database has not seen, each in its own
/// transaction, under an advisory lock.
fn migrate(client: &mut Client) -> Result<()> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
           version bigint PRIMARY KEY,
           applied_at timestamptz NOT NULL DEFAULT now())",
    )?;
    let done: i64 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            &[],
        )?
        .get(0);
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > done) {
        tx.batch_execute(sql)
            .map_err(|e| Error::Config(format!("PostgreSQL migration {version}: {e}")))?;
        tx.execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[version],
        )?;
    }
    tx.commit()?;
    Ok(())
}
