//! Streaming parser for Claude Code's JSONL session transcripts.
//!
//! A transcript is one JSON object a line (see `docs/claude-code.md`,
//! "Transcripts"). Claude Code adds line types with every release, so the
//! parser is lenient by construction: it reads each line into a small
//! borrowed view that names only the fields it needs (serde skips the rest
//! without building values), skips line types it does not know, counts
//! lines that are not JSON or too long, and never fails on content. Only I/O errors are errors.
//!
//! What comes out is the conversation a person had: the user's and the
//! assistant's text turns in order. Tool calls, tool results, thinking, meta
//! lines and local-command noise are left out.
//!
//! **Subagents.** A subagent's lines carry `isSidechain: true`. In a main
//! transcript (older Claude Code wrote them inline) they are left out and
//! counted in [`Stats::sidechain`]. A subagent's own transcript
//! (`<session>/subagents/agent-*.jsonl`, or an older sibling
//! `agent-*.jsonl`) has nothing but sidechain message lines: a file whose
//! every message line is a sidechain is read as one, and its sidechain is
//! the conversation (the parent's prompt as the user turn, the subagent's
//! answers as the assistant's), with [`Transcript::subagent`] set. The
//! choice is made in one pass: sidechain entries are collected beside the
//! main ones only until the first main-chain message line, then dropped.
//! Consecutive text of one role is one turn of several parts, so an
//! assistant that speaks, calls three tools and speaks again is one turn of
//! two parts. A compaction (the
//! `compact_boundary` line and the `isCompactSummary` user line that follows)
//! is an entry of its own, never user speech.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Lines longer than this are skipped (and counted) without being buffered.
/// Real lines reach a few MB (base64 images); 64 MiB leaves a wide margin
/// while bounding memory on a hostile file.
pub const DEFAULT_MAX_LINE: usize = 64 << 20;

/// One step of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// What the user said: the texts of consecutive user messages.
    User(Vec<String>),
    /// What the assistant said: the texts of consecutive assistant messages
    /// (one API message split over several lines gives several parts).
    Assistant(Vec<String>),
    /// The conversation was compacted here.
    Compaction(Compaction),
}

impl Entry {
    /// A turn's text, its parts separated by blank lines.
    pub fn text(&self) -> Option<String> {
        match self {
            Entry::User(p) | Entry::Assistant(p) => Some(p.join("\n\n")),
            Entry::Compaction(_) => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compaction {
    /// `manual` or `auto`, when the boundary line says.
    pub trigger: Option<String>,
    /// Tokens in the context before compaction, when the boundary line says.
    pub pre_tokens: Option<u64>,
    /// The summary Claude Code carried over (the `isCompactSummary` line).
    pub summary: Option<String>,
}

/// Counts of what the parser saw, for diagnostics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Non-empty lines read.
    pub lines: u64,
    /// Lines that were not valid JSON objects of a shape we understand.
    pub malformed: u64,
    /// Lines over the length limit, skipped unread.
    pub oversized: u64,
    /// Lines of a type this parser does not use (progress, snapshots, …).
    pub skipped: u64,
    /// Message lines seen twice (same `uuid`) and counted once.
    pub duplicates: u64,
    /// Sidechain (subagent) message lines left out of a main transcript;
    /// 0 for a subagent's own transcript, whose sidechain is read.
    pub sidechain: u64,
    /// Bytes read.
    pub bytes: u64,
}

/// When an entry was said: the first and the last of its lines' times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: chrono::DateTime<chrono::Utc>,
    pub last: chrono::DateTime<chrono::Utc>,
}

/// Widens entry `i`'s span in `times` by `at` (the list grows to hold it).
fn note_time(times: &mut Vec<Option<Span>>, i: usize, at: Option<chrono::DateTime<chrono::Utc>>) {
    if times.len() <= i {
        times.resize(i + 1, None);
    }
    if let Some(at) = at {
        times[i] = Some(match times[i] {
            Some(s) => Span {
                first: s.first.min(at),
                last: s.last.max(at),
            },
            None => Span {
                first: at,
                last: at,
            },
        });
    }
}

/// A line's `timestamp`, read.
fn line_time(ts: Option<&str>) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(ts?)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// A parsed transcript.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    pub entries: Vec<Entry>,
    /// Claude Code's own session summaries (`type: summary`), in file order.
    pub summaries: Vec<Summary>,
    /// The first `sessionId` seen on a line.
    pub session_id: Option<String>,
    /// The first `cwd` seen on a line.
    pub cwd: Option<String>,
    /// Earliest and latest `timestamp` seen (RFC 3339 strings compare in order
    /// only roughly; they are kept as written).
    pub first_timestamp: Option<String>,
    pub last_timestamp: Option<String>,
    /// When each entry was said, beside `entries` (same index): the
    /// earliest and latest `timestamp` of the lines it was made of; None
    /// for an entry whose lines carried none.
    pub times: Vec<Option<Span>>,
    pub stats: Stats,
    /// A subagent's own transcript: every message line was a sidechain, and
    /// the entries are the subagent's conversation.
    pub subagent: bool,
    /// The subagent's `agentId`, for a subagent's transcript.
    pub agent_id: Option<String>,
    /// `uuid`s of message lines, to tell whether a summary's `leafUuid`
    /// points into this file.
    uuids: HashSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    pub leaf_uuid: Option<String>,
}

