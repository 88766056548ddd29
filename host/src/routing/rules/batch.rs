//! Batches: which pending messages go to the agent as its next prompt,
//! oldest first within a prompt [`Budget`], and what a group that needs a
//! trigger passes over ([`Passed`]).

use std::collections::VecDeque;

use crate::Result;
use crate::groups::Group;
use crate::messages::Message;
use crate::store;
use crate::store::db::Db;
use g2_core::envelope;

use super::inflight;

/// What one prompt may hold: at most `messages` messages and `text_bytes`
/// bytes of their text (UTF-8, as stored; the envelope's tags and escapes
/// aside). A prompt always holds at least one message, however long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub messages: usize,
    pub text_bytes: usize,
}

impl Budget {
    /// The budget of every routed prompt, a follow-up's too
    /// (docs/channels.md, "Backlogs"). A message's text is at most
    /// [`MAX_TEXT`](crate::messages::MAX_TEXT), so one always fits.
    pub const PROMPT: Budget = Budget {
        messages: 100,
        text_bytes: 64 * 1024,
    };

    pub(super) fn holds(&self, messages: usize, text_bytes: usize) -> bool {
        messages <= self.messages && text_bytes <= self.text_bytes
    }
}

/// Messages handed to an agent as one prompt: the oldest pending ones,
/// within a [`Budget`].
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub prompt: String,
    /// The `seq` of the newest message in it.
    pub upto: i64,
    /// Who sent them (for a failure notice).
    pub senders: Vec<String>,
    /// Some of them were handed to an agent that never answered (the
    /// in-flight mark is past `after`): a host stopped mid-turn.
    pub resumes: bool,
    /// The context before its first message that it passes over (a group
    /// that needs a trigger, when that context is over the budget).
    pub passed: Option<Passed>,
}

/// Context a batch passes over: every person's message with
/// `after < seq < before`. It is never shown to the agent; the prompt
/// says so ([`passed_note`]) and [`hand_over`](super::hand_over) marks it
/// for the viewer.
#[derive(Debug, Clone, PartialEq)]
pub struct Passed {
    pub after: i64,
    /// The `seq` of the batch's first message.
    pub before: i64,
    pub count: usize,
    /// The times of the oldest and the newest of them.
    pub first: String,
    pub last: String,
}

/// Messages read at a time while looking for the next one that calls the
/// agent of a group that needs a trigger.
const PAGE: usize = 256;

/// What the agent is told before a prompt that passes over context
/// ([`Passed`]): how many messages, from when to when, and why.
pub fn passed_note(p: &Passed, budget: Budget) -> String {
    let (n, are) = match p.count {
        1 => ("1 earlier message".to_string(), "is"),
        n => (format!("{n} earlier messages"), "are"),
    };
    format!(
        "[g2: {n} of this chat, from {} to {}, {are} not shown: a prompt holds at most {} \
         messages and {} KiB of text, and the context before the message that called you \
         was longer.]\n",
        p.first,
        p.last,
        budget.messages,
        budget.text_bytes / 1024
    )
}

/// The pending messages after `after` as a prompt, if they should wake the
/// agent now: the oldest ones within [`Budget::PROMPT`] ([`batch_within`]).
pub fn next_batch(conn: &Db<'_>, group: &Group, after: i64) -> Result<Option<Batch>> {
    batch_within(conn, group, after, Budget::PROMPT)
}

/// The next batch after `after` within `budget`, oldest first, so that a
/// backlog of any length is answered in as many prompts as it takes:
///
/// - a group every message wakes gets its oldest pending messages, as many
///   as the budget holds (one at least);
/// - a group that needs a trigger gets its oldest pending message that
///   calls the agent, with as much of the context before it as the budget
///   holds (the newest context first); older context is passed over
///   ([`Passed`]) and the prompt begins with a [`passed_note`]. Then, as
///   far as the budget holds, the messages after it up to the last that
///   calls the agent; context after that waits for the next call.
pub fn batch_within(
    conn: &Db<'_>,
    group: &Group,
    after: i64,
    budget: Budget,
) -> Result<Option<Batch>> {
    let taken = if group.is_main || !group.requires_trigger {
        oldest_within(conn, group, after, budget)?.map(|shown| (shown, None))
    } else {
        up_to_call(conn, group, after, budget)?
    };
    let Some((shown, passed)) = taken else {
        return Ok(None);
    };
    let mut senders: Vec<String> = Vec::new();
    for m in &shown {
        if !senders.contains(&m.sender) {
            senders.push(m.sender.clone());
        }
    }
    let mut prompt = passed
        .as_ref()
        .map(|p| passed_note(p, budget))
        .unwrap_or_default();
    prompt.push_str(&format_prompt(&shown));
    Ok(Some(Batch {
        prompt,
        upto: shown.last().map_or(after, |m| m.seq),
        senders,
        resumes: inflight(conn, &group.folder)?.is_some_and(|i| i > after),
        passed,
    }))
}

