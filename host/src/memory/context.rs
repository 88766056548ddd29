//! Context injection: the memory a group's session is given, as a
//! `<g2-memory>` block the hooks hand Claude Code as `additionalContext`.
//!
//! - **Session start** (`startup`, `resume`, `clear`, `compact`): the
//!   latest session summaries and the most important active observations
//!   (importance first, then recency), then one line naming the memory
//!   tools, within `memory.inject_tokens`. After a clear or a compaction
//!   the summaries and observations of the session that ended are in it,
//!   so what it established outlives it.
//! - **Each prompt**: recall on the prompt; only hits that hold at least
//!   two of its content words and at least half of them ([`relevant`]), at
//!   most [`PROMPT_HITS`], within `memory.prompt_inject_tokens`; nothing
//!   when nothing is relevant.
//!
//! Nothing for a group whose `memory.inject` is off, nor for a prompt that
//! says `#nomemory`. The hook asks over the group's own gateway socket
//! ([`PATH`]); the socket is the group's identity, so a group only ever
//! gets its own memory. The block's text is cleaned like everything else
//! the memory layer shows, and the tag is stripped again by capture, so
//! memory never feeds on itself.

use std::fmt::Write;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use g2_core::validate::{GroupFolder, MemoryFolder};

use crate::Result;
use crate::config::MemorySettings;
use crate::memory::recall::{self, RecallHit};
use crate::store::{self, Store};

/// Where the hooks ask, on the group's gateway socket.
pub const PATH: &str = "/g2/memory/context";
/// Most recalled hits injected with a prompt.
pub const PROMPT_HITS: usize = 5;
/// Characters per token, for the budgets (a rough, safe estimate).
const CHARS_PER_TOKEN: usize = 4;
/// A prompt that asks for no memory.
pub const NO_MEMORY: &str = "#nomemory";

/// What a hook asks.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ContextRequest {
    /// `SessionStart` or `UserPromptSubmit`.
    pub event: String,
    /// The session start's source.
    #[serde(default)]
    pub source: Option<String>,
    /// The prompt, as the hook cleaned it.
    #[serde(default)]
    pub prompt: Option<String>,
}

/// The answer: the block, or empty.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ContextResponse {
    pub context: String,
}

/// Whether a recalled hit is worth injecting with a prompt.
pub fn relevant(h: &RecallHit) -> bool {
    h.matched_words >= 2 && h.matched_words * 2 >= h.question_words
}

fn budget_chars(tokens: usize) -> usize {
    tokens.saturating_mul(CHARS_PER_TOKEN)
}

/// `s` on one line: every run of whitespace (line breaks too) one space.
/// A memory shown in a list is one line of it (here and in the agents'
/// memory tools).
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Appends `line` when it fits in `budget` characters in all.
fn push_within(out: &mut String, line: &str, budget: usize) -> bool {
    if out.chars().count() + line.chars().count() + 1 > budget {
        return false;
    }
    out.push_str(line);
    out.push('\n');
    true
}

fn wrap(body: &str) -> String {
    format!("<g2-memory>\n{body}</g2-memory>")
}

/// The block for a session's start; empty when the group has no memory yet.
pub fn session_start(conn: &Connection, group: &GroupFolder, tokens: usize) -> Result<String> {
    let budget = budget_chars(tokens).saturating_sub(40);
    let summaries = store::observations::latest_summaries(conn, group, 3)?;
    // No more than could fit: the shortest line, `- [fact #1] x` and its
    // line break, is 14 characters.
    let most = i64::try_from(budget / 14).unwrap_or(i64::MAX).max(1);
    // The group's own, and `global`'s (every group's, read-only).
    let observations =
        store::observations::first(conn, [group.as_str(), MemoryFolder::GLOBAL], false, most)?;
    if summaries.is_empty() && observations.is_empty() {
        return Ok(String::new());
    }
    let mut body = String::from("What this group's memory holds (g2):\n");
    if !summaries.is_empty() {
        push_within(&mut body, "Recent sessions:", budget);
        for s in &summaries {
            let mut line = format!(
                "- {} {}",
                s.created_at.get(..10).unwrap_or(""),
                one_line(&s.title)
            );
            for (k, v) in [
                ("learned", &s.learned),
                ("done", &s.completed),
                ("next", &s.next_steps),
            ] {
                if !v.trim().is_empty() {
                    let _ = write!(line, "; {k}: {}", one_line(v));
                }
            }
            let line: String = line.chars().take(400).collect();
            if !push_within(&mut body, &line, budget) {
                break;
            }
        }
    }
    if !observations.is_empty() {
        push_within(&mut body, "Remembered:", budget);
        for o in &observations {
            let who = if o.concerns.is_empty() {
                String::new()
            } else {
                format!(" ({})", o.concerns.join(", "))
            };
            let whose = if o.group == *group { "" } else { "global " };
            let line = format!(
                "- [{whose}{} #{}] {}{who}",
                o.kind,
                o.id,
                one_line(&o.title)
            );
            if !push_within(&mut body, &line, budget) {
                break;
            }
        }
    }
    push_within(
        &mut body,
        "More with the g2 tools memory_search, memory_timeline, memory_get; remember and forget.",
        budget + 40,
    );
    Ok(wrap(&body))
}

