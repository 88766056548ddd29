//! A prompt's memory, put into the model's requests by the group's gateway
//! rather than waited for before the prompt is sent.
//!
//! The runner asks for a prompt's memory with a fresh reference
//! (`memory::context`); the host registers it here, starts the recall and
//! answers at once, and the prompt goes to Claude Code with a placeholder
//! block (`wire::memory_placeholder`). Each model request the group's
//! socket receives is looked through ([`Attachments::fill`]): every text
//! block that is exactly a placeholder gets its block, or [`NONE`] when
//! there is none. So the recall runs while Claude Code prepares its
//! request (about 37 ms here) instead of before it.
//!
//! Invariants:
//! - A reference is filled once and then always the same way: a request
//!   that waited past the deadline fixes it as empty, and a block made
//!   later is not used. So every request of a session shows the model the
//!   same history (what a provider's prompt cache needs), and a tool loop's
//!   requests agree with the turn's first.
//! - References are kept per group, the most recently used
//!   [`PER_GROUP`]; one evicted or made before this host started (a
//!   restart, another host) gets [`NONE`].
//! - Only a whole text block is a placeholder: a member who writes one
//!   inside their text gets their text back as it was, never g2's block.
//!   (An agent could make a tool's output exactly one: it would be shown
//!   its own group's memory, which its memory tools show it anyway.)
//! - A request is scanned, not parsed: the cost does not grow with the
//!   session beyond a pass over its bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;

use g2_core::validate::GroupFolder;
use g2_core::wire;

use crate::gateway::Attached;

/// References kept per group.
pub const PER_GROUP: usize = 1024;

/// The blocks being made and made, per group.
#[derive(Default)]
pub struct Attachments {
    groups: Mutex<HashMap<GroupFolder, Slots>>,
}

#[derive(Default)]
struct Slots {
    by_ref: HashMap<String, Slot>,
    clock: u64,
}

struct Slot {
    block: watch::Sender<Option<Arc<str>>>,
    deadline: Instant,
    used: u64,
}

/// A block being made: [`Pending::fill`] once it is.
pub struct Pending {
    block: watch::Sender<Option<Arc<str>>>,
}

impl Pending {
    /// The block is made (empty: nothing to inject). Has no effect when a
    /// request stopped waiting for it first.
    pub fn fill(&self, block: &str) {
        set_once(&self.block, block);
    }
}

fn set_once(tx: &watch::Sender<Option<Arc<str>>>, block: &str) {
    tx.send_if_modified(|v| {
        if v.is_some() {
            return false;
        }
        *v = Some(Arc::from(block));
        true
    });
}

impl Attachments {
    pub fn new() -> Arc<Attachments> {
        Arc::new(Attachments::default())
    }

