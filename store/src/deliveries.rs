//! The `deliveries` table: how far each part of an outbound message got
//! on its platform (see `channels::outbox`).

use rusqlite::{Connection, Transaction, params};

use super::{Result, now_rfc3339, query_all};

/// Where one part of a message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Asked for and not confirmed: a host that finds this at start died
    /// mid-request, and does not know whether the platform took it.
    Sending,
    /// The platform took it (its id is kept).
    Sent,
    /// Maybe sent; never sent again.
    Uncertain,
    /// Refused for good (the chat is gone, the message was rejected).
    Failed,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Sending => "sending",
            State::Sent => "sent",
            State::Uncertain => "uncertain",
            State::Failed => "failed",
        }
    }

    fn parse(s: &str) -> State {
        match s {
            "sent" => State::Sent,
            "uncertain" => State::Uncertain,
            "failed" => State::Failed,
            _ => State::Sending,
        }
    }
}

/// One part's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub part: usize,
    pub state: State,
    pub external_id: Option<String>,
    pub detail: Option<String>,
}

/// The parts of a message that have a row, in order.
pub fn of(conn: &Connection, message_id: &str) -> Result<Vec<Part>> {
    query_all(
        conn,
        "SELECT part, state, external_id, detail FROM deliveries WHERE message_id = ?1 ORDER BY part",
        [message_id],
        |r| {
            Ok(Part {
                part: r.get::<_, i64>(0)? as usize,
                state: State::parse(&r.get::<_, String>(1)?),
                external_id: r.get(2)?,
                detail: r.get(3)?,
            })
        },
    )
}

/// Records where a part stands (replacing what was recorded).
pub fn set(
    tx: &Transaction<'_>,
    message_id: &str,
    part: usize,
    state: State,
    external_id: Option<&str>,
    detail: Option<&str>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO deliveries (message_id, part, state, external_id, detail, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (message_id, part) DO UPDATE SET state = excluded.state,
           external_id = excluded.external_id, detail = excluded.detail, updated_at = excluded.updated_at",
        params![
            message_id,
            part as i64,
            state.as_str(),
            external_id,
            detail,
            now_rfc3339()
        ],
    )?;
    Ok(())
}

/// Forgets a part that is known not to have been sent (the platform
/// answered with an error), so a later attempt is a first one.
pub fn clear(tx: &Transaction<'_>, message_id: &str, part: usize) -> Result<()> {
    tx.execute(
        "DELETE FROM deliveries WHERE message_id = ?1 AND part = ?2 AND state = 'sending'",
        params![message_id, part as i64],
    )?;
    Ok(())
}
