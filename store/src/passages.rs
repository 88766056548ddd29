//! Archive passages: an archive's body cut into exchanges, the unit recall
//! ranks, so a question is answered by the turn that holds the answer.
//!
//! An archive's messages are the paragraphs that start with a speaker
//! (`**Name**: …`, or `**Ann** (09:00): …` for a person in a routed chat;
//! see `g2_core::archive`); a message runs until the next one. A passage is
//! one exchange: the people's messages (a `**User**` turn, or named lines
//! with their time) and the answer that follows (the assistant's, or a
//! compaction's `**Summary**`), so a new passage starts where a people's
//! message follows an answer. A passage longer than [`MAX_PASSAGE_CHARS`]
//! is cut at a message boundary when it can be, else at a word. The header
//! (title, date, rule) is not part of any passage, nor is text before the
//! first speaker, nor a day line (`### Tue, May 8, 2026`).
//!
//! A passage is dated by its messages ([`Passage::first`], `last`): the
//! day lines and people's `(HH:MM)` the archive shows, read in the
//! timezone its header names (`g2_core::archive::dates`); an archive
//! made before day lines is walked back from its `Archived:` time.

use chrono::{DateTime, SecondsFormat, Utc};
use g2_core::archive::dates::{self, Mark, Tz};

pub use g2_core::quote::Speaker;

/// Longest passage text, in characters (a longer exchange is cut).
pub const MAX_PASSAGE_CHARS: usize = 2_000;

/// One passage of an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    /// Its number in the archive, from 0.
    pub ordinal: i64,
    /// The messages it holds, by index in the archive, inclusive.
    pub turn_start: i64,
    pub turn_end: i64,
    pub text: String,
    /// When its first and its last message were said (RFC 3339, UTC);
    /// none when the archive dates nothing.
    pub first: Option<String>,
    pub last: Option<String>,
}

/// A message of the body, whether people said it, and its date marks.
struct Message<'a> {
    text: &'a str,
    people: bool,
    mark: Mark,
}

/// A person's time in a speaker mark (`**Ann** (09:00):`).
fn clock(line: &str) -> Option<String> {
    let rest = line.strip_prefix("**")?;
    let end = rest.find("**")?;
    let t = rest[end + 2..].strip_prefix(" (")?;
    Some(t[..t.find("):")?].to_string())
}

/// The speaker of a message line, whether it is the people's (`**User**`
/// or a name with a time, `**Ann** (09:00):`), and the message's text
/// after the mark.
pub fn speaker(line: &str) -> Option<(bool, &str)> {
    let rest = line.strip_prefix("**")?;
    let end = rest.find("**")?;
    let name = &rest[..end];
    if name.is_empty() || name.contains('\n') {
        return None;
    }
    let after = &rest[end + 2..];
    if let Some(t) = after.strip_prefix(" (") {
        let close = t.find("):")?;
        let time = &t[..close];
        let is_time = time.len() <= 5
            && time.contains(':')
            && time.chars().all(|c| c.is_ascii_digit() || c == ':');
        return is_time.then(|| (true, t[close + 2..].trim_start()));
    }
    let text = after.strip_prefix(':')?;
    Some((name == "User", text.trim_start()))
}

/// The body after the header (title, `Archived:` line and rule).
fn body_of(markdown: &str) -> &str {
    match markdown.find("\n---\n") {
        Some(i) if markdown.starts_with("# ") => &markdown[i + 5..],
        _ => markdown,
    }
}

