//! Markdown archives of transcripts.
//!
//! An archive is what a person (or the agent, with Grep) reads later:
//!
//! ```markdown
//! # Tax research
//!
//! Archived: Nov 21, 2026, 3:39 PM (Europe/Berlin)
//!
//! ---
//!
//! ### Sat, Nov 21, 2026
//!
//! **User**: …
//!
//! **G2**: …
//! ```
//!
//! Each message (a turn may hold several) is cut at
//! [`ArchiveOptions::max_message_chars`] characters. With
//! [`ArchiveOptions::redact_secrets`] (the default) every text of the
//! archive, its title included, first passes through [`privacy::clean`]:
//! private and g2-memory spans are removed and secrets become
//! `[redacted:<kind>]`, before the text is cut (a cut never leaves half a
//! key behind unredacted); a message left empty is left out. A subagent's
//! own transcript ([`Transcript::subagent`]) is archived like any other,
//! under a line that says whose it is. A day line (`### Sat, Nov 21,
//! 2026`) opens each local day of the messages, in the archive's timezone
//! ([`dates`]).
//! Files are written atomically (a temp file in the same folder, then a hard
//! link to the final name, which fails instead of replacing) and never
//! overwrite: a name that is taken gets `-2`, `-3`, … appended.

use std::borrow::Cow;
use std::io;

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;

use crate::confined::Dir;
use crate::envelope;
use crate::privacy;
use crate::transcript::{Entry, Transcript};
use crate::validate;

pub mod dates;

/// Default cut for one message in an archive, in characters.
pub const DEFAULT_MAX_MESSAGE_CHARS: usize = 2000;

/// How an archive is rendered.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    /// The name shown for the assistant's turns (`**G2**: …`).
    pub assistant_name: String,
    /// Messages longer than this many characters are cut (and end in `…`).
    pub max_message_chars: usize,
    /// Strip private and g2-memory tags and redact secrets
    /// ([`privacy::Redactor::clean`]) in everything the archive shows.
    pub redact_secrets: bool,
    /// The patterns, plus the host's own credential when the host writes
    /// the archive (the hook in a container never knows it).
    pub redactor: privacy::Redactor,
}

impl Default for ArchiveOptions {
    fn default() -> Self {
        Self {
            assistant_name: "G2".into(),
            max_message_chars: DEFAULT_MAX_MESSAGE_CHARS,
            redact_secrets: true,
            redactor: privacy::Redactor::default(),
        }
    }
}

impl ArchiveOptions {
    /// `text` as the archive may show it.
    fn clean<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.redact_secrets {
            self.redactor.clean(text)
        } else {
            Cow::Borrowed(text)
        }
    }

    /// `text` cleaned, then cut, its lines kept from reading as a speaker
    /// ([`body`]); None when nothing is left.
    fn show(&self, text: &str) -> Option<String> {
        let text = self.clean(text);
        let text = text.trim();
        (!text.is_empty()).then(|| body(&truncate(text, self.max_message_chars)))
    }
}

/// A message's text as the archive holds it: no line of it can read as the
/// start of another message. Every line break is `\n` (Markdown also ends
/// a line at a lone `\r`), and a line that starts with `*` (after any
/// blanks) has its leading asterisks escaped (`\*\*G2**:`), so neither
/// the passages that recall reads nor a reader of the Markdown can take
/// `**G2**: …` or `**Ann** (08:00): …` inside someone's words for a turn of
/// its own; a line that reads as a day line ([`dates`]) starts with `\`. Markdown shows the escaped asterisks as they were typed.
pub fn body(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if dates::read_day_line(line).is_some() {
            // Someone's words never open a day.
            out.push('\\');
        }
        let rest = line.trim_start_matches([' ', '\t']);
        out.push_str(&line[..line.len() - rest.len()]);
        let stars = rest.len() - rest.trim_start_matches('*').len();
        for _ in 0..stars {
            out.push_str("\\*");
        }
        out.push_str(&rest[stars..]);
    }
    out
}

/// A sender's name as a speaker mark holds it: one line, without the
/// asterisks that could end the mark early (`**Ann** (09:00): …`).
pub fn speaker_name(name: &str) -> String {
    name.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('*', "")
}

