//! The `messages` and `chats` tables: the message log, and its rows.

use crate::db::{Db, Optional, Row, read_row};
use crate::params;
use serde::{Deserialize, Serialize};

use super::{Result, now_rfc3339, query_all};
use g2_core::media::Attachment;

/// One message. Also the stable JSON shape of the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub seq: i64,
    pub id: String,
    pub chat_jid: String,
    pub sender: String,
    pub sender_name: Option<String>,
    pub text: String,
    /// RFC 3339, UTC.
    pub timestamp: String,
    /// Written by the assistant.
    pub from_bot: bool,
    /// The channel saw it address the assistant (a mention of the bot, a
    /// reply to one of its messages, a private chat): it wakes the agent
    /// like a trigger.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub addressed: bool,
    /// The assistant's answer to this message (`seq`): the one that woke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<i64>,
    /// Context the routing rules passed over: it was never shown to the
    /// agent (over a prompt's budget before a message that called it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub passed_over: bool,
    /// Its files (voice notes, photos), kept in the group's folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// An inbound message as a channel hands it over. Only `sender`,
/// `sender_name` and `text` come from the HTTP API; the rest is what a
/// platform's channel knows. The host's `messages` module checks one
/// before it is stored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inbound {
    pub sender: String,
    pub sender_name: Option<String>,
    pub text: String,
    /// The platform's id of the message, unique in its chat: a message
    /// handed over twice is stored once.
    #[serde(skip)]
    pub external_id: Option<String>,
    /// The platform's thread (forum topic) it was posted in.
    #[serde(skip)]
    pub thread: Option<String>,
    /// It addresses the assistant (see [`Message::addressed`]).
    #[serde(skip)]
    pub addressed: bool,
    /// Its files, already kept in the group's folder by the host.
    #[serde(skip)]
    pub attachments: Vec<Attachment>,
}

/// Stores an inbound message for a chat (creating the chat row on first
/// use); returns it with its `seq`, or `None` when a message with the same
/// platform id (`external_id`) is already stored in the chat. The caller
/// has checked it (the host's `messages::CheckInbound`).
pub fn insert_inbound(
    tx: &Db<'_>,
    chat_jid: &str,
    channel: &str,
    m: &Inbound,
) -> Result<Option<Message>> {
    let now = now_rfc3339();
    // Cached: a batch runs these once per message in one transaction.
    tx.execute(
        "INSERT INTO chats (jid, channel, last_message_time) VALUES (?1, ?2, ?3)
         ON CONFLICT (jid) DO UPDATE SET last_message_time = excluded.last_message_time",
        params![chat_jid, channel, now],
    )?;
    let message = Message {
        sender_name: m.sender_name.clone(),
        addressed: m.addressed,
        attachments: m.attachments.clone(),
        ..unsaved(chat_jid, m.sender.trim(), &m.text, now)
    };
    insert(
        tx,
        message,
        m.external_id.as_deref(),
        m.thread.as_deref(),
        false,
    )
}

/// A message not stored yet (`seq` 0) under a new id: from a person, not
/// addressing the assistant, a reply to nothing.
fn unsaved(chat_jid: &str, sender: &str, text: &str, at: String) -> Message {
    Message {
        seq: 0,
        id: uuid::Uuid::new_v4().to_string(),
        chat_jid: chat_jid.to_string(),
        sender: sender.to_string(),
        sender_name: None,
        text: text.to_string(),
        timestamp: at,
        from_bot: false,
        addressed: false,
        reply_to: None,
        passed_over: false,
        attachments: Vec::new(),
    }
}

