//! The offline model: g2's built-in, deterministic stand-in for a real model.
//! It needs no network and no account, and is good enough to drive the real
//! Claude Code CLI through every g2 feature.
//!
//! Its whole behaviour is a function of the request ([`answer`]):
//! - A request its [`Delegate`] takes is answered by it: the host wires in
//!   memory extraction's (`memory::extract::model::answer_offline`), so an
//!   extraction request gets the observations or summary the offline rules
//!   find, as the JSON asked for. The gateway itself knows nothing of
//!   memory.
//! - A compaction request (Claude Code's "create a detailed summary of the
//!   conversation" prompt) gets an `<analysis>`/`<summary>` reply built from
//!   the messages it was sent.
//! - The newest user prompt is read for command lines `g2:<command> <args>`
//!   (the command language, documented in docs/gateway.md). Each command becomes
//!   one or more tool calls, made one per turn, in order. Which step comes
//!   next is worked out from the tool results already in the conversation,
//!   so the model keeps no state between requests.
//! - When all commands are done, the reply is text that contains each
//!   result, and the turn ends.
//! - A prompt without commands gets a short reply quoting it.
//!
//! Files: `commands.rs` reads the command language, `script.rs` works out
//! a command's next tool call from the results so far, `request.rs` reads
//! what it needs out of the request JSON, `summary.rs` writes the
//! compaction summary, `reply.rs` encodes an answer as a Messages API
//! response or event stream; this file holds [`answer`] and the
//! [`Offline`] provider.

mod commands;
mod reply;
mod request;
mod script;
mod summary;

use axum::http::{HeaderValue, StatusCode, header};
use bytes::Bytes;
use serde_json::Value;

use futures_util::future::BoxFuture;

use super::provider::{ModelRequest, Provider, Reply};
pub use commands::{COMMANDS, Command, parse_commands};

/// The container paths of the files a routed prompt's envelope names.
fn attachment_paths(prompt: &str) -> Vec<String> {
    g2_core::envelope::read(prompt)
        .map(|env| {
            env.messages
                .into_iter()
                .flat_map(|m| m.files)
                .filter(|f| !f.path.is_empty())
                .map(|f| f.path)
                .collect()
        })
        .unwrap_or_default()
}
pub use reply::{estimate_tokens, output_tokens, to_events, to_message};

use commands::label;
use request::{
    injected_memory, is_prompt, prompt_of, texts, tool_results, unwrap_messages, working_directory,
};
use script::{Next, next_step};
use summary::summarize;

/// One content block of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

/// A complete assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub blocks: Vec<Block>,
    /// `end_turn` or `tool_use`.
    pub stop_reason: &'static str,
}

impl Answer {
    fn text(s: String) -> Self {
        Answer {
            blocks: vec![Block::Text(s)],
            stop_reason: "end_turn",
        }
    }
}

/// Longest piece of a prompt or tool result repeated back.
const QUOTE_CHARS: usize = 2_000;

/// What Claude Code sends when it compacts a conversation.
const COMPACTION_MARKER: &str = "detailed summary of the conversation";

/// Why the offline model cannot take a request (a 400 answer) or a command
/// (answered in words); the text says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Refusal(why.to_string())
    }
}

