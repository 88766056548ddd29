//! The log's writes outside the sequencer, each in the caller's
//! transaction where it must commit with something else (a reply with the
//! router's cursor, a notice with the group's failing mark): the
//! assistant's messages ([`store_outbound`], [`say`]), what an edit may
//! change ([`edit`]), what the log keeps of a message once the agent has
//! had it ([`clean`]) or once it is delivered ([`mark_delivered`]), and
//! context marked as passed over ([`mark_passed_over`]).
//!
//! Boundary: what is pending, answered or passed over is the router's to
//! decide (`routing::rules`); it hands the bounds in.

use g2_core::privacy::Redactor;

use super::Message;
use crate::Result;
use crate::store::{self, Db, Store};

/// The agent's text without its `<internal>…</internal>` notes (an
/// unclosed one runs to the end), trimmed.
pub fn strip_internal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<internal>") {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find("</internal>") {
            Some(end) => &rest[start + end + "</internal>".len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// Stores an assistant message in the chat `jid` as written, in the
/// caller's transaction: answering `reply_to` (a `seq`, when it answers
/// one), `delivered` when storing it is its delivery.
pub fn store_outbound(
    tx: &Db<'_>,
    jid: &str,
    sender: &str,
    text: &str,
    reply_to: Option<i64>,
    delivered: bool,
) -> Result<Message> {
    store::messages::insert_outbound(tx, jid, sender, text, reply_to, delivered)
}

/// Stores an assistant message for a chat outside any cursor (a
/// `send_message`, a task's result), without its internal notes
/// ([`strip_internal`]); `None` when nothing is left to say. Publishing and
/// sending it is the caller's.
pub async fn say(
    store: &Store,
    chat_jid: &str,
    sender: &str,
    text: &str,
    delivered: bool,
) -> Result<Option<Message>> {
    let text = strip_internal(text);
    if text.is_empty() {
        return Ok(None);
    }
    let (jid, sender) = (chat_jid.to_string(), sender.to_string());
    store
        .write(move |tx| store_outbound(tx, &jid, &sender, &text, None, delivered))
        .await
        .map(Some)
}

/// An edit of a message a platform handed in before (by its platform id,
/// in the chat `jid`): the new text replaces the stored one only while the
/// message is pending, after `settled` (the router's: neither answered nor
/// handed to the agent); an answered message stays as it was answered. A
/// text that is empty or longer than `max_text` bytes (the host's
/// `channels.max_text_bytes`) changes nothing. An edit that `addressed`
/// the assistant calls it (a mention added by the edit counts; one removed
/// does not un-call it). Whether the text was replaced.
pub fn edit(
    tx: &Db<'_>,
    jid: &str,
    external_id: &str,
    text: &str,
    addressed: bool,
    max_text: usize,
    settled: i64,
) -> Result<bool> {
    Ok(!text.trim().is_empty()
        && text.len() <= max_text
        && store::messages::edit_pending(tx, jid, external_id, text, addressed, settled)?)
}

/// Cleans the people's messages of the chat `jid` with
/// `after < seq <= upto` (the agent has had them, or never will): the log
/// keeps none of their private spans and secrets (`g2_core::privacy`).
/// Whether a text changed (the caller then has the store truncate its
/// WAL, which still holds the old text).
pub fn clean(tx: &Db<'_>, jid: &str, after: i64, upto: i64, redactor: &Redactor) -> Result<bool> {
    let mut cleaned = false;
    for (seq, text) in store::messages::inbound_texts(tx, jid, after, upto)? {
        if let Some(clean) = redactor.cleaned(&text) {
            store::messages::replace_text(tx, seq, &clean)?;
            cleaned = true;
        }
    }
    Ok(cleaned)
}

/// Marks the people's messages of the chat `jid` with
/// `after < seq < before` as passed over: never shown to the agent (the
/// viewer says so).
pub fn mark_passed_over(tx: &Db<'_>, jid: &str, after: i64, before: i64) -> Result<()> {
    store::messages::mark_passed_over(tx, jid, after, before)?;
    Ok(())
}

/// Marks a message delivered, keeping it cleaned of private spans and
/// secrets in the log; whether its text changed (the caller may then have
/// the store truncate its WAL).
pub async fn mark_delivered(store: &Store, m: &Message, redactor: &Redactor) -> Result<bool> {
    let id = m.id.clone();
    let kept = redactor.cleaned(&m.text);
    let cleaned = kept.is_some();
    store
        .write(move |tx| store::messages::mark_delivered(tx, &id, kept.as_deref()))
        .await?;
    Ok(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_notes_are_removed() {
        for (text, kept) in [
            ("Hi <internal>thinking</internal>there", "Hi there"),
            ("<internal>a</internal> x <internal>b</internal>", "x"),
            ("visible <internal>never closed", "visible"),
            ("<internal>only</internal>", ""),
            ("no notes", "no notes"),
        ] {
            assert_eq!(strip_internal(text), kept, "{text:?}");
        }
    }
}
