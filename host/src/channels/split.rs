//! Splitting the agent's markdown into the parts a platform takes, for
//! every channel with a length limit (Telegram's, WhatsApp's).
//!
//! Splitting keeps markdown blocks whole (paragraphs, lists, code blocks)
//! while a part `fits` (the platform's own test: its limit, as it counts,
//! for the text as formatted and as plain source). A block longer than
//! that alone is cut at line ends, then at spaces; a fenced code block's
//! pieces each get their own fences. `max` is the limit in characters,
//! which sizes the pieces tried.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag};

/// The markdown a channel formats (the same extensions everywhere).
pub fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// A platform's limit on one part: at most `max` as the platform counts
/// (`count`), both formatted (`format`) and as the plain source it falls
/// back to.
#[derive(Clone, Copy)]
pub struct Limit {
    pub max: usize,
    pub count: fn(&str) -> usize,
    pub format: fn(&str) -> String,
}

impl Limit {
    /// In the order of the fields.
    pub const fn new(max: usize, count: fn(&str) -> usize, format: fn(&str) -> String) -> Self {
        Limit { max, count, format }
    }

    /// Whether a piece of markdown fits in one message, formatted or plain.
    pub fn fits(&self, markdown: &str) -> bool {
        (self.count)(markdown) <= self.max && (self.count)(&(self.format)(markdown)) <= self.max
    }

    /// The markdown split into the parts it is sent as, in order; the same
    /// text always gives the same parts.
    pub fn split(&self, markdown: &str) -> Vec<String> {
        split(markdown, self.max, &|s| self.fits(s))
    }
}

/// Length in characters (Unicode scalar values).
pub fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The markdown split into parts that each `fits` (a platform's limit of
/// `max` characters, as formatted and as plain text), in order; the same
/// text always gives the same parts.
pub fn split(markdown: &str, max: usize, fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    let markdown = markdown.trim();
    if fits(markdown) {
        return vec![markdown.to_string()];
    }
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    for block in blocks(markdown) {
        let joined = if current.is_empty() {
            block.to_string()
        } else {
            format!("{current}\n\n{block}")
        };
        if fits(&joined) {
            current = joined;
            continue;
        }
        if !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        if fits(block) {
            current = block.to_string();
        } else {
            parts.extend(cut(block, max, fits));
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// The top-level blocks of the markdown, as slices of it.
fn blocks(markdown: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(_) => {
                if depth == 0 {
                    start = range.start;
                }
                depth += 1;
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    out.push(markdown[start..range.end].trim_end());
                }
            }
            // A rule, or HTML at the top level.
            _ if depth == 0 => out.push(markdown[range].trim_end()),
            _ => {}
        }
    }
    out.retain(|b| !b.trim().is_empty());
    out
}

/// The fence of a fenced code block (its opening line, and the closing
/// fence), as the parser sees it.
fn fence_of(block: &str) -> Option<(String, String)> {
    let fenced = matches!(
        Parser::new_ext(block, options()).next(),
        Some(Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))))
    );
    if !fenced {
        return None;
    }
    let first = block.lines().next()?.trim_start();
    let mark = first.chars().next()?;
    let run: String = first.chars().take_while(|c| *c == mark).collect();
    Some((first.to_string(), run))
}

/// A block too long for one message, in pieces that fit.
fn cut(block: &str, max: usize, fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    let (open, inner, close) = match fence_of(block) {
        Some((first, run)) => {
            let body = block.split_once('\n').map_or("", |(_, b)| b).trim_end();
            let body = body.strip_suffix(run.as_str()).unwrap_or(body);
            (format!("{first}\n"), body, format!("\n{run}"))
        }
        None => (String::new(), block, String::new()),
    };
    // A fence line too long to fit with anything: the text without it.
    let (open, close) = if fits(&format!("{open}x{close}")) {
        (open, close)
    } else {
        (String::new(), String::new())
    };
    let wrap = |s: &str| format!("{open}{s}{close}");
    let mut pieces = Vec::new();
    let mut current = String::new();
    for word in pieces_of(inner, max) {
        let joined = format!("{current}{word}");
        if fits(&wrap(&joined)) {
            current = joined;
            continue;
        }
        if !current.trim().is_empty() {
            pieces.push(wrap(current.trim_end()));
        }
        current.clear();
        // A single word too long for a message: cut it by characters,
        // always at least one (escaping can triple a character's length).
        let mut rest = word;
        while !rest.is_empty() && !fits(&wrap(rest)) {
            let mut n = rest.len().min(max / 2);
            while n > 0 && !(rest.is_char_boundary(n) && fits(&wrap(&rest[..n]))) {
                n = if n > 64 { n / 2 } else { n - 1 };
            }
            if n == 0 {
                n = rest.chars().next().map_or(rest.len(), char::len_utf8);
            }
            pieces.push(wrap(&rest[..n]));
            rest = &rest[n..];
        }
        current = rest.to_string();
    }
    if !current.trim().is_empty() {
        pieces.push(wrap(current.trim_end()));
    }
    pieces
}

/// Lines (with their ends) of a text, and the words of a line too long.
fn pieces_of(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.encode_utf16().count() <= max / 2 {
            out.push(line);
        } else {
            out.extend(line.split_inclusive(' '));
        }
    }
    out
}

/// Checks a platform's splitting of `long` (a text over its limit): more
/// than one part, each within the limit, joined the text again, and the
/// same parts every time; a short text is one part.
#[cfg(test)]
pub(crate) fn assert_splits_whole(limit: &Limit, long: &str) -> Vec<String> {
    let parts = limit.split(long);
    assert!(parts.len() > 1, "{}", parts.len());
    for p in &parts {
        assert!(limit.fits(p), "{p:.40}");
    }
    assert_eq!(parts.join("\n\n"), long.trim());
    assert_eq!(
        limit.split(long),
        parts,
        "the same text splits the same way"
    );
    assert_eq!(limit.split("short"), ["short"]);
    parts
}
