//! Reading a Messages API request the way the offline model needs it: the
//! text of a message, the user's own prompt, tool results, the working
//! directory Claude Code names and the `<g2-memory>` blocks g2 injected.
//! Everything is read leniently: a field of the wrong shape reads as
//! absent.

use serde_json::Value;

/// Result of one earlier tool call, as found in the conversation.
#[derive(Debug, Clone)]
pub(super) struct Outcome {
    pub(super) text: String,
    pub(super) is_error: bool,
}

/// Text of a message content (a string or blocks), text blocks only.
pub(super) fn texts(content: &Value) -> Vec<&str> {
    match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        _ => Vec::new(),
    }
}

/// The user's own words in a message: the last text block that is not a
/// wrapper Claude Code adds (`<system-reminder>`, `<local-command-…>`).
pub(super) fn prompt_of(msg: &Value) -> Option<&str> {
    texts(&msg["content"])
        .into_iter()
        .rev()
        .find(|t| !t.trim_start().starts_with("<system-reminder>"))
}

pub(super) fn tool_results(msg: &Value) -> Vec<(&str, Outcome)> {
    let Some(blocks) = msg["content"].as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                c => texts(c).join("\n"),
            };
            let id = b["tool_use_id"].as_str().unwrap_or("");
            (
                id,
                Outcome {
                    text,
                    is_error: b["is_error"].as_bool().unwrap_or(false),
                },
            )
        })
        .collect()
}

pub(super) fn is_prompt(msg: &Value) -> bool {
    msg["role"] == "user" && tool_results(msg).is_empty()
}

/// Working directory from Claude Code's environment section (`Primary
/// working directory: /path`), found in the system prompt or, in 2.1.x, in a
/// `role: "system"` entry of `messages`.
pub(super) fn working_directory(req: &Value) -> String {
    let mut sources: Vec<&str> = texts(&req["system"]);
    if let Some(messages) = req["messages"].as_array() {
        for m in messages.iter().filter(|m| m["role"] == "system") {
            sources.extend(texts(&m["content"]));
        }
    }
    for block in sources {
        for line in block.lines() {
            let l = line.trim().trim_start_matches("- ");
            if let Some(i) = l.to_ascii_lowercase().find("working directory:") {
                let path = l[i + "working directory:".len()..].trim();
                if path.starts_with('/') {
                    return path.to_string();
                }
            }
        }
    }
    g2_core::wire::GROUP_DIR.into()
}

/// The texts of the chat messages in a routed prompt, one per line and
/// unescaped (after g2's own note, if any); any other prompt (someone
/// else's note before the envelope included) as it is.
pub(super) fn unwrap_messages(prompt: &str) -> std::borrow::Cow<'_, str> {
    match g2_core::envelope::read(prompt) {
        // g2's own note (a turn run again after its host stopped) is for
        // a real model; the messages' commands still run.
        Some(env) if env.preface.is_empty() || env.preface.starts_with("[g2:") => {
            env.texts().into()
        }
        _ => prompt.into(),
    }
}

/// Every `<g2-memory>…</g2-memory>` block anywhere in the request (system
/// prompt, system entries, messages), in order, or a line saying there is
/// none: what g2 injected, shown as it reached the model.
pub(super) fn injected_memory(req: &Value) -> String {
    const OPEN: &str = "<g2-memory>";
    const CLOSE: &str = "</g2-memory>";
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => {
                let mut rest = s.as_str();
                while let Some(i) = rest.find(OPEN) {
                    let after = &rest[i..];
                    let end = after.find(CLOSE).map_or(after.len(), |j| j + CLOSE.len());
                    let block = after[..end].to_string();
                    if !out.contains(&block) {
                        out.push(block);
                    }
                    rest = &after[end..];
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut blocks = Vec::new();
    walk(req, &mut blocks);
    if blocks.is_empty() {
        "g2:context: no memory was injected into this request".into()
    } else {
        format!("g2:context:\n{}", blocks.join("\n"))
    }
}
