//! The host's own credentials ([`super::Redactor::with_literals`]) in every
//! shape a paste gives them.
//!
//! Each credential is known in several **forms**: as it is; in hex (lower
//! and upper case); and in base64 (standard and URL-safe alphabets) at each
//! of the three alignments it can have inside a longer blob — of each, the
//! stable inner part: the characters that depend on the credential's bytes
//! alone, whatever stands before and after it (padding or not).
//!
//! The text is read as a **stream** in which separators do not count and
//! escapes are decoded: ASCII whitespace and line breaks, JSON-escaped ones
//! (`\n`, `\\t`, …), other backslashes, zero-width spaces and no-break
//! spaces are skipped; `%XX` is the byte it encodes (percent-encoding, full
//! or partial, any case). So `sk-ant- api03…`, a key split over two lines,
//! every character spaced out, `%73%6B%2D…`, a hex dump with spaces and
//! MIME-wrapped base64 are all the same form read through the stream.
//!
//! A **piece** of a form is redacted when it is at least 16 characters of
//! the credential (32 hex digits, 20 base64 characters), or the whole form
//! when it is shorter: what survives of a key the in-container hook cut at
//! a line break is still found. The span redacted runs from the piece's
//! first byte to its last in the text, separators included.
//!
//! **Cost.** One automaton (Aho-Corasick, a DFA) holds short grams of each
//! form taken at a stride such that every piece long enough holds one
//! whole; the text is walked once, byte by byte. Only a text where a gram
//! is seen is decoded a second time, into a copy in which each hit is
//! extended both ways against its form.

use std::borrow::Cow;

use aho_corasick::automaton::Automaton;
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, PatternID};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// The shortest piece of a credential, as it is, that is redacted.
const PLAIN_PIECE: usize = 16;
/// In hex digits.
const HEX_PIECE: usize = 32;
/// In base64 characters.
const BASE64_PIECE: usize = 20;

/// One form of a credential: its bytes and its shortest piece.
struct Form {
    bytes: Vec<u8>,
    piece: usize,
}

/// Every form of every literal, and the automaton over their grams.
pub(super) struct Literals {
    count: usize,
    forms: Vec<Form>,
    /// For each pattern of the automaton: its form and where it starts.
    grams: Vec<(usize, usize)>,
    dfa: DFA,
    /// A power of two above the longest form.
    ring: usize,
}

impl Literals {
    /// None when there is no literal (or the automaton cannot be built:
    /// it always can, for so few grams; the plain text is then only
    /// matched by the patterns).
    pub(super) fn new(literals: &[String]) -> Option<Literals> {
        let mut forms: Vec<Form> = Vec::new();
        for lit in literals {
            for form in forms_of(lit.as_bytes()) {
                if !forms.iter().any(|f| f.bytes == form.bytes) {
                    forms.push(form);
                }
            }
        }
        if forms.is_empty() {
            return None;
        }
        let mut grams = Vec::new();
        let mut patterns: Vec<&[u8]> = Vec::new();
        for (f, form) in forms.iter().enumerate() {
            // Every piece of `piece` bytes holds a whole gram of `len`
            // bytes starting at a multiple of `stride`.
            let len = (form.piece / 2).max(8).min(form.piece);
            let stride = form.piece - len + 1;
            for at in (0..=form.bytes.len() - len).step_by(stride) {
                grams.push((f, at));
                patterns.push(&form.bytes[at..at + len]);
            }
        }
        let dfa = DFA::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .ok()?;
        let ring = (forms.iter().map(|f| f.bytes.len()).max().unwrap_or(0) + 1).next_power_of_two();
        Some(Literals {
            count: literals.len(),
            forms,
            grams,
            dfa,
            ring,
        })
    }

