//! Telling the other hosts that share the store what changed: PostgreSQL's
//! `NOTIFY`, sent inside the write that made the change, so it is
//! delivered when (and only if) that write commits, and repeated payloads
//! of one transaction arrive once. A SQLite store has one host: nothing is
//! sent and there is nothing to listen to.
//!
//! [`Store::listen`] gives a host the notices of one channel that other
//! stores (hosts) sent, on a connection of its own (a thread that reconnects after an outage and
//! then says [`Notice::Missed`]: whatever was sent meanwhile is lost).

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use tokio::sync::mpsc;

use crate::db::{Db, Dialect};
use crate::{Result, Store};

/// Messages were stored: payload `in {chat}` for a message to the
/// assistant (its group's owner routes it), `out {chat}` for one of the
/// assistant's (every host's live streams show it).
pub const MESSAGES: &str = "g2_messages";

/// What a listener hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A notification's payload.
    Payload(String),
    /// The connection was (re)made: notices sent before may be lost, so
    /// look at everything once.
    Missed,
}

/// Sends `payload` on `channel` when the transaction `tx` commits
/// (nothing on SQLite).
pub fn notify(tx: &Db<'_>, channel: &str, payload: &str) -> Result<()> {
    match tx.dialect() {
        Dialect::Sqlite => Ok(()),
        Dialect::Postgres => {
            let sent = format!("{} {payload}", tx.origin());
            tx.execute("SELECT pg_notify(?1, ?2)", crate::params![channel, sent])?;
            Ok(())
        }
    }
}

/// A notice's payload, unless `me` sent it.
fn from_others<'a>(sent: &'a str, me: &str) -> Option<&'a str> {
    let (origin, payload) = sent.split_once(' ')?;
    (origin != me).then_some(payload)
}

/// How long a listener waits between attempts to reconnect.
const RECONNECT: Duration = Duration::from_secs(1);
/// How often a listener looks whether it is still wanted.
const POLL: Duration = Duration::from_millis(500);

impl Store {
    /// The notices of `channel` (a fixed name, [`MESSAGES`]) that other
    /// stores sent (this one acted on its own as it stored them), until the
    /// receiver is dropped; `None` on SQLite. The first notice is
    /// [`Notice::Missed`], once listening.
    pub fn listen(&self, channel: &'static str) -> Option<mpsc::UnboundedReceiver<Notice>> {
        let (config, me) = self.postgres_config()?;
        let (config, me) = (config.clone(), me.to_string());
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name(format!("listen-{channel}"))
            .spawn(move || {
                while !tx.is_closed() {
                    if let Err(e) = listen_once(&config, channel, &me, &tx) {
                        tracing::warn!(error = %e, channel, "store notifications lost; reconnecting");
                    }
                    std::thread::sleep(RECONNECT);
                }
            })
            .ok()?;
        Some(rx)
    }
}

/// One connection's worth of listening; returns when it fails or nobody
/// listens any more.
fn listen_once(
    config: &postgres::Config,
    channel: &str,
    me: &str,
    tx: &mpsc::UnboundedSender<Notice>,
) -> Result<()> {
    let mut client = config.connect(postgres::NoTls)?;
    client.batch_execute(&format!("LISTEN {channel}"))?;
    if tx.send(Notice::Missed).is_err() {
        return Ok(());
    }
    loop {
        {
            let mut notes = client.notifications();
            let mut it = notes.timeout_iter(POLL);
            while let Some(n) = it.next()? {
                let Some(payload) = from_others(n.payload(), me) else {
                    continue;
                };
                if tx.send(Notice::Payload(payload.to_string())).is_err() {
                    return Ok(());
                }
            }
        }
        if tx.is_closed() {
            return Ok(());
        }
        if client.is_closed() {
            return Err(crate::Error::Invalid(
                "the listening connection closed".into(),
            ));
        }
    }
}
