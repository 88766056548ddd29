//! What must never reach g2's memory: text a person marked private, the
//! memory g2 itself put into a prompt, and anything that looks like a
//! secret.
//!
//! Both sides apply it: the in-container hook before it writes an event
//! file, and the host again before anything is stored (defence in depth: a
//! file in the IPC folder is the agent's to write). [`clean`] is the whole
//! treatment; [`strip_tags`] and [`redact`] are its two halves.
//!
//! - **Tags** (`tags`): `<private>…</private>`, g2's own
//!   `<g2-memory>…</g2-memory>` (so memory never feeds on itself) and
//!   Claude Code's `<system-reminder>…</system-reminder>` are removed with
//!   what they hold, in any case, with whitespace or attributes, nested,
//!   and with their angle brackets JSON-escaped (`\u003c`, at any depth) or
//!   written as HTML entities (`&lt;`). An opening tag without its closing
//!   tag removes everything after it: when in doubt, private stays private.
//! - **Patterns** (`patterns`): keys and tokens of well-known shapes and
//!   the values of assignments to secret-sounding names (`password=`,
//!   `export DEPLOY_TOKEN="…"`, `SECRET_KEY=`, JSON at any depth of
//!   escaping, YAML block values) become `[redacted:<kind>]`; an
//!   assignment keeps its name. Text that merely talks about secrets ("the
//!   token budget", `PRIMARY_KEY`) is left alone.
//! - **Literals** (`literals`): the host's own credentials
//!   ([`Redactor::with_literals`]) in every shape a paste gives them:
//!   as they are, split by spaces or line breaks, percent-encoded, in hex,
//!   in base64 at any alignment, or a piece of one of 16 characters or more.

mod literals;
mod patterns;
pub mod prompt;
mod tags;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::sync::Arc;

pub use tags::{MEMORY_TAG, STRIPPED_TAGS, entirely_private, strip_tags};

use literals::Literals;

/// What a redacted credential of the host becomes.
const CREDENTIAL: &str = "[redacted:credential]";

/// Redacts secrets: the built-in patterns, plus exact strings.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Built once: the automaton over every encoding of every literal.
    literals: Option<Arc<Literals>>,
}

/// Never shows the literals: they are secrets.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.literals.as_ref().map_or(0, |l| l.count());
        write!(f, "Redactor({n} literals)")
    }
}

impl Redactor {
    /// Also redacts each of `literals` (kind `credential`) wherever it
    /// appears, in any of the shapes `literals` lists; strings shorter
    /// than 8 characters are ignored, since they would match ordinary text.
    pub fn with_literals<I, S>(literals: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let kept: Vec<String> = literals
            .into_iter()
            .map(Into::into)
            .filter(|s: &String| s.chars().count() >= 8)
            .collect();
        Redactor {
            literals: Literals::new(&kept).map(Arc::new),
        }
    }

    /// `text` with every secret replaced by `[redacted:<kind>]`. Borrowed
    /// when nothing was found.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let out = match &self.literals {
            Some(l) => l.redact(text, CREDENTIAL),
            None => Cow::Borrowed(text),
        };
        match out {
            Cow::Borrowed(t) => patterns::redact(t),
            Cow::Owned(t) => Cow::Owned(patterns::redact(&t).into_owned()),
        }
    }

    /// [`strip_tags`], then [`Redactor::redact`].
    pub fn clean<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match strip_tags(text) {
            Cow::Borrowed(t) => self.redact(t),
            Cow::Owned(t) => Cow::Owned(self.redact(&t).into_owned()),
        }
    }

    /// [`Redactor::clean`] of `text` cut to twice `max` characters first
    /// (a secret across the final cut is still whole when redacted).
    pub fn clean_within<'a>(&self, text: &'a str, max: usize) -> Cow<'a, str> {
        match text.char_indices().nth(max.saturating_mul(2)) {
            None => self.clean(text),
            Some((i, _)) => Cow::Owned(self.clean(&text[..i]).into_owned()),
        }
    }

    /// [`Redactor::clean_within`], then cut to `max` characters (a cut
    /// marked with `…`): what a capture keeps of a text.
    pub fn bounded(&self, text: &str, max: usize) -> String {
        crate::archive::truncate(&self.clean_within(text, max), max).into_owned()
    }

    /// [`Redactor::clean`]'s text when it differs from `text`; None when
    /// there was nothing to clean (what a stored row is rewritten with).
    pub fn cleaned(&self, text: &str) -> Option<String> {
        match self.clean(text) {
            Cow::Owned(c) if c != text => Some(c),
            _ => None,
        }
    }
}

/// [`Redactor::redact`] with the built-in patterns only.
pub fn redact(text: &str) -> Cow<'_, str> {
    Redactor::default().redact(text)
}

/// [`strip_tags`] then [`redact`] with the built-in patterns only.
pub fn clean(text: &str) -> Cow<'_, str> {
    Redactor::default().clean(text)
}