    /// The block for `reference` in `group` is being made; a request waits
    /// for it until `deadline`.
    pub fn expect(&self, group: &GroupFolder, reference: &str, deadline: Instant) -> Pending {
        let (tx, _) = watch::channel(None);
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        let slots = groups.entry(group.clone()).or_default();
        slots.clock += 1;
        if slots.by_ref.len() >= PER_GROUP
            && let Some(oldest) = slots
                .by_ref
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(r, _)| r.clone())
        {
            slots.by_ref.remove(&oldest);
        }
        let used = slots.clock;
        slots.by_ref.insert(
            reference.to_string(),
            Slot {
                block: tx.clone(),
                deadline,
                used,
            },
        );
        Pending { block: tx }
    }

    /// The slot of `reference`, marked used.
    fn slot(
        &self,
        group: &GroupFolder,
        reference: &str,
    ) -> Option<(watch::Sender<Option<Arc<str>>>, Instant)> {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        let slots = groups.get_mut(group)?;
        slots.clock += 1;
        let clock = slots.clock;
        let slot = slots.by_ref.get_mut(reference)?;
        slot.used = clock;
        Some((slot.block.clone(), slot.deadline))
    }

    /// The block for `reference`: waits for it until its deadline, then
    /// fixes it as empty. `None` for a reference this host does not know.
    async fn block(&self, group: &GroupFolder, reference: &str) -> (Option<Arc<str>>, bool) {
        let Some((tx, deadline)) = self.slot(group, reference) else {
            return (None, false);
        };
        let mut rx = tx.subscribe();
        let waited = tokio::time::timeout_at(
            deadline.into(),
            rx.wait_for(|v: &Option<Arc<str>>| v.is_some()),
        )
        .await;
        let late = !matches!(waited, Ok(Ok(_)));
        if late {
            set_once(&tx, "");
        }
        let block = tx.borrow().clone();
        (block, late)
    }

    /// `body` (a Messages API request from `group`'s socket) with every
    /// placeholder replaced by its block, or by [`NONE`] when there is
    /// none; unchanged, without a copy, when it holds none.
    ///
    /// The body is not parsed: a placeholder is found as the exact JSON
    /// member `"text":"<placeholder>"` (Claude Code writes compact JSON),
    /// which no string can hold (its quotes would be escaped), so the cost
    /// is a scan of the bytes, however long the session's history.
    pub async fn fill(&self, group: &GroupFolder, body: Bytes) -> (Bytes, Attached) {
        let mut filled = Attached::default();
        let found = placeholders(&body);
        if found.is_empty() {
            return (body, filled);
        }
        filled.found = found.len();
        let mut blocks: HashMap<&str, Option<Arc<str>>> = HashMap::new();
        for (_, r) in &found {
            if !blocks.contains_key(r) {
                let (block, late) = self.block(group, r).await;
                filled.late |= late;
                blocks.insert(r, block);
            }
        }
        let mut out = Vec::with_capacity(body.len() + 4096);
        let mut at = 0;
        for (span, r) in &found {
            out.extend_from_slice(&body[at..span.start]);
            let text = match blocks.get(r).cloned().flatten() {
                Some(block) if !block.is_empty() => {
                    filled.given += 1;
                    wire::memory_reminder(&block)
                }
                _ => wire::memory_reminder(NONE),
            };
            // A JSON string of any text: serializing a `str` cannot fail.
            out.extend_from_slice(serde_json::to_string(&text).unwrap_or_default().as_bytes());
            at = span.end;
        }
        out.extend_from_slice(&body[at..]);
        (Bytes::from(out), filled)
    }
}

/// What a placeholder becomes when its prompt has no memory: the API
/// takes no empty text block, so the block stays, saying so in a word.
pub const NONE: &str = "<g2-memory/>";

/// A placeholder's JSON member up to its reference, and after it.
const OPEN: &str = r#""text":"<system-reminder>\n<g2-memory ref=\""#;
const CLOSE: &str = r#"\"/>\n</system-reminder>""#;