/// Stores `m` (the platform's id and thread with it; `delivered` when
/// storing it is its delivery) and tells the listeners; it with its `seq`,
/// or `None` when a message with the same platform id is already stored in
/// the chat.
fn insert(
    tx: &Db<'_>,
    m: Message,
    external_id: Option<&str>,
    thread: Option<&str>,
    delivered: bool,
) -> Result<Option<Message>> {
    let seq: Option<i64> = tx
        .query_row(
            "INSERT INTO messages (id, chat_jid, sender, sender_name, content, timestamp, is_from_me, is_bot,
                                   delivered_at, reply_to, external_id, thread, addressed, attachments)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, CASE WHEN ?8 THEN ?6 END, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (chat_jid, external_id) WHERE external_id IS NOT NULL DO NOTHING
             RETURNING seq",
            params![
                m.id,
                m.chat_jid,
                m.sender,
                m.sender_name,
                m.text,
                m.timestamp,
                m.from_bot,
                delivered,
                m.reply_to,
                external_id,
                thread,
                m.addressed,
                attachments_json(&m.attachments)
            ],
            |r| r.get(0),
        )
        .optional()?;
    let Some(seq) = seq else {
        return Ok(None);
    };
    let way = if m.from_bot { "out" } else { "in" };
    crate::notify::notify(
        tx,
        crate::notify::MESSAGES,
        &format!("{way} {}", m.chat_jid),
    )?;
    Ok(Some(Message { seq, ..m }))
}

/// Replaces the text of an inbound message (by its platform id) that is
/// still pending, i.e. stored after `after`, and marks it addressed if the
/// edit addresses the assistant; whether one was.
pub fn edit_pending(
    tx: &Db<'_>,
    chat_jid: &str,
    external_id: &str,
    text: &str,
    addressed: bool,
    after: i64,
) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE messages SET content = ?3, addressed = MAX(addressed, ?5)
         WHERE chat_jid = ?1 AND external_id = ?2 AND seq > ?4 AND is_bot = 0",
        params![chat_jid, external_id, text, after, addressed],
    )? > 0)
}

/// The inbound message of a chat stored under a platform id, if any.
pub fn by_external_id(conn: &Db<'_>, chat_jid: &str, external_id: &str) -> Result<Option<Message>> {
    Ok(query_all(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM messages WHERE chat_jid = ?1 AND external_id = ?2 AND is_bot = 0"
        ),
        params![chat_jid, external_id],
        row,
    )?
    .into_iter()
    .next())
}

/// What a platform knows a stored message by: its id there, and the
/// thread it was posted in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub chat_jid: String,
    pub external_id: Option<String>,
    pub thread: Option<String>,
}

/// The platform reference of the message with this `seq`.
pub fn reference(conn: &Db<'_>, seq: i64) -> Result<Option<Reference>> {
    conn.query_row(
        "SELECT chat_jid, external_id, thread FROM messages WHERE seq = ?1",
        [seq],
        |r| {
            Ok(Reference {
                chat_jid: r.get(0)?,
                external_id: r.get(1)?,
                thread: r.get(2)?,
            })
        },
    )
    .optional()
}

/// Stores a message of the assistant for a chat, answering the message
/// `reply_to` (a `seq`) if any. `delivered` is true when storing it is its
/// delivery (the HTTP channel: the log and its stream).
pub fn insert_outbound(
    tx: &Db<'_>,
    chat_jid: &str,
    sender: &str,
    text: &str,
    reply_to: Option<i64>,
    delivered: bool,
) -> Result<Message> {
    // Without a key nothing conflicts: a row is always stored.
    let m = from_assistant(chat_jid, sender, text, reply_to);
    insert_bot(tx, m, delivered, None)?.ok_or(crate::Error::NoRow)
}

/// Stores a notice of the assistant for a chat once per `key` (a name no
/// platform id takes, such as `refused:` and the id of what it answers):
/// a platform that reports the same event twice gets one notice. None
/// when one is stored under the key already. Sent by a channel, not
/// delivered by storing it.
pub fn insert_notice_once(
    tx: &Db<'_>,
    chat_jid: &str,
    sender: &str,
    text: &str,
    key: &str,
) -> Result<Option<Message>> {
    insert_bot(
        tx,
        from_assistant(chat_jid, sender, text, None),
        false,
        Some(key),
    )
}