    /// How many literals it was made of.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// `text` with every piece of every form replaced by `with`; borrowed
    /// when there was none.
    pub(super) fn redact<'a>(&self, text: &'a str, with: &str) -> Cow<'a, str> {
        let hits = self.hits(text.as_bytes());
        if hits.is_empty() {
            return Cow::Borrowed(text);
        }
        let spans = self.spans(text.as_bytes(), &hits);
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for (mut start, mut end) in spans {
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            while !text.is_char_boundary(end) {
                end += 1;
            }
            if start < copied {
                start = copied;
            }
            if start >= end {
                continue;
            }
            out.push_str(&text[copied..start]);
            out.push_str(with);
            copied = end;
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Each gram seen in the stream, as where to decode the text from to
    /// find the whole piece around it: the text offset, the gram's offset
    /// in the stream from there, and its pattern.
    fn hits(&self, text: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut hits = Vec::new();
        let Ok(mut sid) = self.dfa.start_state(Anchored::No) else {
            return hits;
        };
        // The text offsets of the last stream bytes: enough to go back
        // the length of any form.
        let mut ring = vec![0usize; self.ring];
        let mask = self.ring - 1;
        let mut n = 0;
        stream(text, |byte, start, _| {
            ring[n & mask] = start;
            n += 1;
            sid = self.dfa.next_state(Anchored::No, sid, byte);
            if self.dfa.is_special(sid) && self.dfa.is_match(sid) {
                for k in 0..self.dfa.match_len(sid) {
                    let pattern = self.dfa.match_pattern(sid, k).as_usize();
                    let (_, offset) = self.grams[pattern];
                    let gram = n - self.dfa.pattern_len(PatternID::must(pattern));
                    let from = gram.saturating_sub(offset);
                    hits.push((ring[from & mask], gram - from, pattern));
                }
            }
        });
        hits
    }

    /// The spans of the text (start, end; sorted, merged) that hold a
    /// piece of a form, from the grams seen: each is decoded again from
    /// where its piece may start and extended both ways against its form.
    fn spans(&self, text: &[u8], hits: &[(usize, usize, usize)]) -> Vec<(usize, usize)> {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut bytes = Vec::new();
        let mut at: Vec<(usize, usize)> = Vec::new();
        for &(from, gram, pattern) in hits {
            let (f, offset) = self.grams[pattern];
            let form = &self.forms[f];
            let len = self.dfa.pattern_len(PatternID::must(pattern));
            let want = gram + form.bytes.len() - offset;
            bytes.clear();
            at.clear();
            stream_while(&text[from..], |byte, start, end| {
                bytes.push(byte);
                at.push((from + start, from + end));
                bytes.len() < want
            });
            // The gram is bytes[gram..gram + len], form[offset..offset + len].
            let (mut lo, mut flo) = (gram, offset);
            while lo > 0 && flo > 0 && bytes[lo - 1] == form.bytes[flo - 1] {
                lo -= 1;
                flo -= 1;
            }
            let (mut hi, mut fhi) = (gram + len, offset + len);
            while hi < bytes.len() && fhi < form.bytes.len() && bytes[hi] == form.bytes[fhi] {
                hi += 1;
                fhi += 1;
            }
            if hi - lo >= form.piece {
                spans.push((at[lo].0, at[hi - 1].1));
            }
        }
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        merged
    }
}

/// The forms of one literal (separators taken out of it as the stream
/// takes them out of text).
fn forms_of(literal: &[u8]) -> Vec<Form> {
    let mut plain = Vec::with_capacity(literal.len());
    stream(literal, |b, _, _| plain.push(b));
    if plain.is_empty() {
        return Vec::new();
    }
    let hex_lower: Vec<u8> = plain
        .iter()
        .flat_map(|b| format!("{b:02x}").into_bytes())
        .collect();
    let hex_upper = hex_lower.to_ascii_uppercase();
    let mut forms = vec![
        Form {
            piece: PLAIN_PIECE.min(plain.len()),
            bytes: plain.clone(),
        },
        Form {
            piece: HEX_PIECE.min(hex_lower.len()),
            bytes: hex_lower,
        },
        Form {
            piece: HEX_PIECE.min(hex_upper.len()),
            bytes: hex_upper,
        },
    ];
    for align in 0..3 {
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let stable = stable_base64(&plain, align, engine);
            if stable.len() >= 8 {
                forms.push(Form {
                    piece: BASE64_PIECE.min(stable.len()),
                    bytes: stable,
                });
            }
        }
    }
    forms
}

