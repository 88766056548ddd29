//! Markdown archives of transcripts.
//!
//! An archive is what a person (or the agent, with Grep) reads later:
//!
//! ```markdown
//! # Tax research
//!
//! Archived: Nov 21, 2026, 3:39 PM
//!
//! ---
//!
//! **User**: …
//!
//! **G2**: …
//! ```
//!
//! Each message (a turn may hold several) is cut at
//! [`ArchiveOptions::max_message_chars`] characters.
//! Files are written atomically (a temp file in the same folder, then a hard
//! link to the final name, which fails instead of replacing) and never
//! overwrite: a name that is taken gets `-2`, `-3`, … appended.

use std::io;

use chrono::{DateTime, TimeZone};

use crate::confined::Dir;
use crate::envelope;
use crate::transcript::{Entry, Transcript};
use crate::validate;

/// Default cut for one message in an archive, in characters.
pub const DEFAULT_MAX_MESSAGE_CHARS: usize = 2000;

/// How an archive is rendered.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    /// The name shown for the assistant's turns (`**G2**: …`).
    pub assistant_name: String,
    /// Messages longer than this many characters are cut (and end in `…`).
    pub max_message_chars: usize,
}

impl Default for ArchiveOptions {
    fn default() -> Self {
        Self {
            assistant_name: "G2".into(),
            max_message_chars: DEFAULT_MAX_MESSAGE_CHARS,
        }
    }
}

/// The title of an archive: the given name, else Claude Code's session
/// summary, else the first user prompt (first line, shortened; for a routed
/// prompt, the first message people sent, not its envelope), else
/// `conversation-HHMM`.
pub fn title<Tz: TimeZone>(name: Option<&str>, t: &Transcript, now: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let pick = |s: &str| {
        let line = s
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        shorten(line, 80)
    };
    let first = t.first_prompt().map(|p| match envelope::read(p) {
        Some(env) => env.messages.into_iter().next().map(|m| m.text),
        None => Some(p.to_string()),
    });
    [name, t.summary(), first.flatten().as_deref()]
        .into_iter()
        .flatten()
        .map(pick)
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| format!("conversation-{}", now.format("%H%M")))
}

/// Renders the archive markdown.
pub fn render<Tz: TimeZone>(
    title: &str,
    t: &Transcript,
    archived_at: &DateTime<Tz>,
    opts: &ArchiveOptions,
) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let mut out = String::with_capacity(256 + t.entries.len() * 256);
    // A title is one line; anything after a newline would become body text.
    let title = title.lines().next().unwrap_or("").trim();
    out.push_str("# ");
    out.push_str(title);
    out.push_str("\n\nArchived: ");
    out.push_str(&archived_at.format("%b %-d, %Y, %-I:%M %p").to_string());
    out.push_str("\n\n---\n\n");
    let max = opts.max_message_chars;
    for entry in &t.entries {
        match entry {
            Entry::User(parts) => push_user(&mut out, parts, max, &archived_at.timezone()),
            Entry::Assistant(parts) => push_turn(&mut out, &opts.assistant_name, parts, max),
            Entry::Compaction(c) => {
                out.push_str("*Conversation compacted");
                let detail: Vec<String> = c
                    .trigger
                    .iter()
                    .cloned()
                    .chain(c.pre_tokens.map(|n| format!("{n} tokens before")))
                    .collect();
                if !detail.is_empty() {
                    out.push_str(" (");
                    out.push_str(&detail.join(", "));
                    out.push(')');
                }
                out.push_str(".*\n\n");
                if let Some(summary) = &c.summary {
                    push_turn(&mut out, "Summary", std::slice::from_ref(summary), max);
                }
            }
        }
    }
    out
}

/// A user turn. A routed prompt (see [`envelope`]) shows who said what,
/// one line per message: `**Ann** (09:00): we need milk`, unescaped, the
/// time in the archive's timezone; a note the host put before it shows in
/// italics. Anything else is one `**User**` turn, as Claude Code saw it.
fn push_user<Tz: TimeZone>(out: &mut String, parts: &[String], max: usize, tz: &Tz)
where
    Tz::Offset: std::fmt::Display,
{
    let mut plain: Vec<String> = Vec::new();
    for part in parts {
        let Some(env) = envelope::read(part) else {
            plain.push(part.clone());
            continue;
        };
        if !plain.is_empty() {
            push_turn(out, "User", &plain, max);
            plain.clear();
        }
        if !env.preface.is_empty() {
            out.push('*');
            out.push_str(&truncate(&env.preface, max));
            out.push_str("*\n\n");
        }
        for m in &env.messages {
            out.push_str("**");
            out.push_str(&m.sender);
            out.push_str("**");
            if let Ok(t) = DateTime::parse_from_rfc3339(&m.time) {
                out.push_str(&t.with_timezone(tz).format(" (%H:%M)").to_string());
            }
            out.push_str(": ");
            out.push_str(&truncate(&m.text, max));
            out.push_str("\n\n");
        }
    }
    if !plain.is_empty() {
        push_turn(out, "User", &plain, max);
    }
}

/// One turn: `**Who**: ` and its messages, each cut at `max` characters.
fn push_turn(out: &mut String, who: &str, parts: &[String], max: usize) {
    out.push_str("**");
    out.push_str(who);
    out.push_str("**: ");
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str("\n\n");
        }
        out.push_str(&truncate(part, max));
    }
    out.push_str("\n\n");
}

/// Cuts `s` to at most `max` characters, marking a cut with `…`.
pub fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => s.into(),
        Some((i, _)) => format!("{}…", &s[..i]).into(),
    }
}

