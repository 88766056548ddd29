//! `g2 memory reindex` dates every archive's passages again, so archives
//! made before passages were dated by their own messages (all at the
//! archive's time) get the days they were said on.
//!
//! Per archive, in id order, a page at a time:
//! 1. An archive with day lines dates itself: its markdown's marks.
//! 2. Else, when its session's transcript is still in the group's
//!    `.claude/`, the transcript is rendered as the host archives it (in
//!    the group's timezone, with the host's options) and the archive's
//!    messages are matched to the rendered ones in order, by speaker and
//!    the start of their text ([`align`]): an archive may hold only the
//!    start of the transcript (the PreCompact hook archives before a
//!    compaction), or the transcript may have grown since. A message
//!    matched nowhere takes a neighbour's time.
//! 3. Else its markdown's own marks: the people's `(HH:MM)` walked back
//!    from its `Archived:` time (`store::passages::split_in`).
//! 4. Else (nothing dates it) it is left as it is.
//!
//! Where the stored passages are the archive's split (same ordinals, turn
//! ranges and text), their times are updated in place: their vectors stay.
//! Otherwise the archive's passages are written anew. Files are read
//! between transactions, never inside one; each page is one transaction.

use chrono::{DateTime, SecondsFormat, Utc};
use g2_core::archive::{self, ArchiveOptions};
use g2_core::validate::GroupFolder;

use crate::Result;
use crate::home::Home;
use crate::store::db::Db;
use crate::store::passages::{self, Passage, Speaker};
use crate::store::recall::ArchiveToDate;
use crate::store::{self, Store};

/// Archives read, dated and written per transaction.
const PAGE: i64 = 16;
/// Rendered messages looked at past the last match for an archive's
/// message: bounds the cost of a message matched nowhere.
const LOOKAHEAD: usize = 1_000;
/// Characters of a message's text compared (after its whitespace is
/// collapsed): enough to tell messages apart, short enough that a later
/// cut or redaction rarely reaches it.
const PREFIX: usize = 48;

/// What a reindex did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reindexed {
    /// Archives whose passages were written anew (none before, or no
    /// longer their split).
    pub split: usize,
    /// Archives whose passages' times changed, by where they came from.
    pub from_transcripts: usize,
    pub from_markdown: usize,
    /// Archives whose passages kept their times (or that nothing dates).
    pub unchanged: usize,
}

impl Reindexed {
    /// Archives whose passages' times changed.
    pub fn redated(&self) -> usize {
        self.from_transcripts + self.from_markdown
    }
}

/// Where an archive's new times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Transcript,
    Markdown,
    Nothing,
}

/// An archive's passages as they should be stored.
struct Plan {
    id: i64,
    group: String,
    created_at: String,
    passages: Vec<Passage>,
    source: Source,
}

/// Dates every archive's passages again (see the module doc), a page of
/// archives per transaction. Blocking (reads transcripts).
pub fn all(store: &Store, home: &Home, opts: &ArchiveOptions) -> Result<Reindexed> {
    let mut done = Reindexed::default();
    let mut after = 0;
    let mut cache = Rendered::default();
    loop {
        let page = store.read_blocking(move |c| store::recall::archives_after(c, after, PAGE))?;
        let Some(last) = page.last().map(|a| a.id) else {
            break;
        };
        after = last;
        // Outside any transaction: transcripts are read and rendered here.
        let plans: Vec<Plan> = page
            .into_iter()
            .map(|a| plan(home, opts, &mut cache, a))
            .collect();
        let counts = store.write_blocking(move |tx| {
            let mut counts = Reindexed::default();
            for p in &plans {
                apply(tx, p, &mut counts)?;
            }
            Ok(counts)
        })?;
        done.split += counts.split;
        done.from_transcripts += counts.from_transcripts;
        done.from_markdown += counts.from_markdown;
        done.unchanged += counts.unchanged;
    }
    Ok(done)
}

/// The last transcript rendered: archives of one session often follow
/// each other (the PreCompact hook's, then the one made at a clear).
#[derive(Default)]
struct Rendered {
    key: Option<(String, String)>,
    markdown: Option<String>,
}

impl Rendered {
    fn get(
        &mut self,
        home: &Home,
        opts: &ArchiveOptions,
        group: &GroupFolder,
        session: &str,
    ) -> Option<&str> {
        let key = (group.as_str().to_string(), session.to_string());
        if self.key.as_ref() != Some(&key) {
            self.markdown = render(home, opts, group, session);
            self.key = Some(key);
        }
        self.markdown.as_deref()
    }
}

