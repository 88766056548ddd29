//! An [`Answer`] as the Messages API sends it: one JSON message
//! ([`to_message`]) or a stream of Server-Sent Events ([`to_events`]),
//! with token counts estimated from sizes (4 bytes a token).

use serde_json::{Value, json};

use super::{Answer, Block};

/// Rough token count of a text (4 bytes a token), never 0.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4).max(1)
}

/// The answer as a non-streaming Messages API response.
pub fn to_message(a: &Answer, id: &str, model: &str, input_tokens: u64) -> Value {
    let content: Vec<Value> = a.blocks.iter().map(block_json).collect();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": a.stop_reason,
        "stop_sequence": null,
        "usage": { "input_tokens": input_tokens, "output_tokens": output_tokens(a) },
    })
}

fn block_json(b: &Block) -> Value {
    match b {
        Block::Text(t) => json!({ "type": "text", "text": t }),
        Block::ToolUse { id, name, input } => {
            json!({ "type": "tool_use", "id": id, "name": name, "input": input })
        }
    }
}

pub fn output_tokens(a: &Answer) -> u64 {
    estimate_tokens(
        a.blocks
            .iter()
            .map(|b| block_json(b).to_string().len())
            .sum(),
    )
}

/// The answer as Server-Sent Events, one string per event, in the order the
/// Messages API streams them. Text is sent in a few deltas, tool input as
/// one `input_json_delta`.
pub fn to_events(a: &Answer, id: &str, model: &str, input_tokens: u64) -> Vec<String> {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut out = vec![ev(
        "message_start",
        json!({ "type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": input_tokens, "output_tokens": 1 } } }),
    )];
    for (index, b) in a.blocks.iter().enumerate() {
        match b {
            Block::Text(t) => {
                out.push(ev(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index,
                    "content_block": { "type": "text", "text": "" } }),
                ));
                for piece in chunks(t, 3) {
                    out.push(ev(
                        "content_block_delta",
                        json!({ "type": "content_block_delta", "index": index,
                        "delta": { "type": "text_delta", "text": piece } }),
                    ));
                }
            }
            Block::ToolUse { id, name, input } => {
                out.push(ev(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index,
                    "content_block": { "type": "tool_use", "id": id, "name": name, "input": {} } }),
                ));
                out.push(ev(
                    "content_block_delta",
                    json!({ "type": "content_block_delta", "index": index,
                    "delta": { "type": "input_json_delta", "partial_json": input.to_string() } }),
                ));
            }
        }
        out.push(ev(
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": index }),
        ));
    }
    out.push(ev(
        "message_delta",
        json!({ "type": "message_delta",
        "delta": { "stop_reason": a.stop_reason, "stop_sequence": null },
        "usage": { "output_tokens": output_tokens(a) } }),
    ));
    out.push(ev("message_stop", json!({ "type": "message_stop" })));
    out
}

/// Splits text into at most `n` pieces on character boundaries.
fn chunks(s: &str, n: usize) -> Vec<&str> {
    let count = s.chars().count();
    if count == 0 {
        return vec![""];
    }
    let per = count.div_ceil(n);
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .nth(per)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}
