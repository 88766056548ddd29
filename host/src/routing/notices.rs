//! What a group is told when its messages go unanswered: the notice to the
//! senders (who, why, whether to send again) and what giving up records
//! with it (the cursor past the messages, the group's failing mark), and
//! the reasons the queue words such a failure with. (What a chat is told
//! about a text over the limit is the log's: `messages::too_long`.)
//!
//! Boundary: the queue decides *when* to give up ([`GiveUp`] says how the
//! turn ended); this module decides what is said and stores it, through
//! [`rules`](super::rules) and the log ([`crate::messages`]), in one
//! transaction. Delivering the stored notice is the caller's.

use crate::store::db::Db;

use crate::Result;
use crate::agent::RunReport;
use crate::groups::Group;
use crate::messages::{self, Message};
use crate::routing::rules as router;
use crate::store;

/// How a turn ended without an answer, for the words the senders get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// Every retry failed (how many tries).
    Retried(u32),
    /// The agent died (memory, processes, killed, disk, time limit).
    Crashed,
    /// The group may not run now (disk quota, host disk).
    Refused,
}

/// Why a turn the previous host left in flight is resumed (the agent reads
/// it in [`router::interrupted_note`]).
pub const HOST_STOPPED: &str = "the host stopped before it finished";

/// Why a turn whose agent ran went unanswered: its last error, or else how
/// it exited.
pub fn unanswered(report: &RunReport) -> String {
    report
        .errors
        .last()
        .cloned()
        .unwrap_or_else(|| format!("the agent exited ({}) before answering", report.exit_code))
}

/// Why a turn went unanswered when its reply could not be stored (the
/// run is redone from the cursor).
pub fn reply_not_stored(e: &crate::Error) -> String {
    format!("storing a reply: {e}")
}

/// The notice: the senders named (`@name`, once each; everyone when none
/// is known), why (at most 300 characters), and what they can do.
pub fn text(senders: &[String], why: &str, how: GiveUp) -> String {
    let mut who: Vec<String> = senders.iter().map(|s| format!("@{s}")).collect();
    who.dedup();
    let who = if who.is_empty() {
        "Everyone:".to_string()
    } else {
        who.join(" ")
    };
    let short: String = why.chars().take(300).collect();
    match how {
        GiveUp::Retried(tries) => format!(
            "{who} sorry, I could not answer after {tries} tries ({short}). Send your message again to retry."
        ),
        GiveUp::Crashed => format!(
            "{who} sorry, I could not answer: the agent {short}. It was not run again, so nothing it did is repeated; send your message again to retry."
        ),
        GiveUp::Refused => format!("{who} sorry, I could not answer: {short}."),
    }
}

/// Gives up on the group's messages up to `upto`, in one transaction: the
/// notice to their senders (each once; not those of passed-over context)
/// stored (as `sender`; `delivered` when storing
/// it is its delivery), the cursor moved past them (and they cleaned:
/// `router::pass`), the group marked failing with `why`. Returns the
/// notice, for the caller to deliver, and whether a text was cleaned.
#[allow(clippy::too_many_arguments)] // each is a distinct input of the one transaction
pub fn give_up(
    tx: &Db<'_>,
    group: &Group,
    sender: &str,
    upto: i64,
    why: &str,
    how: GiveUp,
    delivered: bool,
    redactor: &g2_core::privacy::Redactor,
) -> Result<(Message, bool)> {
    // Those the agent was shown: context passed over did not address it.
    let cursor = router::cursor(tx, &group.folder)?;
    let senders = store::messages::inbound_senders(tx, &group.jid, cursor, upto)?;
    let text = text(&senders, why, how);
    let m = messages::store_outbound(tx, &group.jid, sender, &text, None, delivered)?;
    let cleaned = router::pass(tx, group, upto, redactor)?;
    messages::mark_failing(tx, &group.folder, why)?;
    Ok((m, cleaned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use router::tests::{group, post_as, store_of};
    use router::{Budget, batch_within, hand_over};

    #[test]
    fn a_give_up_tells_those_shown_not_those_passed_over() {
        let g = group(false, None);
        let (_d, store) = store_of(&g);
        // One passed over: the note says so in the singular.
        let tiny = Budget {
            messages: 2,
            text_bytes: 2048,
        };
        post_as(&store, &g.jid, "eve", "[old]");
        post_as(&store, &g.jid, "fay", "[near]");
        let call3 = post_as(&store, &g.jid, "gus", "@Andy [call3]");
        let g2 = g.clone();
        let b = store
            .read_blocking(move |c| batch_within(c, &g2, 0, tiny))
            .unwrap()
            .unwrap();
        assert!(
            b.prompt
                .starts_with("[g2: 1 earlier message of this chat, from ")
        );
        assert!(
            b.prompt
                .contains(" is not shown: a prompt holds at most 2 messages and 2 KiB")
        );
        let (g3, passed) = (g.clone(), b.passed.clone());
        let (notice, _) = store
            .write_blocking(move |tx| {
                hand_over(tx, &g3.folder, &g3.jid, call3.seq, passed.as_ref())?;
                give_up(
                    tx,
                    &g3,
                    "Andy",
                    call3.seq,
                    "boom",
                    GiveUp::Crashed,
                    true,
                    &Default::default(),
                )
            })
            .unwrap();
        assert!(
            notice.text.starts_with("@fay @gus sorry"),
            "{}",
            notice.text
        );
    }

    #[test]
    fn notices_name_each_sender_once_and_cut_the_reason() {
        let senders = ["ana".to_string(), "ana".to_string(), "bo".to_string()];
        let long = "x".repeat(400);
        let t = text(&senders, &long, GiveUp::Retried(3));
        assert!(t.starts_with("@ana @bo sorry, I could not answer after 3 tries ("));
        assert!(t.contains(&"x".repeat(300)) && !t.contains(&"x".repeat(301)));
        assert_eq!(
            text(&[], "over its disk quota", GiveUp::Refused),
            "Everyone: sorry, I could not answer: over its disk quota."
        );
        assert!(
            text(&senders[2..], "ran out of memory", GiveUp::Crashed)
                .starts_with("@bo sorry, I could not answer: the agent ran out of memory.")
        );
    }
}