/// A session's transcript rendered as the host archives it now, in the
/// group's timezone; none when it is gone, unreadable or dates nothing.
fn render(
    home: &Home,
    opts: &ArchiveOptions,
    group: &GroupFolder,
    session: &str,
) -> Option<String> {
    let t = match crate::archives::read_transcript(home, group, session) {
        Ok(t) => t?,
        Err(e) => {
            tracing::warn!(group = %group, session, error = %e, "transcript not read; its archives are dated from their markdown");
            return None;
        }
    };
    if !t.times.iter().any(Option::is_some) {
        return None;
    }
    let now = Utc::now().with_timezone(&crate::zone::of(group.as_str()));
    Some(archive::render("", &t, &now, opts))
}

/// How `a`'s passages should be stored and dated.
fn plan(home: &Home, opts: &ArchiveOptions, cache: &mut Rendered, a: ArchiveToDate) -> Plan {
    let tz = crate::zone::of(&a.group);
    let mut passages = passages::split_in(&a.body, tz);
    let mut source = if passages.iter().any(|p| p.first.is_some()) {
        Source::Markdown
    } else {
        Source::Nothing
    };
    let group = GroupFolder::new(&a.group).ok();
    if !passages::has_day_lines(&a.body)
        && let (Some(group), Some(session)) = (group, a.session_id.as_deref())
        && let Some(rendered) = cache.get(home, opts, &group, session)
    {
        let times = align(&keyed(&a.body, tz), &keyed(rendered, tz));
        if times.iter().any(Option::is_some) {
            date(&mut passages, &times);
            source = Source::Transcript;
        }
    }
    Plan {
        id: a.id,
        group: a.group,
        created_at: a.created_at,
        passages,
        source,
    }
}

/// Dates each passage by its first and last message's time.
fn date(passages: &mut [Passage], times: &[Option<DateTime<Utc>>]) {
    let at = |i: i64| -> Option<String> {
        let t = times.get(usize::try_from(i).ok()?).copied().flatten()?;
        Some(t.to_rfc3339_opts(SecondsFormat::Millis, true))
    };
    for p in passages {
        p.first = at(p.turn_start);
        p.last = at(p.turn_end);
    }
}

/// Who said a message and how its text starts: what [`align`] compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    who: Who,
    start: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Who {
    /// A person by name (a routed chat), or `**User**`.
    Person(String),
    User,
    /// The agent, under whatever name the archive gives it.
    Agent,
    Summary,
    Unknown,
}

impl Key {
    pub fn new(speaker: Option<&Speaker>, text: &str) -> Key {
        let who = match speaker {
            Some(Speaker::Person { name, .. }) => Who::Person(name.clone()),
            Some(Speaker::User) => Who::User,
            Some(Speaker::Agent) => Who::Agent,
            Some(Speaker::Summary) => Who::Summary,
            None => Who::Unknown,
        };
        let start = text
            .split_whitespace()
            .flat_map(|w| w.chars().chain([' ']))
            .take(PREFIX)
            .collect::<String>()
            .trim_end()
            .to_string();
        Key { who, start }
    }
}

/// An archive's messages (markdown) keyed, with the times it gives them.
fn keyed(markdown: &str, tz: chrono_tz::Tz) -> Vec<(Key, Option<DateTime<Utc>>)> {
    passages::dated(markdown, tz)
        .into_iter()
        .map(|d| (Key::new(d.speaker.as_ref(), d.text), d.at))
        .collect()
}

/// The times of `archive`'s messages, taken from `rendered`'s: each
/// archive message is matched, in order, to the next rendered message with
/// its key (within `LOOKAHEAD` of the last match). One matched nowhere
/// (or to a message without a time) takes the time of the nearest matched
/// one before it, else after it; all none when nothing matched.
pub fn align<T: Copy>(
    archive: &[(Key, T)],
    rendered: &[(Key, Option<DateTime<Utc>>)],
) -> Vec<Option<DateTime<Utc>>> {
    let mut out: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(archive.len());
    let mut next = 0;
    for (key, _) in archive {
        let end = rendered.len().min(next + LOOKAHEAD);
        match rendered[next.min(end)..end]
            .iter()
            .position(|(k, _)| k == key)
        {
            Some(k) => {
                out.push(rendered[next + k].1);
                next += k + 1;
            }
            None => out.push(None),
        }
    }
    // Unmatched: the one before, else (before the first match) the first.
    let mut before = None;
    for t in &mut out {
        match t {
            Some(at) => before = Some(*at),
            None => *t = before,
        }
    }
    let first = out.iter().flatten().next().copied();
    out.iter().map(|t| t.or(first)).collect()
}

/// A passage's times as stored: its first message's, else the archive's;
/// its last message's, else the first's.
fn stored_times<'a>(p: &'a Passage, created_at: &'a str) -> (&'a str, &'a str) {
    let at = p.first.as_deref().unwrap_or(created_at);
    (at, p.last.as_deref().unwrap_or(at))
}