impl Transcript {
    /// The session summary Claude Code wrote for this conversation: the last
    /// one whose `leafUuid` points into this file, else the last one.
    pub fn summary(&self) -> Option<&str> {
        self.summaries
            .iter()
            .rev()
            .find(|s| s.leaf_uuid.as_ref().is_some_and(|l| self.uuids.contains(l)))
            .or_else(|| self.summaries.last())
            .map(|s| s.text.as_str())
    }

    /// The first thing the user said.
    pub fn first_prompt(&self) -> Option<&str> {
        self.entries.iter().find_map(|e| match e {
            Entry::User(parts) => parts.first().map(String::as_str),
            _ => None,
        })
    }

    pub fn user_turns(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e, Entry::User(_)))
            .count()
    }

    pub fn assistant_turns(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e, Entry::Assistant(_)))
            .count()
    }

    pub fn compactions(&self) -> impl Iterator<Item = &Compaction> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Compaction(c) => Some(c),
            _ => None,
        })
    }
}

/// Parses a transcript file.
pub fn parse_file(path: &Path) -> io::Result<Transcript> {
    let file = std::fs::File::open(path)?;
    parse_reader(file, DEFAULT_MAX_LINE)
}

/// Parses a transcript from any reader, line by line, in bounded memory per
/// line (`max_line` bytes).
pub fn parse_reader<R: Read>(reader: R, max_line: usize) -> io::Result<Transcript> {
    let mut parser = Parser::default();
    for_each_line(reader, max_line, |line| match line {
        Line::Text(bytes) => parser.push_line(bytes),
        Line::Oversized => parser.transcript.stats.oversized += 1,
    })?;
    Ok(parser.finish())
}

/// Parses a transcript held in memory.
pub fn parse_bytes(bytes: &[u8]) -> Transcript {
    let mut parser = Parser::default();
    for line in bytes.split(|b| *b == b'\n') {
        parser.push_line(line);
    }
    parser.finish()
}

/// A line handed out by [`for_each_line`].
pub enum Line<'a> {
    Text(&'a [u8]),
    /// A line longer than the limit; its bytes were discarded as they came.
    Oversized,
}