/// A message of the assistant (`sender`), not stored yet.
fn from_assistant(chat_jid: &str, sender: &str, text: &str, reply_to: Option<i64>) -> Message {
    Message {
        sender_name: Some(sender.to_string()),
        from_bot: true,
        reply_to,
        ..unsaved(chat_jid, sender, text, now_rfc3339())
    }
}

/// Stores the assistant's `m` (under the platform id `key`, if any).
fn insert_bot(
    tx: &Db<'_>,
    m: Message,
    delivered: bool,
    key: Option<&str>,
) -> Result<Option<Message>> {
    tx.execute(
        "INSERT INTO chats (jid, last_message_time) VALUES (?1, ?2)
         ON CONFLICT (jid) DO UPDATE SET last_message_time = excluded.last_message_time",
        params![m.chat_jid, m.timestamp],
    )?;
    insert(tx, m, key, None, delivered)
}

/// Records that a channel delivered an outbound message; `kept`, when
/// given, replaces its text (what the log keeps of it once sent).
pub fn mark_delivered(tx: &Db<'_>, id: &str, kept: Option<&str>) -> Result<()> {
    tx.execute(
        "UPDATE messages SET delivered_at = ?2, content = coalesce(?3, content)
         WHERE id = ?1 AND delivered_at IS NULL",
        params![id, now_rfc3339(), kept],
    )?;
    Ok(())
}

/// Replaces a stored message's text (what the log keeps of it).
pub fn replace_text(tx: &Db<'_>, seq: i64, text: &str) -> Result<()> {
    tx.execute(
        "UPDATE messages SET content = ?2 WHERE seq = ?1",
        params![seq, text],
    )?;
    Ok(())
}

/// One chat's outbound messages a channel has not confirmed yet, oldest
/// first.
pub fn undelivered_in(conn: &Db<'_>, chat_jid: &str, limit: usize) -> Result<Vec<Message>> {
    query_all(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM messages WHERE is_bot = 1 AND delivered_at IS NULL AND chat_jid = ?1 ORDER BY seq LIMIT ?2"
        ),
        params![chat_jid, limit as i64],
        row,
    )
}

/// Outbound messages after `after` (a `seq`) that a channel has not
/// confirmed yet (for redelivery), oldest first.
pub fn undelivered(conn: &Db<'_>, after: i64, limit: usize) -> Result<Vec<Message>> {
    query_all(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM messages WHERE is_bot = 1 AND delivered_at IS NULL AND seq > ?1 ORDER BY seq LIMIT ?2"
        ),
        params![after, limit as i64],
        row,
    )
}

const COLUMNS: &str = "seq, id, chat_jid, sender, sender_name, content, timestamp, is_bot, addressed, reply_to, passed_over, attachments";

fn row(r: &Row<'_>) -> Result<Message> {
    Ok(read_row!(r => Message {
        seq, id, chat_jid, sender, sender_name, text, timestamp, from_bot, addressed, reply_to,
        passed_over, attachments = read_attachments,
    }))
}

/// A message's files as stored: NULL when it has none.
fn attachments_json(a: &[Attachment]) -> Option<String> {
    (!a.is_empty()).then(|| serde_json::to_string(a).unwrap_or_else(|_| "[]".into()))
}

/// The stored files; a value that does not read (written by a newer
/// host) is shown as none rather than hiding the message.
fn read_attachments(r: &Row<'_>, i: usize) -> Result<Vec<Attachment>> {
    let json: Option<String> = r.get(i)?;
    Ok(json
        .and_then(|j| serde_json::from_str(&j).ok())
        .unwrap_or_default())
}

