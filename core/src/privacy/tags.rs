//! Private spans: [`STRIPPED_TAGS`] elements removed with their content.
//!
//! A tag is found in every spelling a person, an agent or an encoder
//! gives it: the name in any case; whitespace or attributes after it
//! (`<private >`, `<private note="x">`, `<private\n>`); whitespace before
//! it when a `>` follows the name (`< private >`, `<\nprivate>`); a closing
//! tag with whitespace (`</ private >`); and its angle brackets
//! JSON-escaped at any depth (`\u003cprivate\u003e`, `\\u003c…`, any case
//! of the hex digits, escaped whitespace `\n` counting as whitespace) or as
//! HTML entities (`&lt;private&gt;`, `&#60;`, `&#x3c;`), in any mix. So the
//! order of unescaping and cleaning no longer decides what survives.

use std::borrow::Cow;

/// Tags whose content never reaches storage.
pub const STRIPPED_TAGS: &[&str] = &["private", "g2-memory", "system-reminder"];

/// The tag g2 wraps the memory it injects into a prompt in.
pub const MEMORY_TAG: &str = "g2-memory";

/// Removes every [`STRIPPED_TAGS`] element with its content (an unclosed
/// one: to the end of the text). Borrowed when there was nothing to remove.
///
/// A tag is its name in any case, then `>`, `/` or whitespace: `<private>`,
/// `<private >`, `<Private note="x">` and `<private\n>` all open one, and
/// `<private` with no `>` after it makes the rest of the text private;
/// `< private >` with whitespace before the name opens one only with its
/// `>` (so `a < private b` is text). A closing tag may have whitespace
/// (`</private >`, `</ private>`). The same tag opened inside one is
/// counted, so `<private>a<private>b</private>c</private>` is removed
/// whole. Escaped angle brackets count as angle brackets (module doc).
pub fn strip_tags(text: &str) -> Cow<'_, str> {
    if !maybe_tagged(text.as_bytes()) {
        return Cow::Borrowed(text);
    }
    let lower = text.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut at = 0;
    while let Some((start, tag, name_end)) = next_open(b, at) {
        let end = element_end(b, name_end, tag);
        out.push_str(&text[copied..start]);
        copied = end;
        at = end;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Whether `text` holds an angle bracket in some spelling: most text
/// does not, and is returned as it is without a lower-cased copy.
fn maybe_tagged(b: &[u8]) -> bool {
    memchr::memchr2(b'<', b'&', b).is_some()
        || memchr::memmem::find(b, b"003c").is_some()
        || memchr::memmem::find(b, b"003C").is_some()
}

/// Whether an opening (`<`) or closing (`>`) angle bracket starts at `i`
/// of the lower-cased text; its length.
fn bracket(b: &[u8], i: usize, open: bool) -> Option<usize> {
    let (c, hex, entity, dec, hexent): (u8, &[u8], &[u8], &[u8], &[u8]) = if open {
        (b'<', b"u003c", b"&lt;", b"&#60;", b"&#x3c;")
    } else {
        (b'>', b"u003e", b"&gt;", b"&#62;", b"&#x3e;")
    };
    let rest = &b[i..];
    match *rest.first()? {
        x if x == c => Some(1),
        b'\\' => {
            let run = rest.iter().take_while(|&&x| x == b'\\').count();
            rest[run..].starts_with(hex).then_some(run + hex.len())
        }
        b'&' => [entity, dec, hexent]
            .into_iter()
            .find(|e| rest.starts_with(e))
            .map(<[u8]>::len),
        _ => None,
    }
}

/// The length of whitespace at `i`: an ASCII space, tab or line break, or
/// one escaped in JSON (`\n`, `\\t`, …).
fn space(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        x if x.is_ascii_whitespace() => Some(1),
        b'\\' => {
            let run = b[i..].iter().take_while(|&&x| x == b'\\').count();
            matches!(b.get(i + run), Some(b'n' | b'r' | b't')).then_some(run + 1)
        }
        _ => None,
    }
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while let Some(n) = space(b, i) {
        i += n;
    }
    i
}

