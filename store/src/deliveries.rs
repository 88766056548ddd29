//! The `deliveries` table: how far each part of an outbound message got
//! on its platform (see `channels::outbox`).

use crate::db::{Db, Optional, Row, read_row};
use crate::params;

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
pub fn of(conn: &Db<'_>, message_id: &str) -> Result<Vec<Part>> {
    query_all(
        conn,
        "SELECT part, state, external_id, detail FROM deliveries WHERE message_id = ?1 ORDER BY part",
        [message_id],
        |r| {
            Ok(read_row!(r => Part {
                part = |r: &Row<'_>, i| r.get::<i64>(i).map(|p| p as usize),
                state = |r: &Row<'_>, i| r.get::<String>(i).map(|s| State::parse(&s)),
                external_id, detail,
            }))
        },
    )
}

/// Records where a part stands (replacing what was recorded).
pub fn set(
    tx: &Db<'_>,
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

/// Records a platform's receipt (`delivered`, `read`, `failed`, …) for the
/// part it sent as `external_id`; answers the message's id and chat, or
/// None when no part was sent with that id (a receipt for a message sent
/// outside the log, or of another host). Receipts only move forward
/// (sent, delivered, read, then failed): one that arrives late is not
/// recorded over a later one.
pub fn receipt(
    tx: &Db<'_>,
    external_id: &str,
    receipt: &str,
    detail: Option<&str>,
) -> Result<Option<(String, String)>> {
    let found: Option<(String, String, Option<String>)> = tx
        .query_row(
            "SELECT d.message_id, m.chat_jid, d.receipt FROM deliveries d
             JOIN messages m ON m.id = d.message_id WHERE d.external_id = ?1",
            [external_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((message_id, chat_jid, before)) = found else {
        return Ok(None);
    };
    let rank = |s: Option<&str>| match s {
        None => 0,
        Some("sent") => 1,
        Some("delivered") => 2,
        Some("read") => 3,
        Some(_) => 4,
    };
    if rank(Some(receipt)) >= rank(before.as_deref()) {
        tx.execute(
            "UPDATE deliveries SET receipt = ?2, receipt_at = ?3,
               detail = COALESCE(?4, detail) WHERE external_id = ?1",
            params![external_id, receipt, now_rfc3339(), detail],
        )?;
    }
    Ok(Some((message_id, chat_jid)))
}

/// The receipt recorded for a part, if any.
pub fn receipt_of(conn: &Db<'_>, message_id: &str, part: usize) -> Result<Option<String>> {
    Ok(conn
        .query_row(
            "SELECT receipt FROM deliveries WHERE message_id = ?1 AND part = ?2",
            params![message_id, part as i64],
            |r| r.get(0),
        )
        .optional()?
        .flatten())
}

/// Forgets a part that is known not to have been sent (the platform
/// answered with an error), so a later attempt is a first one.
pub fn clear(tx: &Db<'_>, message_id: &str, part: usize) -> Result<()> {
    tx.execute(
        "DELETE FROM deliveries WHERE message_id = ?1 AND part = ?2 AND state = 'sending'",
        params![message_id, part as i64],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn receipts_are_recorded_against_the_part_and_only_move_forward() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let (id, got) = store
            .write_blocking(|tx| {
                let m = crate::messages::insert_outbound(
                    tx,
                    "wa:15551234567",
                    "G2",
                    "hi",
                    None,
                    false,
                )?;
                set(tx, &m.id, 0, State::Sent, Some("wamid.A"), None)?;
                let got = receipt(tx, "wamid.A", "delivered", None)?;
                receipt(tx, "wamid.A", "read", None)?;
                // Late: not recorded over `read`.
                receipt(tx, "wamid.A", "delivered", None)?;
                assert_eq!(receipt(tx, "wamid.unknown", "read", None)?, None);
                Ok((m.id, got))
            })
            .unwrap();
        assert_eq!(got, Some((id.clone(), "wa:15551234567".to_string())));
        let read = |s: &crate::Store| {
            let id = id.clone();
            s.read_blocking(move |c| receipt_of(c, &id, 0)).unwrap()
        };
        assert_eq!(read(&store).as_deref(), Some("read"));
        store
            .write_blocking(|tx| receipt(tx, "wamid.A", "failed", Some("code 131026")).map(|_| ()))
            .unwrap();
        assert_eq!(read(&store).as_deref(), Some("failed"));
        let parts = store.read_blocking({
            let id = id.clone();
            move |c| of(c, &id)
        });
        assert_eq!(parts.unwrap()[0].detail.as_deref(), Some("code 131026"));
    }
}