/// Calls `f` for every line of `reader` without the trailing newline. Lines
/// longer than `max_line` are reported as [`Line::Oversized`] and never held
/// in memory whole.
pub fn for_each_line<R: Read>(
    reader: R,
    max_line: usize,
    mut f: impl FnMut(Line<'_>),
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(256 << 10, reader);
    let mut buf: Vec<u8> = Vec::new();
    let mut discarding = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if discarding {
                f(Line::Oversized);
            } else if !buf.is_empty() {
                f(Line::Text(&buf));
            }
            return Ok(());
        }
        let len = chunk.len();
        match memchr::memchr(b'\n', chunk) {
            Some(i) => {
                if discarding {
                    discarding = false;
                    f(Line::Oversized);
                } else if buf.is_empty() {
                    // The common case: the whole line is in the buffer.
                    if i > max_line {
                        f(Line::Oversized);
                    } else {
                        f(Line::Text(&chunk[..i]));
                    }
                } else if buf.len() + i > max_line {
                    buf.clear();
                    f(Line::Oversized);
                } else {
                    buf.extend_from_slice(&chunk[..i]);
                    f(Line::Text(&buf));
                    buf.clear();
                }
                reader.consume(i + 1);
            }
            None => {
                if !discarding {
                    if buf.len() + len > max_line {
                        buf = Vec::new();
                        discarding = true;
                    } else {
                        buf.extend_from_slice(chunk);
                    }
                }
                reader.consume(len);
            }
        }
    }
}

/// Incremental parser: feed it lines, then [`Parser::finish`].
#[derive(Default)]
pub struct Parser {
    transcript: Transcript,
    /// The sidechain's entries, kept while no main-chain message line has
    /// been seen (the file may be a subagent's own transcript).
    side: Vec<Entry>,
    /// When each of `side` was said.
    side_times: Vec<Option<Span>>,
    /// A message line not on a sidechain was seen: this is a main
    /// transcript and sidechain lines are left out.
    main_seen: bool,
}