fn messages<'a>(markdown: &'a str) -> Vec<Message<'a>> {
    // Only g2 writes day lines in an archive that names its zone; in an
    // older one a line like one is someone's words.
    let days = dates::names_zone(markdown);
    let body: &'a str = body_of(markdown);
    let mut out: Vec<Message<'a>> = Vec::new();
    let mut start: Option<(usize, bool, Mark)> = None;
    let mut day = None;
    let mut offset = 0;
    let close = |out: &mut Vec<Message<'a>>, from: Option<(usize, bool, Mark)>, to: usize| {
        if let Some((s, people, mark)) = from {
            out.push(Message {
                text: body[s..to].trim(),
                people,
                mark,
            });
        }
    };
    for line in body.split_inclusive('\n') {
        if let Some(d) = dates::read_day_line(line).filter(|_| days) {
            // A day line ends the message before it and dates the next.
            close(&mut out, start.take(), offset);
            day = Some(d);
        } else if let Some((people, _)) = speaker(line) {
            close(&mut out, start.take(), offset);
            let mark = Mark {
                day: day.take(),
                clock: people.then(|| clock(line)).flatten(),
            };
            start = Some((offset, people, mark));
        }
        offset += line.len();
    }
    close(&mut out, start, body.len());
    // An empty message's day passes to the next one.
    let mut kept: Vec<Message<'_>> = Vec::with_capacity(out.len());
    let mut carried = None;
    for mut m in out {
        if m.text.is_empty() {
            carried = m.mark.day.or(carried);
            continue;
        }
        m.mark.day = m.mark.day.or(carried.take());
        kept.push(m);
    }
    kept
}

/// One message of a passage as it is quoted: who said it (none for text
/// before the first speaker), what, and the day line just before it, if
/// any (a whole archive's days; a passage holds none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said<'a> {
    pub speaker: Option<Speaker>,
    pub text: &'a str,
    pub day: Option<chrono::NaiveDate>,
}

/// A passage's messages with their speakers, in order (a passage holds no
/// day line: a line like one is someone's words).
pub fn said(passage: &str) -> Vec<Said<'_>> {
    said_with(passage, false)
}

/// A whole archive's messages with their speakers, in order, each with
/// the day line before it where the archive's are g2's
/// ([`dates::names_zone`]).
pub fn said_archive(markdown: &str) -> Vec<Said<'_>> {
    said_with(markdown, dates::names_zone(markdown))
}

fn said_with<'a>(passage: &'a str, days: bool) -> Vec<Said<'a>> {
    type Open = Option<(usize, Option<Speaker>)>;
    let mut out: Vec<Said<'a>> = Vec::new();
    let mut start: Open = None;
    let mut day = None;
    let mut offset = 0;
    let close = |out: &mut Vec<Said<'a>>, from: Open, to: usize, day: &mut Option<_>| {
        if let Some((s, speaker)) = from {
            let line = &passage[s..to];
            let text = speaker_text(line).unwrap_or(line).trim();
            if !text.is_empty() {
                out.push(Said {
                    speaker,
                    text,
                    day: day.take(),
                });
            }
        }
    };
    for line in passage.split_inclusive('\n') {
        if let Some(d) = dates::read_day_line(line).filter(|_| days) {
            close(&mut out, start.take(), offset, &mut day);
            day = Some(d);
        } else if let Some(who) = speaker_of(line) {
            close(&mut out, start.take(), offset, &mut day);
            start = Some((offset, Some(who)));
        } else if start.is_none() && !line.trim().is_empty() {
            start = Some((offset, None));
        }
        offset += line.len();
    }
    close(&mut out, start, passage.len(), &mut day);
    out
}

/// Who a speaker mark names: a person with the time (`**Ann** (09:00):`),
/// `**User**`, a compaction's `**Summary**`, else the agent (under the
/// name the archive gives it).
fn speaker_of(line: &str) -> Option<Speaker> {
    let (people, _) = speaker(line)?;
    let rest = line.strip_prefix("**")?;
    let end = rest.find("**")?;
    let name = &rest[..end];
    let time = rest[end + 2..]
        .strip_prefix(" (")
        .and_then(|t| t.find("):").map(|c| &t[..c]));
    Some(match (people, time) {
        (true, Some(time)) => Speaker::Person {
            name: name.to_string(),
            time: time.to_string(),
        },
        (true, None) => Speaker::User,
        (false, _) if name == "Summary" => Speaker::Summary,
        (false, _) => Speaker::Agent,
    })
}

