//! The host library's error type, shared by the store and the host: the
//! closures `Store::write` and `Store::read` run return it, carrying the
//! host's own errors (`Invalid`, `StaleGeneration`, `OverQuota`, …) as well
//! as the database's.
//! Binaries wrap it in `anyhow` at the edge.

use g2_core::validate::ValidationError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused or the connection failed.
    #[error("database: {}", postgres_message(.0))]
    Postgres(#[from] postgres::Error),
    /// A query that must return a row returned none (`Optional` turns it
    /// into `None`).
    #[error("database: the query returned no row")]
    NoRow,
    /// A stored column did not convert to what the store reads it as.
    #[error("database: column {index}: {why}")]
    Column { index: usize, why: String },
    #[error("database migration: {0}")]
    Migration(#[from] rusqlite_migration::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("configuration: {0}")]
    Config(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this (the IPC authorization matrix).
    #[error("not allowed: {0}")]
    Forbidden(String),
    /// A pointer write based on a generation that is no longer current: the
    /// pointer changed (cleared, resumed, set) since the writer read it.
    #[error(
        "session pointer of group {group} changed since it was read (generation {read}, now {current}); write refused"
    )]
    StaleGeneration {
        group: String,
        read: i64,
        current: i64,
    },
    /// A host's write for a group (or a channel) under a lease it no longer
    /// holds: expired, released or taken by another host (fencing,
    /// docs/cluster.md). The write is refused and the host stops acting on it.
    #[error("{name}: the lease (generation {generation}) is no longer this host's; write refused")]
    Fenced { name: String, generation: i64 },
    /// A group may not run an agent now: over its disk quota, or the host
    /// is short of disk. The text says so in words for the group.
    #[error("{0}")]
    OverQuota(String),
    /// A group's query lane was full (`g2_host::lanes`): nothing was run;
    /// the same request may be sent again in a moment.
    #[error("busy: {0}")]
    Busy(String),
    #[error("background task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A folder could not be watched (inotify): the host's fault, not the
    /// caller's.
    #[error(transparent)]
    Watch(#[from] g2_core::watch::Error),
    /// The Docker engine failed or refused (the host's side, not the
    /// caller's); the text says what was being done.
    #[error("{0}")]
    Docker(String),
    /// The host could not start (`Host::start`, `g2 run`): what it was
    /// doing, then the error and its causes.
    #[error("{0}")]
    Startup(String),
    /// The embedding model failed on a text (its error, in words).
    #[error("embedding: {0}")]
    Embed(String),
    /// A value of ours could not be written as JSON.
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl From<g2_settings::Error> for Error {
    fn from(e: g2_settings::Error) -> Self {
        match e {
            g2_settings::Error::Config(why) => Error::Config(why),
        }
    }
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Adds a context line to I/O results.
pub trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::io(context(), e))
    }
}

/// A PostgreSQL error as the server said it (the client's own text is only
/// "db error"): its message and SQLSTATE code.
fn postgres_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}