/// Answers one Messages API request by the offline model's own rules (a
/// [`Delegate`] is asked first, by [`Offline`]).
pub fn answer(req: &Value) -> Result<Answer, Refusal> {
    let messages = req["messages"]
        .as_array()
        .ok_or("messages: an array is required")?;
    // Claude Code puts `role: "system"` entries between the turns.
    let turns: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .collect();
    let last_user = turns
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .ok_or("messages: no user message")?;
    if texts(&last_user["content"])
        .iter()
        .any(|t| t.contains(COMPACTION_MARKER))
    {
        return Ok(Answer::text(summarize(&turns)));
    }
    let Some(start) = turns.iter().rposition(|m| is_prompt(m)) else {
        return Ok(Answer::text(
            "Offline model: there is no prompt to answer.".into(),
        ));
    };
    let raw = prompt_of(turns[start]).unwrap_or("").trim();
    let prompt = unwrap_messages(raw);
    let prompt = prompt.trim();
    let commands: Vec<Command> = parse_commands(prompt)
        .into_iter()
        .map(|c| match c {
            Command::Attachments(_) => Command::Attachments(attachment_paths(raw)),
            c => c,
        })
        .collect();
    if commands.is_empty() {
        return Ok(Answer::text(format!(
            "Offline model (g2) received: \"{}\"",
            clip(prompt)
        )));
    }

    // Results of the calls made since the prompt, in call order.
    let mut outcomes = Vec::new();
    for m in &turns[start + 1..] {
        outcomes.extend(tool_results(m).into_iter().map(|(_, o)| o));
    }
    let offered: Vec<&str> = req["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    tracing::trace!(tools = ?offered, "offline model: tools offered");
    let cwd = working_directory(req);
    let mut used = 0;
    let mut lines = Vec::new();
    for cmd in &commands {
        if *cmd == Command::Context {
            lines.push(injected_memory(req));
            continue;
        }
        let first = used;
        loop {
            match next_step(cmd, &outcomes[first..used], &cwd) {
                Next::Done(line) => {
                    lines.push(line);
                    break;
                }
                Next::Call { name, .. } if !offered.contains(&name.as_str()) => {
                    lines.push(format!(
                        "{}: the tool {name} is not available here",
                        label(cmd)
                    ));
                    break;
                }
                Next::Call { .. } if used < outcomes.len() => used += 1,
                Next::Call { name, input } => {
                    let id = format!("toolu_g2{}", uuid::Uuid::new_v4().simple());
                    return Ok(Answer {
                        blocks: vec![Block::ToolUse { id, name, input }],
                        stop_reason: "tool_use",
                    });
                }
            }
        }
    }
    Ok(Answer::text(lines.join("\n")))
}

/// `s` trimmed and cut to [`QUOTE_CHARS`] characters (`…` marks a cut).
fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Answers the requests another part of the host makes of the offline
/// model (its text, or None when the request is not one of them); given
/// when the host is wired.
pub type Delegate = fn(&Value) -> Option<String>;

/// The offline provider.
pub struct Offline {
    model: Option<String>,
    delegate: Option<Delegate>,
}

impl Offline {
    pub fn new(model: Option<String>) -> Self {
        Offline {
            model,
            delegate: None,
        }
    }

    /// Asks `delegate` first, before the offline rules.
    #[must_use]
    pub fn with_delegate(mut self, delegate: Delegate) -> Self {
        self.delegate = Some(delegate);
        self
    }

    /// [`answer`], after the delegate.
    fn answer(&self, req: &Value) -> Result<Answer, Refusal> {
        match self.delegate.and_then(|d| d(req)) {
            Some(text) => Ok(Answer::text(text)),
            None => answer(req),
        }
    }

    fn reply(&self, req: &ModelRequest, count_only: bool) -> Reply {
        let value: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                return Reply::error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    format!("body: {e}"),
                );
            }
        };
        let input_tokens = estimate_tokens(req.body.len());
        if count_only {
            return Reply::full(
                StatusCode::OK,
                "application/json",
                serde_json::json!({ "input_tokens": input_tokens }).to_string(),
            );
        }
        let answer = match self.answer(&value) {
            Ok(a) => a,
            Err(Refusal(msg)) => {
                return Reply::error(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
            }
        };
        let model = self.model.clone().unwrap_or_else(|| req.model.clone());
        let id = format!("msg_g2{}", uuid::Uuid::new_v4().simple());
        if req.stream {
            let events = to_events(&answer, &id, &model, input_tokens);
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            let body = futures_util::stream::iter(events.into_iter().map(|e| Ok(Bytes::from(e))));
            Reply {
                status: StatusCode::OK,
                headers,
                body: Box::pin(body),
            }
        } else {
            let msg = to_message(&answer, &id, &model, input_tokens);
            Reply::full(StatusCode::OK, "application/json", msg.to_string())
        }
    }
}

/// The offline model's provider name, as usage rows record it.
pub const NAME: &str = "offline";

impl Provider for Offline {
    fn name(&self) -> &'static str {
        NAME
    }

    fn messages(&self, req: ModelRequest) -> BoxFuture<'_, Reply> {
        let r = self.reply(&req, false);
        Box::pin(async move { r })
    }

    fn count_tokens(&self, req: ModelRequest) -> BoxFuture<'_, Reply> {
        let r = self.reply(&req, true);
        Box::pin(async move { r })
    }
}

#[cfg(test)]
mod tests;