/// Where the body's placeholders are: the span of each one's JSON string
/// (quotes included), and its reference.
fn placeholders(body: &[u8]) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    for at in memchr::memmem::find_iter(body, OPEN.as_bytes()) {
        let from = at + OPEN.len();
        let len = body[from..]
            .iter()
            .take(65)
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        let r = std::str::from_utf8(&body[from..from + len]).unwrap_or_default();
        if wire::valid_memory_ref(r) && body[from + len..].starts_with(CLOSE.as_bytes()) {
            found.push((at + r#""text":"#.len()..from + len + CLOSE.len(), r));
        }
    }
    found
}

/// How long a request waits for a block asked at `asked`: the runner's
/// wait (`memory.inject_wait_ms`), as when it waited itself.
pub fn deadline(asked: Instant, inject_wait_ms: u64) -> Instant {
    asked + Duration::from_millis(inject_wait_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn request(messages: Value) -> Bytes {
        Bytes::from(json!({"model": "m", "messages": messages}).to_string())
    }

    fn group(name: &str) -> GroupFolder {
        GroupFolder::new(name).unwrap()
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn the_raw_member_is_claude_codes_compact_json() {
        let member = format!(
            "\"text\":{}",
            serde_json::to_string(&wire::memory_placeholder("4f-2")).unwrap()
        );
        assert_eq!(member, format!("{OPEN}4f-2{CLOSE}"));
        let body = format!("{{\"content\":[{{\"type\":\"text\",{member}}}]}}");
        let found = placeholders(body.as_bytes());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1, "4f-2");
        let (span, _) = &found[0];
        let text: String = serde_json::from_str(&body[span.clone()]).unwrap();
        assert_eq!(text, wire::memory_placeholder("4f-2"));
    }

    #[tokio::test]
    async fn each_placeholder_gets_its_block_or_says_there_is_none() {
        let a = Attachments::new();
        let g = group("main");
        a.expect(&g, "r1", far())
            .fill("<g2-memory>\npier 7\n</g2-memory>");
        a.expect(&g, "r2", far()).fill("");
        let p = |r: &str| json!({"type": "text", "text": wire::memory_placeholder(r)});
        let member = format!("look: {}", wire::memory_placeholder("r1"));
        // A tool's output holding a transcript line: the placeholder in it
        // is escaped once more, and is text.
        let quoted = json!({"content": [p("r1")]}).to_string();
        let body = request(json!([
            {"role": "user", "content": [{"type": "text", "text": "where is the boat?"}, p("r1")]},
            {"role": "user", "content": [
                {"type": "text", "text": member},
                p("r2"),
                p("gone"),
                {"type": "tool_result", "tool_use_id": "t", "content": quoted},
            ]},
        ]));
        let (out, filled) = a.fill(&g, body).await;
        assert_eq!(
            filled,
            Attached {
                found: 3,
                given: 1,
                late: false
            }
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        let m = &v["messages"];
        assert_eq!(
            m[0]["content"][1]["text"],
            "<system-reminder>\n<g2-memory>\npier 7\n</g2-memory>\n</system-reminder>"
        );
        // A member's text is theirs, as written, and so is a tool's.
        assert_eq!(m[1]["content"][0]["text"], member.as_str());
        assert_eq!(m[1]["content"][3]["content"], quoted.as_str());
        let none = wire::memory_reminder(NONE);
        assert_eq!(m[1]["content"][1]["text"], none.as_str());
        assert_eq!(m[1]["content"][2]["text"], none.as_str());
        // Another group's socket knows none of these.
        let body = request(json!([{"role": "user", "content": [p("r1")]}]));
        let (out, filled) = a.fill(&group("fam"), body).await;
        assert_eq!(filled.given, 0);
        assert!(!String::from_utf8_lossy(&out).contains("pier 7"));
    }

    #[tokio::test]
    async fn a_request_waits_for_its_block_until_the_deadline_and_then_for_good() {
        let a = Attachments::new();
        let g = group("main");
        let pending = a.expect(&g, "r1", far());
        let body = request(
            json!([{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": wire::memory_placeholder("r1")}]}]),
        );
        let (a2, g2, b2) = (a.clone(), g.clone(), body.clone());
        let waiting = tokio::spawn(async move { a2.fill(&g2, b2).await });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!waiting.is_finished(), "waits for the block");
        pending.fill("<g2-memory>\nlate but in time\n</g2-memory>");
        let (out, filled) = waiting.await.unwrap();
        assert_eq!(filled.given, 1);
        assert!(String::from_utf8_lossy(&out).contains("late but in time"));

        // Past its deadline a block is fixed as none, even once made.
        let pending = a.expect(&g, "r2", Instant::now() + Duration::from_millis(20));
        let body = request(
            json!([{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": wire::memory_placeholder("r2")}]}]),
        );
        let (out, filled) = a.fill(&g, body.clone()).await;
        assert!(filled.late && filled.given == 0, "{filled:?}");
        assert!(String::from_utf8_lossy(&out).contains(NONE));
        pending.fill("<g2-memory>\ntoo late\n</g2-memory>");
        let (again, _) = a.fill(&g, body).await;
        assert_eq!(out, again, "every later request shows the same");
        assert!(!String::from_utf8_lossy(&again).contains("too late"));
    }

    #[tokio::test]
    async fn a_request_without_placeholders_passes_untouched_and_the_used_stay() {
        let a = Attachments::new();
        let g = group("main");
        let body = Bytes::from_static(
            b"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        );
        let (out, filled) = a.fill(&g, body.clone()).await;
        assert_eq!(out.as_ptr(), body.as_ptr(), "no copy");
        assert_eq!(filled, Attached::default());
        // The least recently used reference goes first: one used by
        // every request stays.
        a.expect(&g, "kept", far())
            .fill("<g2-memory>\nk\n</g2-memory>");
        let uses = request(
            json!([{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": wire::memory_placeholder("kept")}]}]),
        );
        for n in 0..PER_GROUP + 10 {
            a.expect(&g, &format!("r{n}"), far()).fill("");
            if n % 100 == 0 {
                a.fill(&g, uses.clone()).await;
            }
        }
        let (_, filled) = a.fill(&g, uses).await;
        assert_eq!(filled.given, 1);
        let groups = a.groups.lock().unwrap();
        assert_eq!(groups[&g].by_ref.len(), PER_GROUP);
    }
}
