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

/// The `<g2-memory>` blocks g2 gave the model with this request, as they
/// reached it, or a line saying there is none: the session's (from its
/// start, in the system prompt or a `SessionStart` reminder) and the one
/// attached to the prompt being answered. Earlier prompts' blocks in the
/// history are not this request's, and only a real block counts: one that
/// opens on a line of its own, as g2 writes it (text that merely names
/// the tag, such as this command's help, is not one).
pub(super) fn injected_memory(req: &Value) -> String {
    const OPEN: &str = "<g2-memory>\n";
    const CLOSE: &str = "</g2-memory>";
    fn blocks(s: &str, out: &mut Vec<String>) {
        let mut rest = s;
        while let Some(i) = rest.find(OPEN) {
            let after = &rest[i..];
            let Some(j) = after.find(CLOSE) else { break };
            let block = after[..j + CLOSE.len()].to_string();
            if !out.contains(&block) {
                out.push(block);
            }
            rest = &after[j + CLOSE.len()..];
        }
    }
    fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            Value::Object(o) => o.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    let mut session = Vec::new();
    strings(&req["system"], &mut session);
    let messages = req["messages"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for m in messages {
        let mut all = Vec::new();
        strings(&m["content"], &mut all);
        session.extend(all.into_iter().filter(|t| t.contains("SessionStart")));
    }
    for t in session {
        blocks(t, &mut found);
    }
    // The prompt being answered: the last user message with words of its own.
    if let Some(m) = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user" && prompt_of(m).is_some())
    {
        for t in texts(&m["content"]) {
            blocks(t, &mut found);
        }
    }
    if found.is_empty() {
        "g2:context: no memory was injected into this request".into()
    } else {
        format!("g2:context:\n{}", found.join("\n"))
    }
}
