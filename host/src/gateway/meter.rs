//! Reads token usage out of a response while relaying it, without holding
//! the response back: each chunk is passed on as is, and only lines that
//! carry a `usage` object are parsed.
//!
//! Server-sent events: `message_start` carries input (and cache) tokens,
//! `message_delta` the running output count; an `error` event marks the
//! answer failed. A plain JSON body (non-streaming answer) is kept up to
//! `MAX_JSON` bytes and its top-level `usage` read at the end.

use memchr::{memchr, memmem};
use serde::Deserialize;

use crate::gateway::usage::Tokens;

/// Longest SSE line or JSON body kept for reading usage.
const MAX_LINE: usize = 1 << 20;
const MAX_JSON: usize = 16 << 20;

#[derive(Deserialize, Default)]
struct Usage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    message: Option<Message>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Message {
    usage: Option<Usage>,
}

#[derive(Default)]
pub struct Meter {
    sse: bool,
    /// The unfinished last line (SSE) or the body so far (JSON).
    buf: Vec<u8>,
    /// The current line outgrew [`MAX_LINE`]: drop bytes until its end.
    skipping: bool,
    pub tokens: Tokens,
    /// The stream carried an `error` event.
    pub stream_error: bool,
}

impl Meter {
    pub fn new(sse: bool) -> Self {
        Meter {
            sse,
            ..Default::default()
        }
    }

    pub fn feed(&mut self, mut chunk: &[u8]) {
        if !self.sse {
            if self.buf.len() + chunk.len() <= MAX_JSON {
                self.buf.extend_from_slice(chunk);
            }
            return;
        }
        while let Some(nl) = memchr(b'\n', chunk) {
            let line = &chunk[..nl];
            if self.skipping {
                self.skipping = false;
            } else if self.buf.is_empty() {
                self.line(line);
            } else {
                let mut whole = std::mem::take(&mut self.buf);
                whole.extend_from_slice(line);
                self.line(&whole);
            }
            chunk = &chunk[nl + 1..];
        }
        if !self.skipping {
            if self.buf.len() + chunk.len() > MAX_LINE {
                self.buf.clear();
                self.skipping = true;
            } else {
                self.buf.extend_from_slice(chunk);
            }
        }
    }

    fn line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        // Text deltas are most lines: skip them without parsing.
        let has_usage = memmem::find(data, b"\"usage\"").is_some();
        if !has_usage && memmem::find(data, b"\"error\"").is_none() {
            return;
        }
        let Ok(ev) = serde_json::from_slice::<Event>(data) else {
            return;
        };
        match ev.kind.as_str() {
            "message_start" => {
                if let Some(u) = ev.message.and_then(|m| m.usage) {
                    self.apply(&u);
                }
            }
            "message_delta" => {
                if let Some(u) = ev.usage {
                    self.apply(&u);
                }
            }
            "error" => self.stream_error = true,
            _ => {}
        }
    }

    /// Counts in later events are running totals: the newest value wins.
    fn apply(&mut self, u: &Usage) {
        let t = &mut self.tokens;
        t.input = u.input_tokens.unwrap_or(t.input);
        t.output = u.output_tokens.unwrap_or(t.output);
        t.cache_read = u.cache_read_input_tokens.unwrap_or(t.cache_read);
        t.cache_creation = u.cache_creation_input_tokens.unwrap_or(t.cache_creation);
    }

    /// Call once the body is complete.
    pub fn finish(&mut self) {
        if self.sse {
            if !self.buf.is_empty() && !self.skipping {
                let last = std::mem::take(&mut self.buf);
                self.line(&last);
            }
        } else {
            #[derive(Deserialize)]
            struct Body {
                usage: Option<Usage>,
            }
            if let Ok(Body { usage: Some(u) }) = serde_json::from_slice::<Body>(&self.buf) {
                self.apply(&u);
            }
            self.buf = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"usage is \\\"usage\\\"\"}}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    #[test]
    fn reads_usage_whatever_the_chunking() {
        for size in [1, 2, 7, 64, STREAM.len()] {
            let mut m = Meter::new(true);
            for c in STREAM.as_bytes().chunks(size) {
                m.feed(c);
            }
            m.finish();
            assert_eq!(
                m.tokens,
                Tokens {
                    input: 25,
                    output: 15,
                    cache_read: 7,
                    cache_creation: 0
                },
                "chunk {size}"
            );
            assert!(!m.stream_error);
        }
    }

    #[test]
    fn error_events_and_json_bodies() {
        let mut m = Meter::new(true);
        m.feed(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n");
        m.finish();
        assert!(m.stream_error);

        let mut m = Meter::new(false);
        m.feed(b"{\"id\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,");
        m.feed(b"\"output_tokens\":4}}");
        m.finish();
        assert_eq!((m.tokens.input, m.tokens.output), (3, 4));
    }

    #[test]
    fn huge_lines_are_skipped_not_kept() {
        let mut m = Meter::new(true);
        m.feed(b"data: {\"type\":\"content_block_delta\",\"x\":\"");
        let big = vec![b'a'; MAX_LINE];
        m.feed(&big);
        m.feed(&big);
        assert!(m.buf.capacity() <= 2 * MAX_LINE);
        m.feed(b"\"}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n");
        m.finish();
        assert_eq!(m.tokens.output, 9);
    }
}