/// The title of an archive: the given name, else Claude Code's session
/// summary, else the first user prompt (first line, shortened; for a routed
/// prompt, the first message people sent, not its envelope), else
/// `conversation-HHMM`. Cleaned as the default [`ArchiveOptions`] say
/// ([`title_with`] takes them).
pub fn title<Z: chrono::TimeZone>(name: Option<&str>, t: &Transcript, now: &DateTime<Z>) -> String
where
    Z::Offset: std::fmt::Display,
{
    title_with(name, t, now, &ArchiveOptions::default())
}

/// [`title`], each candidate cleaned as `opts` say first: the title names
/// the file and is indexed, so a secret in the first prompt must not reach
/// it, and a candidate that was all private gives way to the next.
pub fn title_with<Z: chrono::TimeZone>(
    name: Option<&str>,
    t: &Transcript,
    now: &DateTime<Z>,
    opts: &ArchiveOptions,
) -> String
where
    Z::Offset: std::fmt::Display,
{
    let pick = |s: &str| {
        let s = opts.clean(s);
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

/// The day lines of an archive being written: one wherever the local day
/// of what is said next changes.
struct Days {
    tz: Tz,
    shown: Option<NaiveDate>,
}

impl Days {
    fn mark(&mut self, out: &mut String, at: Option<DateTime<Utc>>) {
        let Some(day) = at.map(|t| t.with_timezone(&self.tz).date_naive()) else {
            return;
        };
        if self.shown != Some(day) {
            self.shown = Some(day);
            out.push_str(&dates::day_line(day));
            out.push_str("\n\n");
        }
    }
}

/// Renders the archive markdown, its days and times in `archived_at`'s
/// timezone.
pub fn render(
    title: &str,
    t: &Transcript,
    archived_at: &DateTime<Tz>,
    opts: &ArchiveOptions,
) -> String {
    let mut out = String::with_capacity(256 + t.entries.len() * 256);
    // A title is one line; anything after a newline would become body text.
    let title = title.lines().next().unwrap_or("").trim();
    out.push_str("# ");
    out.push_str(opts.clean(title).trim());
    out.push_str("\n\nArchived: ");
    out.push_str(&dates::archived_line(archived_at));
    out.push_str("\n\n---\n\n");
    if t.subagent {
        // Its user turn is the prompt the parent agent gave it.
        out.push_str("*A subagent's transcript");
        if let Some(id) = t.agent_id.as_deref().and_then(|id| opts.show(id)) {
            out.push_str(" (agent ");
            out.push_str(id.lines().next().unwrap_or(""));
            out.push(')');
        }
        out.push_str(": its prompt and answers.*\n\n");
    }
    let mut days = Days {
        tz: archived_at.timezone(),
        shown: None,
    };
    for (i, entry) in t.entries.iter().enumerate() {
        let said = t.times.get(i).copied().flatten().map(|s| s.first);
        match entry {
            Entry::User(parts) => push_user(&mut out, parts, opts, &mut days, said),
            Entry::Assistant(parts) => {
                days.mark(&mut out, said);
                push_turn(&mut out, &opts.assistant_name, parts, opts);
            }
            Entry::Compaction(c) => {
                // A day line goes right before a speaker's line only: the
                // note before it stays with the message it follows.
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
                    days.mark(&mut out, said);
                    push_turn(&mut out, "Summary", std::slice::from_ref(summary), opts);
                }
            }
        }
    }
    out
}

/// One line per file a message came with that was kept: a link from the
/// archive (in `conversations/`) to the file in the group's `media/`.
/// Only the characters the host gives names and paths are kept, so a
/// forged envelope cannot make a link elsewhere.
fn push_files(out: &mut String, files: &[envelope::File]) {
    let safe = |s: &str, extra: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || "._-".contains(*c) || extra.contains(*c))
            .collect()
    };
    for f in files {
        let Some(rel) = f.path.strip_prefix(&format!("{}/", crate::wire::GROUP_DIR)) else {
            continue;
        };
        let rel = safe(rel, "/");
        if rel
            .split('/')
            .any(|p| p.is_empty() || p == ".." || p == ".")
            || !rel.starts_with("media/")
        {
            continue;
        }
        out.push_str(&format!(
            "*{}: [{}](../{rel})*\n\n",
            safe(&f.kind, ""),
            safe(&f.name, "")
        ));
    }
}