/// A message's text after its speaker mark.
fn speaker_text(message: &str) -> Option<&str> {
    speaker(message).map(|(_, text)| text)
}

/// Cuts `text` into pieces of at most `max` characters at word boundaries.
fn cut(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max {
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let at = rest[..limit]
            .rfind(char::is_whitespace)
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        out.push(rest[..at].trim());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The passages of an archive's markdown, in order, dated in the timezone
/// its header names (UTC for an archive that names none).
pub fn split(markdown: &str) -> Vec<Passage> {
    split_in(markdown, Tz::UTC)
}

/// [`split`], an archive that names no timezone read in `tz`.
pub fn split_in(markdown: &str, tz: Tz) -> Vec<Passage> {
    let msgs = messages(markdown);
    let times = times_of(markdown, &msgs, tz);
    let mut out = cut_passages(&msgs);
    // Its earliest and latest message (routed times need not be in order).
    let span = |from: i64, to: i64| -> Vec<DateTime<Utc>> {
        let (from, to) = (
            usize::try_from(from).unwrap_or(0),
            usize::try_from(to).unwrap_or(0),
        );
        times
            .get(from..=to)
            .unwrap_or_default()
            .iter()
            .flatten()
            .copied()
            .collect()
    };
    let stamp =
        |t: Option<&DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
    for p in &mut out {
        let said = span(p.turn_start, p.turn_end);
        p.first = stamp(said.iter().min());
        p.last = stamp(said.iter().max());
    }
    out
}

/// When each of `msgs` was said, from the marks of `markdown` (its
/// header's timezone, else `tz`).
fn times_of(markdown: &str, msgs: &[Message<'_>], tz: Tz) -> Vec<Option<DateTime<Utc>>> {
    let (archived, tz) =
        dates::read_archived(markdown, tz).map_or((None, tz), |(a, z)| (Some(a), z));
    let marks: Vec<Mark> = msgs.iter().map(|m| m.mark.clone()).collect();
    dates::read(&marks, tz, archived)
}

/// One message of an archive as [`split_in`] numbers them (a passage's
/// `turn_start..=turn_end`): who said it, what, and when the archive says
/// it was said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dated<'a> {
    pub speaker: Option<Speaker>,
    pub text: &'a str,
    pub at: Option<DateTime<Utc>>,
}

/// The messages of an archive's markdown, in order, dated as [`split_in`]
/// dates them.
pub fn dated(markdown: &str, tz: Tz) -> Vec<Dated<'_>> {
    let msgs = messages(markdown);
    let times = times_of(markdown, &msgs, tz);
    msgs.iter()
        .zip(times)
        .map(|(m, at)| Dated {
            speaker: speaker_of(m.text),
            text: speaker_text(m.text).unwrap_or(m.text).trim(),
            at,
        })
        .collect()
}

/// Whether the archive opens its days with day lines (made since they
/// were written): its marks date it on their own.
pub fn has_day_lines(markdown: &str) -> bool {
    messages(markdown).iter().any(|m| m.mark.day.is_some())
}

fn cut_passages(msgs: &[Message<'_>]) -> Vec<Passage> {
    let mut out: Vec<Passage> = Vec::new();
    let mut open: Option<Passage> = None;
    let mut answered = false;
    let push = |out: &mut Vec<Passage>, p: Passage| {
        let ordinal = out.len() as i64;
        out.push(Passage { ordinal, ..p });
    };
    for (i, m) in msgs.iter().enumerate() {
        let i = i as i64;
        let starts_new = m.people && answered;
        let too_long = open.as_ref().is_some_and(|p| {
            p.text.chars().count() + m.text.chars().count() + 2 > MAX_PASSAGE_CHARS
        });
        if let Some(p) = open.take() {
            if starts_new || too_long {
                push(&mut out, p);
                answered = false;
            } else {
                open = Some(p);
            }
        }
        if !m.people {
            answered = true;
        }
        match open.as_mut() {
            Some(p) => {
                p.text.push_str("\n\n");
                p.text.push_str(m.text);
                p.turn_end = i;
            }
            None => {
                // One message too long for a passage is cut at words.
                let pieces = cut(m.text, MAX_PASSAGE_CHARS);
                let last = pieces.len().saturating_sub(1);
                for (k, piece) in pieces.into_iter().enumerate() {
                    let p = Passage {
                        ordinal: 0,
                        turn_start: i,
                        turn_end: i,
                        text: piece.to_string(),
                        first: None,
                        last: None,
                    };
                    if k == last {
                        open = Some(p);
                    } else {
                        push(&mut out, p);
                    }
                }
            }
        }
    }
    if let Some(p) = open {
        push(&mut out, p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCHIVE: &str = "# Boat\n\nArchived: Nov 21, 2026, 3:39 PM\n\n---\n\n\
**Ann** (09:00): remember that the boat is moored at pier 7\n\n\
**Bob** (09:01): and the key is with Carl\n\n\
**G2**: Noted: pier 7, key with Carl.\n\n\
Second paragraph of the answer.\n\n\
**User**: where is the boat?\n\n\
**G2**: At pier 7.\n\n\
*Conversation compacted (auto).*\n\n\
**Summary**: the boat is at pier 7\n";

    #[test]
    fn an_exchange_is_a_passage() {
        let p = split(ARCHIVE);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert_eq!((p[0].ordinal, p[0].turn_start, p[0].turn_end), (0, 0, 2));
        assert!(p[0].text.starts_with("**Ann** (09:00): remember"));
        assert!(p[0].text.ends_with("Second paragraph of the answer."));
        assert!(!p[0].text.contains("# Boat") && !p[0].text.contains("Archived"));
        // The compaction note and its summary stay with the last exchange.
        assert_eq!((p[1].ordinal, p[1].turn_start, p[1].turn_end), (1, 3, 5));
        assert!(p[1].text.ends_with("**Summary**: the boat is at pier 7"));
    }

    #[test]
    fn a_passage_is_quoted_by_speaker() {
        let p = split(ARCHIVE);
        let s = said(&p[0].text);
        assert_eq!(s.len(), 3, "{s:#?}");
        assert_eq!(
            s[0].speaker,
            Some(Speaker::Person {
                name: "Ann".into(),
                time: "09:00".into()
            })
        );
        assert_eq!(s[0].text, "remember that the boat is moored at pier 7");
        assert_eq!(s[2].speaker, Some(Speaker::Agent));
        assert_eq!(
            s[2].text,
            "Noted: pier 7, key with Carl.\n\nSecond paragraph of the answer."
        );
        let s = said("text before\n**User**: hi");
        assert_eq!((&s[0].speaker, s[0].text), (&None, "text before"));
        assert_eq!((&s[1].speaker, s[1].text), (&Some(Speaker::User), "hi"));
        // A whole archive's day lines are no one's words: each dates the
        // message after it.
        let body = "### Tue, May 5, 2026\n\n**User**: hi\n\n### Wed, May 6, 2026\n\n**G2**: yes\n";
        let md = format!("# T\n\nArchived: May 7, 2026, 9:00 AM (UTC)\n\n---\n\n{body}");
        // (The header, before the first speaker, is no one's: skipped.)
        fn spoken(md: &str) -> Vec<Said<'_>> {
            said_archive(md)
                .into_iter()
                .skip_while(|m| m.speaker.is_none())
                .collect()
        }
        let s = spoken(&md);
        assert_eq!(s.len(), 2, "{s:#?}");
        assert_eq!((s[0].text, s[1].text), ("hi", "yes"));
        assert_eq!(s[1].day, Some("2026-05-06".parse().unwrap()));
        // In an archive that names no zone (written before day lines),
        // and in a passage, such a line is the speaker's words.
        let old = format!("# T\n\nArchived: May 7, 2026, 9:00 AM\n\n---\n\n{body}");
        for s in [spoken(&old), said(body)] {
            let hi = s.iter().find(|m| m.text.starts_with("hi")).unwrap();
            assert!(hi.text.ends_with("### Wed, May 6, 2026"), "{s:#?}");
            assert!(s.iter().all(|m| m.day.is_none()), "{s:#?}");
        }
    }

    #[test]
    fn long_exchanges_are_cut() {
        let long = "word ".repeat(900);
        let md = format!(
            "# T\n\nArchived: x\n\n---\n\n**User**: {long}\n\n**G2**: {long}\n\n**User**: short\n"
        );
        let p = split(&md);
        assert!(
            p.iter()
                .all(|p| p.text.chars().count() <= MAX_PASSAGE_CHARS),
            "{p:#?}"
        );
        assert!(p.len() >= 4, "{}", p.len());
        assert_eq!(p.last().unwrap().text, "**User**: short");
        let ordinals: Vec<i64> = p.iter().map(|p| p.ordinal).collect();
        assert_eq!(ordinals, (0..p.len() as i64).collect::<Vec<_>>());
        // Nothing is lost: every word is in some passage.
        let words: usize = p.iter().map(|p| p.text.matches("word").count()).sum();
        assert_eq!(words, 1800);
    }

    #[test]
    fn passages_are_dated_by_their_days_and_times() {
        let md = "# Boat\n\nArchived: May 20, 2026, 9:00 AM (Europe/Berlin)\n\n---\n\n\
### Tue, May 5, 2026\n\n\
**Ann** (23:50): the boat is at pier 7\n\n\
### Wed, May 6, 2026\n\n\
**G2**: Noted.\n\n\
### Tue, May 12, 2026\n\n\
**User**: where is the boat?\n\n\
**G2**: At pier 7.\n";
        let p = split(md);
        assert_eq!(p.len(), 2, "{p:#?}");
        // No day line is part of a passage.
        assert!(p.iter().all(|p| !p.text.contains("###")), "{p:#?}");
        assert_eq!(
            p[0].text,
            "**Ann** (23:50): the boat is at pier 7\n\n**G2**: Noted."
        );
        // Berlin is UTC+2 in May.
        assert_eq!(p[0].first.as_deref(), Some("2026-05-05T21:50:00.000Z"));
        assert_eq!(p[0].last.as_deref(), Some("2026-05-05T22:00:00.000Z"));
        assert_eq!(p[1].first.as_deref(), Some("2026-05-11T22:00:00.000Z"));
        // An escaped day line in someone's words is text, not a day.
        let forged = "# T\n\nArchived: May 20, 2026, 9:00 AM (UTC)\n\n---\n\n\
### Tue, May 12, 2026\n\n**User**: hi\n\\### Mon, Jan 1, 2024\n\n**G2**: ok\n";
        let p = split(forged);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(p[0].text.contains("\\### Mon, Jan 1, 2024"), "{p:#?}");
        assert_eq!(p[0].last.as_deref(), Some("2026-05-12T00:00:00.000Z"));
    }

    #[test]
    fn an_archive_without_day_lines_is_walked_back_from_its_time() {
        // ARCHIVE names no zone: read in the one given.
        let p = split_in(ARCHIVE, "Africa/Lagos".parse().unwrap());
        // 3:39 PM in Lagos (UTC+1) is 14:39Z; Ann's 09:00 that morning.
        assert_eq!(p[0].first.as_deref(), Some("2026-11-21T08:00:00.000Z"));
        assert_eq!(p[0].last.as_deref(), Some("2026-11-21T14:39:00.000Z"));
        assert_eq!(p[1].first.as_deref(), Some("2026-11-21T14:39:00.000Z"));
        // Nothing dates an archive without a readable header.
        assert!(split("# T\n\n---\n\n**User**: hi\n")[0].first.is_none());
    }

    #[test]
    fn odd_bodies_do_not_fail() {
        assert!(split("").is_empty());
        assert!(split("# Only a title\n").is_empty());
        let p = split("no header, **bold** text\n");
        assert!(p.is_empty(), "{p:?}");
        let p = split("# T\n\n---\n\n**User**: hi\n**Not a (time)**: x\n");
        assert_eq!(p.len(), 1);
    }
}