/// The block for a prompt: relevant recalled memories, or empty.
pub fn for_prompt(
    conn: &Connection,
    group: &GroupFolder,
    prompt: &str,
    tokens: usize,
) -> Result<String> {
    if prompt.contains(NO_MEMORY) {
        return Ok(String::new());
    }
    // Hits found by meaning alone may rank above the ones the word gate
    // keeps: look further down than the hits injected.
    let hits: Vec<RecallHit> = recall::recall(conn, group, prompt, PROMPT_HITS * 10)?
        .into_iter()
        // A prompt no archive holds yet is likely this very conversation.
        .filter(|h| h.kind != "prompt")
        .filter(relevant)
        .take(PROMPT_HITS)
        .collect();
    if hits.is_empty() {
        return Ok(String::new());
    }
    let budget = budget_chars(tokens).saturating_sub(30);
    let mut body = String::from("Possibly relevant memory (g2):\n");
    for h in &hits {
        let kind = h.observation_kind.as_deref().unwrap_or(&h.kind);
        let text = if h.kind == "passage" {
            &h.snippet
        } else {
            &h.title
        };
        let line = format!("- [{kind} #{}] {}", h.id, one_line(text));
        if !push_within(&mut body, &line, budget) {
            break;
        }
    }
    Ok(wrap(&body))
}

/// The block a hook's request asks for, for `group`.
pub fn answer(
    conn: &Connection,
    group: &GroupFolder,
    req: &ContextRequest,
    settings: &MemorySettings,
) -> Result<String> {
    let injects =
        store::groups::get(conn, group)?.is_none_or(|g| g.container_config.memory.injects());
    if !injects {
        return Ok(String::new());
    }
    match req.event.as_str() {
        g2_core::wire::SESSION_START => session_start(conn, group, settings.inject_tokens),
        g2_core::wire::USER_PROMPT_SUBMIT => for_prompt(
            conn,
            group,
            req.prompt.as_deref().unwrap_or(""),
            settings.prompt_inject_tokens,
        ),
        _ => Ok(String::new()),
    }
}

#[derive(Clone)]
struct Ctx {
    store: Store,
    group: GroupFolder,
    settings: MemorySettings,
}

/// The route the group's socket serves for its hooks.
pub fn routes(store: Store, group: GroupFolder, settings: MemorySettings) -> Router {
    Router::new().route(PATH, post(context)).with_state(Ctx {
        store,
        group,
        settings,
    })
}

async fn context(State(c): State<Ctx>, Json(req): Json<ContextRequest>) -> Json<ContextResponse> {
    let (group, settings) = (c.group.clone(), c.settings.clone());
    let context = c
        .store
        .read(move |conn| answer(conn, &group, &req, &settings))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(group = %c.group, error = %e, "memory context failed; none injected");
            String::new()
        });
    Json(ContextResponse { context })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::extract::{Kind, ObservationDraft};
    use crate::store::observations as obs;

    #[test]
    fn blocks_hold_the_groups_memory_within_budget() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5)).unwrap();
        let main = GroupFolder::new("main").unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let (m, f) = (main.clone(), fam.clone());
        store
            .write_blocking(move |tx| {
                let draft = |title: &str, importance: u8| ObservationDraft {
                    kind: Kind::Fact,
                    title: title.into(),
                    narrative: String::new(),
                    facts: vec![],
                    files: vec![],
                    importance,
                    concerns: vec!["Ann".into()],
                };
                let at = "2026-05-01T10:00:00.000Z";
                obs::insert(
                    tx,
                    &(&m).into(),
                    &draft("the boat is moored at pier 7", 8),
                    Default::default(),
                    at,
                    |_| false,
                )?;
                obs::insert(
                    tx,
                    &(&m).into(),
                    &draft("the shed key is under the mat", 3),
                    Default::default(),
                    at,
                    |_| false,
                )?;
                obs::insert(
                    tx,
                    &(&f).into(),
                    &draft("the car is in the garage", 9),
                    Default::default(),
                    at,
                    |_| false,
                )?;
                Ok(())
            })
            .unwrap();
        store
            .read_blocking(|c| {
                let block = session_start(c, &main, 1_500)?;
                assert!(block.starts_with("<g2-memory>\n") && block.ends_with("</g2-memory>"));
                assert!(block.contains("pier 7 (Ann)"), "{block}");
                assert!(!block.contains("garage"), "never another group's: {block}");
                // Most important first.
                assert!(block.find("pier 7") < block.find("shed key"), "{block}");
                assert!(block.contains("memory_search"));
                // A tiny budget keeps the most important only.
                let small = session_start(c, &main, 40)?;
                assert!(
                    small.contains("pier 7") && !small.contains("shed"),
                    "{small}"
                );
                assert_eq!(
                    session_start(c, &GroupFolder::new("empty").unwrap(), 1_500)?,
                    ""
                );
                // A related prompt gets memory, an unrelated one none.
                let related = for_prompt(c, &main, "where is the boat moored?", 500)?;
                assert!(related.contains("pier 7"), "{related}");
                assert_eq!(
                    for_prompt(c, &main, "what is the capital of France?", 500)?,
                    ""
                );
                assert_eq!(
                    for_prompt(c, &main, "where is the boat moored? #nomemory", 500)?,
                    ""
                );
                Ok(())
            })
            .unwrap();
    }
}
