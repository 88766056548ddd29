//! Context injection: the memory a group's session is given, as a
//! `<g2-memory>` block the hooks hand Claude Code as `additionalContext`.
//!
//! - **Session start** (`startup`, `resume`, `clear`, `compact`): the
//!   latest session summaries and the most important active observations
//!   (importance first, then recency), then one line naming the memory
//!   tools, within `memory.inject_tokens`. After a clear or a compaction
//!   the summaries and observations of the session that ended are in it,
//!   so what it established outlives it.
//! - **Each prompt**: recall on the prompt, gated on recall's final score
//!   ([`Injection::SHIPPED`]): nothing unless the best hit reaches the
//!   gate, then the hits above the floor, each quoted as its turn (the day
//!   it was said, its id, who said what, cut around the prompt's words),
//!   within `memory.prompt_inject_tokens`. The values and what they trade
//!   are measured in docs/recall.md.
//!
//! Nothing for a group whose `memory.inject` is off, nor for a prompt that
//! says `#nomemory`. The hook asks over the group's own gateway socket
//! ([`PATH`]); the socket is the group's identity, so a group only ever
//! gets its own memory. The block's text is cleaned like everything else
//! the memory layer shows, and the tag is stripped again by capture, so
//! memory never feeds on itself.

use std::fmt::Write;

use crate::store::db::Db;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use g2_core::validate::{GroupFolder, MemoryFolder};

use crate::Result;
use crate::config::MemorySettings;
use crate::memory::recall::{self, RecallHit};
use crate::store::{self, Store};

/// Where the hooks ask, on the group's gateway socket.
pub const PATH: &str = "/g2/memory/context";
/// What per-prompt injection hands over: [`Injection::SHIPPED`] is what
/// every prompt gets; the recall bench compares others (docs/recall.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Injection {
    /// Most recalled hits injected.
    pub hits: usize,
    /// The final recall score the best hit needs for anything to be
    /// injected (measured against prompts no memory answers),
    pub gate: f64,
    /// and the score each further hit needs.
    pub floor: f64,
    /// Characters one message of an injected turn is quoted with, at most.
    pub message_chars: usize,
}

impl Injection {
    pub const SHIPPED: Injection = Injection {
        hits: 8,
        gate: 0.25,
        floor: 0.2,
        message_chars: 200,
    };
}
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
pub fn session_start(conn: &Db<'_>, group: &GroupFolder, tokens: usize) -> Result<String> {
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

/// What a prompt is given: the block, and the hits it holds, best first.
#[derive(Debug, Clone, Default)]
pub struct PromptMemory {
    pub block: String,
    pub hits: Vec<RecallHit>,
}

/// The block for a prompt: the recalled memories whose final score passes
/// the gate of [`Injection`], as the turns themselves (who said what, and the day),
/// within `tokens`; empty when none does.
pub fn for_prompt(
    conn: &Db<'_>,
    group: &GroupFolder,
    prompt: &str,
    tokens: usize,
) -> Result<String> {
    Ok(prompt_memory(conn, group, prompt, tokens, &Injection::SHIPPED)?.block)
}

/// [`for_prompt`], with the hits that made it into the block, injecting
/// as `how` says.
pub fn prompt_memory(
    conn: &Db<'_>,
    group: &GroupFolder,
    prompt: &str,
    tokens: usize,
    how: &Injection,
) -> Result<PromptMemory> {
    if prompt.contains(NO_MEMORY) {
        return Ok(PromptMemory::default());
    }
    let hits: Vec<RecallHit> = recall::recall(conn, group, prompt, how.hits * 2)?
        .into_iter()
        // A prompt no archive holds yet is likely this very conversation.
        .filter(|h| h.kind != "prompt" && h.score >= how.floor)
        .take(how.hits)
        .collect();
    if hits.first().is_none_or(|h| h.score < how.gate) {
        return Ok(PromptMemory::default());
    }
    let terms = crate::search::SnippetTerms::new(prompt);
    let head = "Memory that may bear on this message (g2; the day each was said, its id):\n";
    let budget = budget_chars(tokens).saturating_sub(head.len() + 30);
    let mut body = String::new();
    let mut kept = Vec::new();
    for h in hits {
        let line = turn_line(conn, &h, &terms, how.message_chars)?;
        if push_within(&mut body, &line, budget) {
            kept.push(h);
        }
    }
    if kept.is_empty() {
        return Ok(PromptMemory::default());
    }
    Ok(PromptMemory {
        block: wrap(&format!("{head}{body}")),
        hits: kept,
    })
}

/// One injected memory on one line: `- [day id] ` and, for a passage, its
/// messages as `Speaker: text` (each cut around the prompt's words to
/// `chars`); for an observation or a summary, its text.
fn turn_line(
    conn: &Db<'_>,
    h: &RecallHit,
    terms: &crate::search::SnippetTerms,
    chars: usize,
) -> Result<String> {
    let day = h.at.get(..10).unwrap_or(&h.at);
    let quote = |text: &str| one_line(&crate::search::excerpt(text, terms, chars));
    let (id, text) = match h.kind.as_str() {
        "passage" => {
            let text = store::recall::passage(conn, h.id)?
                .map(|(_, p)| p.text)
                .unwrap_or_default();
            let mut said = Vec::new();
            for m in crate::search::passages::said(&text) {
                said.push(match m.speaker {
                    Some(who) => format!("{who}: {}", quote(m.text)),
                    None => quote(m.text),
                });
            }
            (format!("p{}", h.id), said.join(" | "))
        }
        "observation" => (
            format!("o{} {}", h.id, h.observation_kind.as_deref().unwrap_or("")),
            quote(&h.title),
        ),
        "summary" => (format!("s{} session", h.id), quote(&h.title)),
        _ => (format!("b{}", h.id), quote(&h.title)),
    };
    Ok(format!("- [{day} {}] {text}", id.trim_end()))
}

/// The block a hook's request asks for, for `group`.
pub fn answer(
    conn: &Db<'_>,
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
