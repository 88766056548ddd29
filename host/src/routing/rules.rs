//! Routing: which stored messages wake a group's agent, as what prompt, and
//! how a reply is delivered against the group's cursor.
//!
//! The cursor of a group (`router_state` key `cursor:{folder}`) is the
//! `seq` of the last message of its chat that has been answered. Messages
//! after it are pending. The group queue hands pending messages to a
//! container and, when the reply comes, [`deliver_reply`] stores the reply
//! and moves the cursor **in one transaction**. So:
//!
//! - a host killed mid-turn has not moved the cursor: at start the same
//!   messages are routed again and answered once;
//! - a reply that was stored has moved the cursor: it is never produced or
//!   sent a second time.
//!
//! An edit a platform reports changes a message only while it is pending,
//! after [`settled`] (the log makes the edit: `messages::edit`): what the
//! agent had, or answered, stays as it was.
//!
//! Trigger rules: the main group and groups that do not
//! require a trigger are woken by every message; others only by a message
//! matching their trigger pattern. Messages without a trigger stay pending
//! and go along as context with the next one that has it. The assistant's
//! own messages are never routed.
//!
//! Backlogs: a batch holds the **oldest** pending messages within a prompt
//! [`Budget`] ([`batch_within`]) and its reply moves the cursor only to the
//! batch's end, so every stored message is shown to the agent and answered
//! however many are pending, in as many prompts as it takes. The one thing
//! ever left out is context of a group that needs a trigger: what does not
//! fit before the message that calls the agent is passed over, and the
//! prompt says so ([`Passed`]). The batching is `batch.rs`; the tests,
//! property tests against the real store included, are `tests.rs`.
//!
//! Boundary: every write to the message log goes through
//! [`crate::messages`], in the transaction of the rule that makes it.

use crate::store::db::Db;

use crate::Result;
use crate::groups::Group;
use crate::messages::{self, Message};
use crate::store;

mod batch;

pub use batch::{
    Batch, Budget, Passed, batch_within, format_prompt, next_batch, passed_note, triggering, wakes,
};

fn cursor_key(folder: &str) -> String {
    format!("cursor:{folder}")
}