/// Writes `p` in the caller's transaction and counts what it did.
fn apply(tx: &Db<'_>, p: &Plan, counts: &mut Reindexed) -> Result<()> {
    let stored = store::recall::archive_passages(tx, p.id)?;
    let same_split = stored.len() == p.passages.len()
        && stored.iter().zip(&p.passages).all(|(s, n)| {
            (s.ordinal, s.turn_start, s.turn_end, s.text.as_str())
                == (n.ordinal, n.turn_start, n.turn_end, n.text.as_str())
        });
    let counted = |counts: &mut Reindexed, changed: bool| match (changed, p.source) {
        (true, Source::Transcript) => counts.from_transcripts += 1,
        (true, Source::Markdown) => counts.from_markdown += 1,
        _ => counts.unchanged += 1,
    };
    if !same_split {
        if store::recall::replace_passages(tx, p.id, &p.group, &p.created_at, &p.passages)? {
            counts.split += 1;
            counted(counts, true);
        }
        return Ok(());
    }
    if p.source == Source::Nothing {
        counted(counts, false);
        return Ok(());
    }
    let mut changed = false;
    for (s, n) in stored.iter().zip(&p.passages) {
        let (at, at_end) = stored_times(n, &p.created_at);
        if s.at != at || s.at_end.as_deref() != Some(at_end) {
            store::recall::set_passage_times(tx, p.id, n.ordinal, at, Some(at_end))?;
            changed = true;
        }
    }
    counted(counts, changed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(who: Option<Speaker>, text: &str) -> Key {
        Key::new(who.as_ref(), text)
    }

    fn ann() -> Option<Speaker> {
        Some(Speaker::Person {
            name: "Ann".into(),
            time: "22:00".into(),
        })
    }

    fn at(h: u32) -> Option<DateTime<Utc>> {
        use chrono::TimeZone;
        Some(Utc.with_ymd_and_hms(2026, 5, 7, h, 0, 0).unwrap())
    }

    #[test]
    fn an_archive_is_aligned_to_its_transcript() {
        let rendered = vec![
            (k(ann(), "the boat is at pier 7"), at(1)),
            (k(Some(Speaker::Agent), "Noted."), at(2)),
            (k(ann(), "where is   the\nboat?"), at(3)),
            (k(Some(Speaker::Agent), "At pier 7."), at(4)),
            // The transcript grew after the archive was made.
            (k(ann(), "thanks"), at(5)),
            (k(Some(Speaker::Agent), "You are welcome."), at(6)),
        ];
        // A prefix of it, the agent under another name (the hook's).
        let archive = vec![
            (k(ann(), "the boat is at pier 7"), ()),
            (k(Some(Speaker::Agent), "Noted."), ()),
            (k(ann(), "where is the boat?"), ()),
        ];
        assert_eq!(align(&archive, &rendered), vec![at(1), at(2), at(3)]);
        // Messages the transcript lacks take a neighbour's time: the one
        // before, else the one after.
        let archive = vec![
            (k(Some(Speaker::User), "not in the transcript"), ()),
            (k(ann(), "the boat is at pier 7"), ()),
            (k(Some(Speaker::Summary), "a summary"), ()),
            // Said by someone else: no match.
            (k(Some(Speaker::User), "where is the boat?"), ()),
            (k(Some(Speaker::Agent), "At pier 7."), ()),
        ];
        assert_eq!(
            align(&archive, &rendered),
            vec![at(1), at(1), at(1), at(1), at(4)]
        );
        // Out of order: matched in order only, the rest take neighbours'.
        let archive = vec![
            (k(Some(Speaker::Agent), "At pier 7."), ()),
            (k(ann(), "the boat is at pier 7"), ()),
        ];
        assert_eq!(align(&archive, &rendered), vec![at(4), at(4)]);
        // Nothing matched: nothing dated.
        let archive = vec![(k(Some(Speaker::User), "hello"), ())];
        assert_eq!(align(&archive, &rendered), vec![None]);
        assert!(align::<()>(&[], &rendered).is_empty());
    }

    #[test]
    fn keys_compare_the_start_of_the_text() {
        let long = "word ".repeat(100);
        let cut = format!("{}…", &long[..200]);
        assert_eq!(k(ann(), &long), k(ann(), &cut));
        assert_ne!(k(ann(), "a"), k(Some(Speaker::User), "a"));
        let bob = Some(Speaker::Person {
            name: "Bob".into(),
            time: "08:00".into(),
        });
        assert_ne!(k(ann(), "a"), k(bob, "a"));
    }
}