/// The texts of people's messages in a chat after `after` up to `upto`
/// (by `seq`), oldest first.
pub fn inbound_texts(
    conn: &Db<'_>,
    chat_jid: &str,
    after: i64,
    upto: i64,
) -> Result<Vec<(i64, String)>> {
    query_all(
        conn,
        "SELECT seq, content FROM messages
         WHERE chat_jid = ?1 AND seq > ?2 AND seq <= ?3 AND is_bot = 0 ORDER BY seq",
        params![chat_jid, after, upto],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// The oldest `limit` messages of people (not the assistant) in a chat
/// after `after`, oldest first: the pending messages as routing takes
/// them.
pub fn inbound_after(
    conn: &Db<'_>,
    chat_jid: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<Message>> {
    conn.query_all(
        &format!(
            "SELECT {COLUMNS} FROM messages WHERE chat_jid = ?1 AND seq > ?2 AND is_bot = 0 ORDER BY seq LIMIT ?3"
        ),
        params![chat_jid, after, limit as i64],
        row,
    )
}

/// The newest `limit` messages of people in a chat after `after` up to
/// `upto` (by `seq`), oldest first: the end of what a prompt held.
pub fn inbound_upto(
    conn: &Db<'_>,
    chat_jid: &str,
    after: i64,
    upto: i64,
    limit: usize,
) -> Result<Vec<Message>> {
    let mut rows: Vec<Message> = conn.query_all(
        &format!(
            "SELECT {COLUMNS} FROM messages WHERE chat_jid = ?1 AND seq > ?2 AND seq <= ?3 AND is_bot = 0 ORDER BY seq DESC LIMIT ?4"
        ),
        params![chat_jid, after, upto, limit as i64],
        row,
    )?;
    rows.reverse();
    Ok(rows)
}

/// The senders of people's messages in a chat after `after` up to `upto`
/// that were not passed over, each once, in the order they first spoke.
pub fn inbound_senders(
    conn: &Db<'_>,
    chat_jid: &str,
    after: i64,
    upto: i64,
) -> Result<Vec<String>> {
    query_all(
        conn,
        "SELECT sender FROM messages
         WHERE chat_jid = ?1 AND seq > ?2 AND seq <= ?3 AND is_bot = 0 AND passed_over = 0
         GROUP BY sender ORDER BY MIN(seq)",
        params![chat_jid, after, upto],
        |r| r.get(0),
    )
}

/// Marks people's messages in a chat with `after < seq < before` as
/// passed over (never shown to the agent); how many were marked.
pub fn mark_passed_over(tx: &Db<'_>, chat_jid: &str, after: i64, before: i64) -> Result<usize> {
    tx.execute(
        "UPDATE messages SET passed_over = 1
         WHERE chat_jid = ?1 AND seq > ?2 AND seq < ?3 AND is_bot = 0 AND passed_over = 0",
        params![chat_jid, after, before],
    )
}

/// The highest `seq` stored (0 when there is none).
pub fn last_seq(conn: &Db<'_>) -> Result<i64> {
    conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM messages", (), |r| {
        r.get(0)
    })
}

/// Messages of every chat after `after` (a `seq`), oldest first.
pub fn since(conn: &Db<'_>, after: i64, limit: usize) -> Result<Vec<Message>> {
    query_all(
        conn,
        &format!("SELECT {COLUMNS} FROM messages WHERE seq > ?1 ORDER BY seq LIMIT ?2"),
        params![after, limit as i64],
        row,
    )
}

/// Messages of every chat with `after < seq < before`, oldest first.
pub fn between(conn: &Db<'_>, after: i64, before: i64) -> Result<Vec<Message>> {
    query_all(
        conn,
        &format!("SELECT {COLUMNS} FROM messages WHERE seq > ?1 AND seq < ?2 ORDER BY seq"),
        params![after, before],
        row,
    )
}

/// The newest `limit` messages of a chat, oldest first.
pub fn latest(conn: &Db<'_>, chat_jid: &str, limit: usize) -> Result<Vec<Message>> {
    let mut m = query_all(
        conn,
        &format!("SELECT {COLUMNS} FROM messages WHERE chat_jid = ?1 ORDER BY seq DESC LIMIT ?2"),
        params![chat_jid, limit as i64],
        row,
    )?;
    m.reverse();
    Ok(m)
}

/// Messages of a chat after `after` (a `seq`), oldest first.
pub fn after(conn: &Db<'_>, chat_jid: &str, after: i64, limit: usize) -> Result<Vec<Message>> {
    query_all(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM messages WHERE chat_jid = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        ),
        params![chat_jid, after, limit as i64],
        row,
    )
}