/// The `seq` of the last answered message of the group's chat.
pub fn cursor(conn: &Db<'_>, folder: &str) -> Result<i64> {
    let v = store::router_state::get(conn, &cursor_key(folder))?;
    Ok(v.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// Moves the group's cursor forward to `upto` ([`advance`]) and cleans
/// the messages it passes: once the agent has had them (or never will),
/// the log keeps none of their private spans and secrets
/// (`g2_core::privacy`). Whether a text changed (the caller then has the
/// store truncate its WAL, which still holds the old text).
pub fn pass(
    tx: &Db<'_>,
    group: &Group,
    upto: i64,
    redactor: &g2_core::privacy::Redactor,
) -> Result<bool> {
    let after = cursor(tx, &group.folder)?;
    let cleaned = messages::clean(tx, &group.jid, after, upto, redactor)?;
    advance(tx, &group.folder, upto)?;
    Ok(cleaned)
}

/// Moves the cursor forward to `upto` (never back); an in-flight mark it
/// passes is done with.
pub fn advance(tx: &Db<'_>, folder: &str, upto: i64) -> Result<()> {
    let now = cursor(tx, folder)?;
    if upto > now {
        store::router_state::set(tx, &cursor_key(folder), &upto.to_string())?;
    }
    if inflight(tx, folder)?.is_some_and(|i| i <= upto) {
        store::router_state::delete(tx, &inflight_key(folder))?;
    }
    Ok(())
}

fn inflight_key(folder: &str) -> String {
    format!("inflight:{folder}")
}

/// Records that messages up to `upto` were handed to the group's agent, so
/// that a host killed before the answer knows the next attempt continues
/// an interrupted one (never moves back).
pub fn mark_inflight(tx: &Db<'_>, folder: &str, upto: i64) -> Result<()> {
    if inflight(tx, folder)?.is_none_or(|i| i < upto) {
        store::router_state::set(tx, &inflight_key(folder), &upto.to_string())?;
    }
    Ok(())
}

/// Records, in one transaction, that a batch (its `upto` and what it
/// passes over) goes to the group's agent: the in-flight mark moves to
/// `upto` ([`mark_inflight`]) and the passed-over context is marked as
/// never shown (idempotent: a batch routed again after a restart passes
/// over the same messages).
pub fn hand_over(
    tx: &Db<'_>,
    folder: &str,
    jid: &str,
    upto: i64,
    passed: Option<&Passed>,
) -> Result<()> {
    if let Some(p) = passed {
        messages::mark_passed_over(tx, jid, p.after, p.before)?;
    }
    mark_inflight(tx, folder, upto)
}

/// Drops the group's in-flight mark: what it covered never reached the
/// agent (follow-ups it left without taking), so it is no attempt to resume.
pub fn drop_inflight(tx: &Db<'_>, folder: &str) -> Result<()> {
    store::router_state::delete(tx, &inflight_key(folder))
}

/// The highest `seq` handed to the group's agent and not answered yet.
pub fn inflight(conn: &Db<'_>, folder: &str) -> Result<Option<i64>> {
    let v = store::router_state::get(conn, &inflight_key(folder))?;
    Ok(v.and_then(|v| v.parse().ok()))
}

/// The newest `seq` of the group's chat that is no longer pending:
/// answered (the cursor) or handed to the agent (the in-flight mark). An
/// edit changes only a message after it.
pub fn settled(conn: &Db<'_>, folder: &str) -> Result<i64> {
    Ok(cursor(conn, folder)?.max(inflight(conn, folder)?.unwrap_or(0)))
}

/// What the agent is told before a prompt that an earlier attempt began
/// and did not finish: resume, do not redo.
pub fn interrupted_note(why: &str) -> String {
    let why: String = why.chars().take(300).collect();
    format!(
        "[g2: your previous attempt at answering these messages was interrupted ({why}). \
         Continue from where it stopped: check what was already done (files, messages sent, \
         scheduled tasks) and do not repeat actions that completed.]\n"
    )
}

/// Stores the agent's reply to the messages up to `upto` and moves the
/// cursor, in one transaction. The reply answers the message that woke
/// the agent ([`triggering`]; the newest when every message wakes it).
/// Nothing is stored when the reply is empty once internal notes are
/// removed (`messages::strip_internal`; the cursor still moves: the
/// messages were handled). The messages it answers are cleaned ([`pass`]);
/// the reply is cleaned in the log once delivered (`channels`). The
/// group's failing mark goes.
pub fn deliver_reply(
    tx: &Db<'_>,
    group: &Group,
    sender: &str,
    text: &str,
    upto: i64,
    delivered: bool,
    redactor: &g2_core::privacy::Redactor,
) -> Result<Reply> {
    let text = messages::strip_internal(text);
    let stored = if text.is_empty() {
        None
    } else {
        // The batch ends at `upto`; its messages are among these.
        let after = cursor(tx, &group.folder)?;
        let answered =
            store::messages::inbound_upto(tx, &group.jid, after, upto, Budget::PROMPT.messages)?;
        let reply_to = triggering(group, &answered)
            .or(answered.last())
            .map(|m| m.seq);
        Some(messages::store_outbound(
            tx, &group.jid, sender, &text, reply_to, delivered,
        )?)
    };
    let cleaned = pass(tx, group, upto, redactor)?;
    messages::clear_failing(tx, &group.folder)?;
    Ok(Reply {
        message: stored,
        cleaned,
    })
}

/// What [`deliver_reply`] stored.
#[derive(Debug)]
pub struct Reply {
    /// The reply, if the agent said anything.
    pub message: Option<Message>,
    /// An answered message was cleaned of private spans or secrets (the
    /// store's WAL should be truncated).
    pub cleaned: bool,
}

#[cfg(test)]
pub(super) mod tests;