/// A user turn. A routed prompt (see [`envelope`]) shows who said what,
/// one line per message: `**Ann** (09:00): we need milk`, unescaped, the
/// time in the archive's timezone, under its own day's line (and a link
/// to each file it came with); a note the host put before it shows in
/// italics. Anything else is one `**User**` turn, as Claude Code saw it,
/// on the day the transcript dates it (`said`).
/// The envelope is read before cleaning: its text is escaped, so a
/// `<private>` tag in a message only shows once it is unescaped.
fn push_user(
    out: &mut String,
    parts: &[String],
    opts: &ArchiveOptions,
    days: &mut Days,
    said: Option<DateTime<Utc>>,
) {
    let mut plain: Vec<String> = Vec::new();
    for part in parts {
        let Some(env) = envelope::read(part) else {
            plain.push(part.clone());
            continue;
        };
        if !plain.is_empty() {
            days.mark(out, said);
            push_turn(out, "User", &plain, opts);
            plain.clear();
        }
        if let Some(preface) = opts.show(&env.preface) {
            out.push('*');
            out.push_str(&preface);
            out.push_str("*\n\n");
        }
        for m in &env.messages {
            let Some(text) = opts.show(&m.text) else {
                continue;
            };
            let name = speaker_name(&opts.clean(&m.sender));
            let sent = DateTime::parse_from_rfc3339(&m.time)
                .ok()
                .map(|t| t.with_timezone(&Utc));
            days.mark(out, sent.or(said));
            out.push_str("**");
            out.push_str(if name.is_empty() { "?" } else { &name });
            out.push_str("**");
            if let Some(t) = sent {
                out.push_str(&t.with_timezone(&days.tz).format(" (%H:%M)").to_string());
            }
            out.push_str(": ");
            out.push_str(&text);
            out.push_str("\n\n");
            push_files(out, &m.files);
        }
    }
    if !plain.is_empty() {
        days.mark(out, said);
        push_turn(out, "User", &plain, opts);
    }
}

/// One turn: `**Who**: ` and its messages, each cleaned and cut at
/// `max_message_chars` characters; nothing when no message is left.
fn push_turn(out: &mut String, who: &str, parts: &[String], opts: &ArchiveOptions) {
    let shown: Vec<String> = parts.iter().filter_map(|p| opts.show(p)).collect();
    if shown.is_empty() {
        return;
    }
    out.push_str("**");
    out.push_str(who);
    out.push_str("**: ");
    out.push_str(&shown.join("\n\n"));
    out.push_str("\n\n");
}

/// Cuts `s` to at most `max` characters, marking a cut with `…`.
pub fn truncate(s: &str, max: usize) -> Cow<'_, str> {
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
pub fn stem<Z: chrono::TimeZone>(title: &str, now: &DateTime<Z>) -> String
where
    Z::Offset: std::fmt::Display,
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
    dir.write_new(names(date, stem), contents.as_bytes(), reserved)
}

/// [`write_new`], but the file waits under a pending name until the caller
/// has recorded it and [`Dir::settle`]s it (the host's own archives: a
/// crash never leaves an archive the database does not know).
pub fn write_pending(
    dir: &Dir,
    date: &str,
    stem: &str,
    contents: &str,
    reserved: &dyn Fn(&str) -> bool,
) -> io::Result<String> {
    dir.write_pending(names(date, stem), contents.as_bytes(), reserved)
}

/// An archive's candidate file names: `{date}-{stem}.md`, then `-2.md`, …
/// Both parts are slugged again (the stem is a slug already; slugging again
/// keeps this safe on its own), so no name holds a separator or a dot.
pub fn names(date: &str, stem: &str) -> impl Iterator<Item = String> + use<> {
    let stem = match validate::slug(stem) {
        s if s.is_empty() => "conversation".to_string(),
        s => s,
    };
    let date = validate::slug(date);
    (1..=10_000u32).map(move |n| {
        if n == 1 {
            format!("{date}-{stem}.md")
        } else {
            format!("{date}-{stem}-{n}.md")
        }
    })
}

#[cfg(test)]
mod tests;