/// Shortens to at most `max` characters at a word boundary where there is one.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => {
            let cut = &s[..i];
            let cut = cut
                .rfind(' ')
                .filter(|&j| j > i / 2)
                .map_or(cut, |j| &cut[..j]);
            format!("{}…", cut.trim_end())
        }
    }
}

/// The file name stem for an archive: the slug of its title, or
/// `conversation-HHMM` when the title has no usable characters.
pub fn stem<Tz: TimeZone>(title: &str, now: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let s = validate::slug(title);
    if s.is_empty() {
        format!("conversation-{}", now.format("%H%M"))
    } else {
        s
    }
}

/// Writes `contents` to `{date}-{stem}.md` (or `-2.md`, `-3.md`, … when
/// taken) in `dir`, atomically, durably and without ever replacing a file
/// or following a link ([`Dir::write_new`]). Returns the file name.
/// `reserved` names files that are taken although no file is there (an
/// index row whose file was deleted by hand); they are skipped too.
pub fn write_new(
    dir: &Dir,
    date: &str,
    stem: &str,
    contents: &str,
    reserved: &dyn Fn(&str) -> bool,
) -> io::Result<String> {
    // The stem is a slug already; slugging again keeps this function safe on
    // its own (no separators, no dots).
    let stem = match validate::slug(stem) {
        s if s.is_empty() => "conversation".to_string(),
        s => s,
    };
    let date = validate::slug(date);
    let names = (1..=10_000u32).map(|n| {
        if n == 1 {
            format!("{date}-{stem}.md")
        } else {
            format!("{date}-{stem}-{n}.md")
        }
    });
    dir.write_new(names, contents.as_bytes(), reserved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::parse_bytes;
    use chrono::Utc;
    use std::fs;

    fn at() -> DateTime<Utc> {
        "2026-02-21T03:39:00Z".parse().unwrap()
    }

    #[test]
    fn renders_the_seed_format() {
        let t = parse_bytes(
            concat!(
                r#"{"type":"user","message":{"content":"I want to plan a trip to Japan"}}"#, "\n",
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Here are some suggestions"}]}}"#,
            )
            .as_bytes(),
        );
        let md = render("Travel Planning", &t, &at(), &ArchiveOptions::default());
        assert_eq!(
            md,
            "# Travel Planning\n\nArchived: Feb 21, 2026, 3:39 AM\n\n---\n\n\
             **User**: I want to plan a trip to Japan\n\n**G2**: Here are some suggestions\n\n"
        );
    }

    #[test]
    fn truncates_by_characters() {
        assert_eq!(truncate("héllo", 3), "hél…");
        assert_eq!(truncate("héllo", 5), "héllo");
        let long = "é".repeat(2500);
        assert_eq!(truncate(&long, 2000).chars().count(), 2001);
    }

    #[test]
    fn title_fallbacks() {
        let now = at();
        let empty = parse_bytes(b"");
        assert_eq!(title(Some("Given"), &empty, &now), "Given");
        assert_eq!(title(None, &empty, &now), "conversation-0339");
        assert_eq!(title(Some("   "), &empty, &now), "conversation-0339");
        let t = parse_bytes(br#"{"type":"user","message":{"content":"\n  first line\nsecond"}}"#);
        assert_eq!(title(None, &t, &now), "first line");
        let t = parse_bytes(
            concat!(
                r#"{"type":"summary","summary":"The summary"}"#,
                "\n",
                r#"{"type":"user","message":{"content":"prompt"}}"#
            )
            .as_bytes(),
        );
        assert_eq!(title(None, &t, &now), "The summary");
        let long = format!(
            r#"{{"type":"user","message":{{"content":"{}"}}}}"#,
            "word ".repeat(50)
        );
        let got = title(None, &parse_bytes(long.as_bytes()), &now);
        assert!(got.chars().count() <= 81 && got.ends_with("word…"), "{got}");
    }

    #[test]
    fn write_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let d = Dir::open(dir.path()).unwrap();
        let free = |_: &str| false;
        let a = write_new(&d, "2026-02-21", "tax-research", "one", &free).unwrap();
        let b = write_new(&d, "2026-02-21", "tax-research", "two", &free).unwrap();
        let c = write_new(&d, "2026-02-21", "../../evil", "three", &free).unwrap();
        assert_eq!(a, "2026-02-21-tax-research.md");
        assert_eq!(b, "2026-02-21-tax-research-2.md");
        assert!(!c.contains('/'));
        assert_eq!(fs::read_to_string(dir.path().join(&a)).unwrap(), "one");
        assert_eq!(fs::read_to_string(dir.path().join(&b)).unwrap(), "two");
        // No temp files left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.ends_with(".md") && !n.starts_with('.'))
        );
    }

    #[test]
    fn a_routed_prompt_shows_who_said_what() {
        let prompt = envelope::write([
            ("Ann", "2026-11-22T09:00:00.000Z", "we need milk"),
            ("Bob", "2026-11-22T09:02:30.000Z", "and <bread> & eggs"),
        ]);
        let mut t = Transcript::default();
        t.entries = vec![
            Entry::User(vec![prompt]),
            Entry::Assistant(vec!["Noted.".into()]),
        ];
        let md = render("Groceries", &t, &at(), &ArchiveOptions::default());
        assert!(
            md.ends_with(
                "**Ann** (09:00): we need milk\n\n**Bob** (09:02): and <bread> & eggs\n\n**G2**: Noted.\n\n"
            ),
            "{md}"
        );
        assert!(
            !md.contains("<messages>") && !md.contains("**User**"),
            "{md}"
        );
        // Titled from what the people said, not from the envelope.
        assert_eq!(title(None, &t, &at()), "we need milk");
    }
}