impl Parser {
    pub fn push_line(&mut self, line: &[u8]) {
        let t = &mut self.transcript;
        t.stats.bytes += line.len() as u64 + 1;
        let line = trim_ascii(line);
        if line.is_empty() {
            return;
        }
        t.stats.lines += 1;
        let raw: RawLine<'_> = match serde_json::from_slice(line) {
            Ok(r) => r,
            Err(_) => {
                t.stats.malformed += 1;
                return;
            }
        };
        if let Some(ts) = &raw.timestamp {
            if t.first_timestamp.is_none() {
                t.first_timestamp = Some(ts.to_string());
            }
            t.last_timestamp = Some(ts.to_string());
        }
        match raw.kind.as_deref() {
            Some("user") | Some("assistant") => self.message(raw),
            Some("summary") => match raw.summary {
                Some(text) if !text.trim().is_empty() => t.summaries.push(Summary {
                    text: text.trim().to_string(),
                    leaf_uuid: raw.leaf_uuid.map(Cow::into_owned),
                }),
                _ => t.stats.skipped += 1,
            },
            Some("system") if raw.subtype.as_deref() == Some("compact_boundary") => {
                let meta = raw.compact_metadata.unwrap_or_default();
                let c = Entry::Compaction(Compaction {
                    trigger: meta.trigger.map(Cow::into_owned),
                    pre_tokens: meta.pre_tokens,
                    summary: None,
                });
                // A boundary belongs to its chain; a main-chain one goes to
                // the sidechain too while the file may still be a
                // subagent's (whose boundary line may not be marked).
                let at = line_time(raw.timestamp.as_deref());
                if raw.is_sidechain == Some(true) {
                    if self.main_seen {
                        t.stats.skipped += 1;
                    } else {
                        self.side.push(c);
                        note_time(&mut self.side_times, self.side.len() - 1, at);
                    }
                } else {
                    if !self.main_seen {
                        self.side.push(c.clone());
                        note_time(&mut self.side_times, self.side.len() - 1, at);
                    }
                    t.entries.push(c);
                    note_time(&mut t.times, t.entries.len() - 1, at);
                }
            }
            _ => t.stats.skipped += 1,
        }
    }

    fn message(&mut self, raw: RawLine<'_>) {
        let t = &mut self.transcript;
        if let Some(uuid) = &raw.uuid
            && !t.uuids.insert(uuid.to_string())
        {
            t.stats.duplicates += 1;
            return;
        }
        if t.session_id.is_none() {
            t.session_id = raw.session_id.map(Cow::into_owned);
        }
        if t.cwd.is_none() {
            t.cwd = raw.cwd.map(Cow::into_owned);
        }
        let sidechain = raw.is_sidechain == Some(true);
        if sidechain {
            t.stats.sidechain += 1;
            if self.main_seen {
                return;
            }
            if t.agent_id.is_none() {
                t.agent_id = raw.agent_id.map(Cow::into_owned);
            }
        } else if !self.main_seen {
            self.main_seen = true;
            self.side = Vec::new();
            self.side_times = Vec::new();
        }
        let at = line_time(raw.timestamp.as_deref());
        let (entries, times) = if sidechain {
            (&mut self.side, &mut self.side_times)
        } else {
            (&mut t.entries, &mut t.times)
        };
        if raw.is_meta == Some(true) {
            return;
        }
        let Some(content) = raw.message.and_then(|m| m.content) else {
            return;
        };
        let is_user = raw.kind.as_deref() == Some("user");
        let content = match content {
            // A prompt's own blocks only: what was added for the model
            // beside them (g2's memory in a reminder block) is not the
            // user speaking.
            Content::Texts(mut parts) if is_user && parts.len() > 1 => {
                parts.retain(|p| !is_noise(p.trim_start()));
                Content::Texts(parts)
            }
            c => c,
        };
        let text = match content {
            Content::Text(s) => s,
            Content::Texts(mut parts) if parts.len() == 1 => parts.swap_remove(0),
            Content::Texts(parts) if parts.is_empty() => return,
            Content::Texts(parts) => Cow::Owned(parts.join("\n\n")),
        };
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if is_user && raw.is_compact_summary == Some(true) {
            // Claude Code wraps bookkeeping for the model into the summary;
            // it is not part of what a reader wants.
            let text = strip_reminders(text);
            let text = text.trim();
            // The summary belongs to the boundary just before it; a summary
            // without a boundary (older versions) gets an entry of its own.
            match entries.last_mut() {
                Some(Entry::Compaction(c)) if c.summary.is_none() => {
                    c.summary = Some(text.to_string());
                }
                _ => entries.push(Entry::Compaction(Compaction {
                    summary: Some(text.to_string()),
                    ..Compaction::default()
                })),
            }
            note_time(times, entries.len() - 1, at);
            return;
        }
        if is_user && is_noise(text) {
            return;
        }
        match (entries.last_mut(), is_user) {
            (Some(Entry::User(parts)), true) | (Some(Entry::Assistant(parts)), false) => {
                parts.push(text.to_string());
            }
            (_, true) => entries.push(Entry::User(vec![text.to_string()])),
            (_, false) => entries.push(Entry::Assistant(vec![text.to_string()])),
        }
        note_time(times, entries.len() - 1, at);
    }

    pub fn finish(self) -> Transcript {
        let mut t = self.transcript;
        t.times.resize(t.entries.len(), None);
        if !self.main_seen && t.stats.sidechain > 0 {
            // Every message line was a sidechain: a subagent's transcript.
            t.entries = self.side;
            t.times = self.side_times;
            t.subagent = true;
            t.stats.sidechain = 0;
        }
        t
    }
}

/// Removes `<system-reminder>…</system-reminder>` spans (an unclosed one
/// is kept: better too much text than lost text).
fn strip_reminders(text: &str) -> Cow<'_, str> {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    if !text.contains(OPEN) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let Some(len) = rest[start..].find(CLOSE) else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + len + CLOSE.len()..];
        // Drop the blank line the span leaves behind.
        if out.ends_with('\n') {
            rest = rest.trim_start_matches(['\n', '\r']);
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// User-role text that is not the user speaking: interruption markers and
/// the echo of local slash commands.
fn is_noise(text: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "[Request interrupted by user",
        "<command-name>",
        "<command-message>",
        "<command-args>",
        "<local-command-stdout>",
        "<local-command-stderr>",
        "<local-command-caveat>",
        "<task-notification>",
        "<system-reminder>",
        "Caveat: The messages below were generated by the user while running local commands",
    ];
    PREFIXES.iter().any(|p| text.starts_with(p))
}

fn trim_ascii(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

mod raw;
use raw::{Content, RawLine};

#[cfg(test)]
mod tests;