/// The base64 characters that encode `bytes` alone when `align` bytes (0,
/// 1 or 2) of a 3-byte group stand before them: the characters touched by
/// the unknown bytes before and after are dropped.
fn stable_base64(bytes: &[u8], align: usize, engine: &base64::engine::GeneralPurpose) -> Vec<u8> {
    let mut padded = vec![0u8; align];
    padded.extend_from_slice(bytes);
    let encoded = engine.encode(&padded).into_bytes();
    // Bits of the unknown bytes reach into the first 0, 2 or 3 characters.
    let skip = [0, 2, 3][align];
    // Only whole 6-bit characters of known bits: the last may be partial.
    let whole = padded.len() * 8 / 6;
    encoded
        .get(skip..whole)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// How a byte of text reads in the stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Itself.
    Plain,
    /// Skipped.
    Separator,
    /// Looked at with what follows (`%`, `\`, the first byte of a
    /// zero-width or no-break space).
    Escape,
}

const CLASSES: [Class; 256] = {
    let mut c = [Class::Plain; 256];
    c[b' ' as usize] = Class::Separator;
    c[b'\t' as usize] = Class::Separator;
    c[b'\n' as usize] = Class::Separator;
    c[b'\r' as usize] = Class::Separator;
    c[0x0b] = Class::Separator;
    c[0x0c] = Class::Separator;
    c[b'%' as usize] = Class::Escape;
    c[b'\\' as usize] = Class::Escape;
    c[0xc2] = Class::Escape;
    c[0xe2] = Class::Escape;
    c[0xef] = Class::Escape;
    c
};

/// Zero-width spaces, joiners, the word joiner, the byte order mark and
/// the no-break space: invisible separators a paste may hold.
const INVISIBLE: &[&[u8]] = &[
    "\u{200b}".as_bytes(),
    "\u{200c}".as_bytes(),
    "\u{200d}".as_bytes(),
    "\u{2060}".as_bytes(),
    "\u{feff}".as_bytes(),
    "\u{a0}".as_bytes(),
];

/// Walks `text` as the stream (module doc): `f(byte, start, end)` for each
/// byte of it, with the span of the text it was read from.
#[inline]
fn stream(text: &[u8], mut f: impl FnMut(u8, usize, usize)) {
    stream_while(text, |b, s, e| {
        f(b, s, e);
        true
    });
}

/// [`stream`] until `f` says false.
#[inline]
fn stream_while(text: &[u8], mut f: impl FnMut(u8, usize, usize) -> bool) {
    let mut i = 0;
    let mut go = true;
    while go && let Some(&b) = text.get(i) {
        match CLASSES[usize::from(b)] {
            Class::Plain => {
                go = f(b, i, i + 1);
                i += 1;
            }
            Class::Separator => i += 1,
            Class::Escape => (i, go) = escape(text, i, &mut f),
        }
    }
}

/// Reads the escape at `i` (see [`Class::Escape`]); where the stream goes
/// on, and whether `f` wants more.
fn escape(text: &[u8], i: usize, f: &mut impl FnMut(u8, usize, usize) -> bool) -> (usize, bool) {
    let rest = &text[i..];
    match rest[0] {
        b'%' => match (rest.get(1).and_then(hex), rest.get(2).and_then(hex)) {
            (Some(hi), Some(lo)) => (i + 3, f(hi << 4 | lo, i, i + 3)),
            _ => (i + 1, f(b'%', i, i + 1)),
        },
        b'\\' => {
            let run = rest.iter().take_while(|&&c| c == b'\\').count();
            // `\n`, `\r`, `\t` at any depth of escaping are line breaks and
            // tabs; other backslashes are escaping only.
            match rest.get(run) {
                Some(b'n' | b'r' | b't') => (i + run + 1, true),
                _ => (i + run, true),
            }
        }
        _ => match INVISIBLE.iter().find(|s| rest.starts_with(s)) {
            Some(s) => (i + s.len(), true),
            None => (i + 1, f(rest[0], i, i + 1)),
        },
    }
}

fn hex(c: &u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}
