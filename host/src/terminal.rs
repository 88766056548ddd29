//! Text from the store on a terminal. Names and messages come from other
//! people (and agents); printed raw, an escape sequence would retitle the
//! window, clear the screen or overwrite lines, and a bidi override would
//! make text read differently from what it is.
//!
//! - [`check_name`] refuses control characters in names when they are
//!   stored (sender names, group names; folders are limited to
//!   `[A-Za-z0-9_-]` by `g2_core::validate`).
//! - [`inert`] and [`inert_name`] print what is stored anyway (message text
//!   may hold anything, and older rows were not checked): every control
//!   character and bidi control is shown as its `\u{…}` escape, except
//!   newline and tab in text.

use std::borrow::Cow;

use crate::{Error, Result};

/// The Unicode bidi controls: embeddings, overrides, isolates and marks.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Refuses a name holding a control character (a tab aside) or a bidi
/// override.
pub fn check_name(field: &str, name: &str) -> Result<()> {
    match name
        .chars()
        .find(|&c| (c.is_control() && c != '\t') || is_bidi_control(c))
    {
        Some(c) => Err(Error::Invalid(format!(
            "{field}: control character {} is not allowed",
            c.escape_unicode()
        ))),
        None => Ok(()),
    }
}

fn escape(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let bad = |c: char| !keep(c) && (c.is_control() || is_bidi_control(c));
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if bad(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text safe to print: newlines and tabs kept, other controls escaped.
pub fn inert(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// A name (one line) safe to print: every control escaped.
pub fn inert_name(name: &str) -> Cow<'_, str> {
    escape(name, |_| false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_shown_escaped() {
        let evil = "evil\x1b]0;PWNED\x07\x1b[2J\r\0\u{202E}txt.exe\u{9b}";
        let shown = inert(evil);
        assert!(
            !shown.chars().any(|c| c.is_control() || is_bidi_control(c)),
            "{shown:?}"
        );
        assert_eq!(
            shown,
            r"evil\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{d}\u{0}\u{202e}txt.exe\u{9b}"
        );
        assert_eq!(inert("two\nlines\tand tabs"), "two\nlines\tand tabs");
        assert!(matches!(inert("plain ünïcode"), Cow::Borrowed(_)));
        assert_eq!(inert_name("a\nb\tc"), r"a\u{a}b\u{9}c");
    }

    #[test]
    fn names_refuse_controls() {
        assert!(check_name("sender", "Ann Lee").is_ok());
        assert!(check_name("sender", "Ann\tLee").is_ok());
        for bad in [
            "evil\x1b]0;PWNED\x07",
            "nul\0",
            "line\nbreak",
            "\u{202E}abc",
            "c1\u{85}",
        ] {
            assert!(check_name("sender", bad).is_err(), "{bad:?}");
        }
    }
}