/// The oldest pending messages the budget holds (one at least); none when
/// nothing is pending.
fn oldest_within(
    conn: &Db<'_>,
    group: &Group,
    after: i64,
    budget: Budget,
) -> Result<Option<Vec<Message>>> {
    let mut shown: Vec<Message> = Vec::new();
    let mut bytes = 0;
    for m in store::messages::inbound_after(conn, &group.jid, after, budget.messages.max(1))? {
        bytes += m.text.len();
        if !shown.is_empty() && !budget.holds(shown.len() + 1, bytes) {
            break;
        }
        shown.push(m);
    }
    Ok((!shown.is_empty()).then_some(shown))
}

/// The oldest pending message that calls the agent, after as much of the
/// context before it as the budget holds (the older context passed over),
/// and then, while the budget holds, the messages after it up to the last
/// one that calls the agent too: calls that came together are answered
/// together, as they were typed. None when no pending message calls it.
/// Reads the pending messages [`PAGE`] at a time and keeps only the
/// context that could still go along.
fn up_to_call(
    conn: &Db<'_>,
    group: &Group,
    after: i64,
    budget: Budget,
) -> Result<Option<(Vec<Message>, Option<Passed>)>> {
    let calls = Calls::of(group);
    let mut context: VecDeque<Message> = VecDeque::new();
    let mut bytes = 0;
    let mut passed: Option<Passed> = None;
    // Once the first call is found: how many of `context` end at a call.
    let mut upto_call: Option<usize> = None;
    // Oldest first, so what is passed over is the oldest context.
    let mut pass_one = |context: &mut VecDeque<Message>, bytes: &mut usize| {
        if let Some(m) = context.pop_front() {
            *bytes -= m.text.len();
            match &mut passed {
                Some(p) => {
                    p.count += 1;
                    p.last = m.timestamp;
                }
                None => {
                    passed = Some(Passed {
                        after,
                        before: 0,
                        count: 1,
                        first: m.timestamp.clone(),
                        last: m.timestamp,
                    });
                }
            }
        }
    };
    let mut from = after;
    'pages: loop {
        let page = store::messages::inbound_after(conn, &group.jid, from, PAGE)?;
        let more = page.len() == PAGE;
        for m in page {
            from = m.seq;
            let own = m.text.len();
            if upto_call.is_some() {
                // After the first call: only what the budget still holds.
                if !budget.holds(context.len() + 1, bytes + own) {
                    break 'pages;
                }
                let call = calls.by(&m);
                bytes += own;
                context.push_back(m);
                if call {
                    upto_call = Some(context.len());
                }
                continue;
            }
            if calls.by(&m) {
                while !context.is_empty() && !budget.holds(context.len() + 1, bytes + own) {
                    pass_one(&mut context, &mut bytes);
                }
                bytes += own;
                context.push_back(m);
                upto_call = Some(context.len());
                continue;
            }
            bytes += own;
            context.push_back(m);
            // Room is kept for the message that calls the agent.
            while !context.is_empty() && !budget.holds(context.len() + 1, bytes) {
                pass_one(&mut context, &mut bytes);
            }
        }
        if !more {
            break;
        }
    }
    let Some(n) = upto_call else {
        return Ok(None);
    };
    let mut shown: Vec<Message> = context.into();
    // Context after the last call waits for the next one.
    shown.truncate(n);
    let passed = passed.map(|p| Passed {
        before: shown[0].seq,
        ..p
    });
    Ok(Some((shown, passed)))
}

/// Whether a message calls the group's agent: its channel saw it address
/// the agent (a mention of the bot, a reply to it), or it matches the
/// group's trigger.
struct Calls(Option<regex::Regex>);

impl Calls {
    fn of(group: &Group) -> Calls {
        let pattern = group.trigger_pattern.clone().unwrap_or_default();
        Calls(match crate::groups::trigger_regex(&pattern) {
            Ok(re) => Some(re),
            Err(e) => {
                // Patterns are checked when stored; a bad one must not wake on everything.
                tracing::warn!(group = %group.folder, error = %e, "trigger pattern does not compile");
                None
            }
        })
    }

    fn by(&self, m: &Message) -> bool {
        m.addressed || self.0.as_ref().is_some_and(|re| re.is_match(m.text.trim()))
    }
}

/// Whether these pending messages wake the group's agent.
pub fn wakes(group: &Group, pending: &[Message]) -> bool {
    if group.is_main || !group.requires_trigger {
        return !pending.is_empty();
    }
    triggering(group, pending).is_some()
}

/// The newest of these messages that calls the agent: one its channel saw
/// address it (a mention of the bot, a reply to it), or one that matches
/// the group's trigger.
pub fn triggering<'a>(group: &Group, pending: &'a [Message]) -> Option<&'a Message> {
    let calls = Calls::of(group);
    pending.iter().rev().find(|m| calls.by(m))
}

/// The pending messages as one routed prompt (see [`g2_core::envelope`]):
/// each with its sender's name (else id) and time, and its files where
/// the agent finds them.
pub fn format_prompt(pending: &[Message]) -> String {
    envelope::write_with(pending.iter().map(|m| {
        let who = m
            .sender_name
            .as_deref()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(&m.sender);
        (
            who,
            m.timestamp.as_str(),
            m.text.as_str(),
            m.attachments.as_slice(),
        )
    }))
}
