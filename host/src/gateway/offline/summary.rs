//! The compaction summary: what the offline model answers when Claude Code
//! asks for a detailed summary of the conversation, built from the
//! messages it was sent.

use serde_json::Value;

use super::request::{is_prompt, prompt_of, tool_results};

/// A compaction summary in the shape Claude Code asks for, built from the
/// conversation: requests, tool calls with results, replies, current state.
pub(super) fn summarize(turns: &[&Value]) -> String {
    const KEEP: usize = 20;
    const ITEM: usize = 300;
    let short = |s: &str| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        match s.char_indices().nth(ITEM) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    };
    let body = &turns[..turns.len().saturating_sub(1)];
    let (mut requests, mut calls, mut replies) = (Vec::new(), Vec::new(), Vec::new());
    let mut pending: Vec<(String, String)> = Vec::new();
    for m in body {
        if m["role"] == "user" {
            for (id, o) in tool_results(m) {
                if let Some(i) = pending.iter().position(|(pid, _)| pid == id) {
                    let (_, call) = pending.remove(i);
                    let status = if o.is_error { "failed" } else { "returned" };
                    calls.push(format!("{call} {status}: {}", short(&o.text)));
                }
            }
            if is_prompt(m)
                && let Some(p) = prompt_of(m)
                && !p.trim().is_empty()
            {
                requests.push(short(p));
            }
        } else if let Some(blocks) = m["content"].as_array() {
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => replies.push(short(b["text"].as_str().unwrap_or(""))),
                    Some("tool_use") => pending.push((
                        b["id"].as_str().unwrap_or("").to_string(),
                        format!(
                            "{}({})",
                            b["name"].as_str().unwrap_or("?"),
                            short(&b["input"].to_string())
                        ),
                    )),
                    _ => {}
                }
            }
        } else if let Some(t) = m["content"].as_str() {
            replies.push(short(t));
        }
    }
    let list = |items: &[String]| -> String {
        if items.is_empty() {
            return "   - (none)\n".into();
        }
        let skip = items.len().saturating_sub(KEEP);
        let mut s = String::new();
        if skip > 0 {
            s.push_str(&format!("   - ({skip} earlier items omitted)\n"));
        }
        for i in &items[skip..] {
            s.push_str(&format!("   - {i}\n"));
        }
        s
    };
    let last = requests.last().cloned().unwrap_or_else(|| "(none)".into());
    format!(
        "<analysis>\nThe conversation has {} user requests, {} tool calls and {} assistant replies. \
         This summary was written by g2's offline model.\n</analysis>\n\n<summary>\n\
         1. Primary Request and Intent:\n{}\
         2. Tool Calls and Results:\n{}\
         3. Assistant Replies:\n{}\
         4. Current State:\n   The most recent request was: {}\n</summary>",
        requests.len(),
        calls.len(),
        replies.len(),
        list(&requests),
        list(&calls),
        list(&replies),
        last
    )
}