/// Candidate positions of an opening bracket at or after `from` (a run of
/// backslashes once, at its start: each is looked at once).
fn candidates(b: &[u8], from: usize) -> impl Iterator<Item = usize> + '_ {
    scan(b, from, b'<')
}

/// Positions of `c`, `\\` (once per run) and `&` at or after `from`.
fn scan(b: &[u8], from: usize, c: u8) -> impl Iterator<Item = usize> + '_ {
    let mut at = from;
    std::iter::from_fn(move || {
        let i = at + memchr::memchr3(c, b'\\', b'&', b.get(at..)?)?;
        at = past(b, i);
        Some(i)
    })
}

/// Just past the character at `i`, or past the run of backslashes there.
fn past(b: &[u8], i: usize) -> usize {
    i + b[i..].iter().take_while(|&&x| x == b'\\').count().max(1)
}

/// The first opening tag of [`STRIPPED_TAGS`] at or after `from`: its
/// offset, its name and where the name ends.
fn next_open(b: &[u8], from: usize) -> Option<(usize, &'static str, usize)> {
    candidates(b, from).find_map(|i| opens(b, i).map(|(tag, end)| (i, tag, end)))
}

/// The stripped tag an opening tag at `i` names, and where its name ends.
fn opens(b: &[u8], i: usize) -> Option<(&'static str, usize)> {
    let after_bracket = i + bracket(b, i, true)?;
    let name = skip_space(b, after_bracket);
    let spaced = name > after_bracket;
    STRIPPED_TAGS.iter().copied().find_map(|tag| {
        if !b[name..].starts_with(tag.as_bytes()) {
            return None;
        }
        let end = name + tag.len();
        let bounded = if spaced {
            // `< private >`: only with its `>` right after the name.
            bracket(b, skip_space(b, end), false).is_some()
        } else {
            b.get(end).is_none_or(|&x| {
                x == b'>' || x == b'/' || x == b'\\' || x == b'&' || x.is_ascii_whitespace()
            })
        };
        bounded.then_some((tag, end))
    })
}

/// The length of a closing tag of `tag` at `i`, if there is one.
fn closes(b: &[u8], i: usize, tag: &str) -> Option<usize> {
    let mut j = skip_space(b, i + bracket(b, i, true)?);
    j += b[j..].iter().take_while(|&&x| x == b'\\').count();
    if b.get(j) != Some(&b'/') {
        return None;
    }
    let j = skip_space(b, j + 1);
    if !b[j..].starts_with(tag.as_bytes()) {
        return None;
    }
    let j = skip_space(b, j + tag.len());
    bracket(b, j, false).map(|n| j + n - i)
}

/// The end of the first closing bracket at or after `from`.
fn bracket_end(b: &[u8], from: usize) -> Option<usize> {
    scan(b, from, b'>').find_map(|i| bracket(b, i, false).map(|n| i + n))
}

/// Where the element whose name ends at `name_end` ends: after its
/// matching closing tag, or at the end of the text.
fn element_end(b: &[u8], name_end: usize, tag: &str) -> usize {
    let Some(mut at) = bracket_end(b, name_end) else {
        return b.len();
    };
    let mut depth = 1;
    while let Some(i) = candidates(b, at).next() {
        if let Some(len) = closes(b, i, tag) {
            depth -= 1;
            if depth == 0 {
                return i + len;
            }
            at = i + len;
        } else if let Some((_, end)) = opens(b, i).filter(|&(t, _)| t == tag) {
            depth += 1;
            match bracket_end(b, end) {
                Some(e) => at = e,
                None => return b.len(),
            }
        } else {
            at = past(b, i);
        }
    }
    b.len()
}

/// Whether `text` holds something, and nothing of it is left once the tags
/// are stripped: a prompt that is entirely private stores nothing at all.
pub fn entirely_private(text: &str) -> bool {
    !text.trim().is_empty() && strip_tags(text).trim().is_empty()
}
