//! When an archive's messages were said, as its Markdown shows it: the
//! header's `Archived:` time and timezone, a day line (`### Tue, May 8,
//! 2026`) wherever the local day changes, and a person's `(09:00)`.
//! [`render`](super::render) writes them; recall's passages read them back
//! ([`read`]), so an archive dates its own messages however it is copied.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
/// Timezones by IANA name (re-exported: every user of the archive format
/// names them the same way).
pub use chrono_tz::Tz;

/// How a day line names its day, after `### `.
const DAY: &str = "%a, %b %-d, %Y";
/// How the header names the archive's time, after `Archived: `.
const ARCHIVED: &str = "%b %-d, %Y, %-I:%M %p";

/// The line that opens a local day's messages.
pub fn day_line(d: NaiveDate) -> String {
    format!("### {}", d.format(DAY))
}

/// The day a day line names (the whole line, as [`day_line`] writes it).
pub fn read_day_line(line: &str) -> Option<NaiveDate> {
    let rest = line.trim_end().strip_prefix("### ")?;
    NaiveDate::parse_from_str(rest, DAY).ok()
}

/// The header's time: `Nov 21, 2026, 3:39 PM (Europe/Berlin)`.
pub fn archived_line(at: &DateTime<Tz>) -> String {
    format!("{} ({})", at.format(ARCHIVED), at.timezone().name())
}

/// Whether the header names its timezone: an archive written since day
/// lines were, whose `### …` lines g2 wrote (a member's are escaped). In
/// an older archive a line like one is someone's words.
pub fn names_zone(markdown: &str) -> bool {
    markdown
        .lines()
        .take(8)
        .find_map(|l| l.strip_prefix("Archived: "))
        .and_then(|l| l.trim_end().rsplit_once(" ("))
        .and_then(|(_, z)| z.strip_suffix(')'))
        .is_some_and(|z| z.parse::<Tz>().is_ok())
}

/// The header's `Archived:` time and the timezone it names (none in
/// archives made before they named one: read in `fallback`).
pub fn read_archived(markdown: &str, fallback: Tz) -> Option<(DateTime<Utc>, Tz)> {
    let line = markdown
        .lines()
        .take(8)
        .find_map(|l| l.strip_prefix("Archived: "))?
        .trim_end();
    let (time, tz) = match line.rsplit_once(" (") {
        Some((time, zone)) => (time, zone.strip_suffix(')')?.parse::<Tz>().ok()?),
        None => (line, fallback),
    };
    let local = NaiveDateTime::parse_from_str(time, ARCHIVED).ok()?;
    Some((instant(tz, local), tz))
}

/// The instant of a local time (the earlier one of an hour that repeats,
/// the gap's end for one that never happens).
pub fn instant(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    (0..4)
        .find_map(|h| {
            tz.from_local_datetime(&(local + Duration::hours(h)))
                .earliest()
        })
        .map_or_else(|| Utc.from_utc_datetime(&local), |t| t.with_timezone(&Utc))
}

/// A person's `HH:MM`.
fn clock(time: &str) -> Option<NaiveTime> {
    NaiveTime::parse_from_str(time, "%H:%M").ok()
}

/// One message of the body as the dating sees it: the day line before it
/// (if any since the last message) and a person's `HH:MM`.
#[derive(Debug, Clone, Default)]
pub struct Mark {
    pub day: Option<NaiveDate>,
    pub clock: Option<String>,
}

/// When each message was said, from its marks, in `tz`, with `archived`
/// the header's time. With day lines: its day at its `HH:MM`, else at the
/// time of the message before it that day (the day's start for the
/// first); messages before the first day line take the first dated one's
/// time. Without (archives made before day lines): walked back from the
/// archive's time through the people's `HH:MM`, a day earlier whenever a
/// time is later than the one after it; a message without a time takes
/// the next one's. None only when nothing dates it at all.
pub fn read(marks: &[Mark], tz: Tz, archived: Option<DateTime<Utc>>) -> Vec<Option<DateTime<Utc>>> {
    if marks.iter().any(|m| m.day.is_some()) {
        forward(marks, tz)
    } else {
        backward(marks, tz, archived)
    }
}

fn forward(marks: &[Mark], tz: Tz) -> Vec<Option<DateTime<Utc>>> {
    let mut out: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(marks.len());
    let mut day: Option<NaiveDate> = None;
    let mut last: Option<DateTime<Utc>> = None;
    for m in marks {
        if let Some(d) = m.day {
            day = Some(d);
            last = Some(instant(tz, d.and_time(NaiveTime::MIN)));
        }
        let at = match (day, m.clock.as_deref().and_then(clock)) {
            (Some(d), Some(c)) => Some(instant(tz, d.and_time(c))),
            _ => last,
        };
        last = at.or(last);
        out.push(at);
    }
    let first = out.iter().flatten().next().copied();
    out.iter().map(|t| t.or(first)).collect()
}

fn backward(marks: &[Mark], tz: Tz, archived: Option<DateTime<Utc>>) -> Vec<Option<DateTime<Utc>>> {
    let Some(archived) = archived else {
        return vec![None; marks.len()];
    };
    let mut cursor = archived.with_timezone(&tz).naive_local();
    let mut out = vec![None; marks.len()];
    for (i, m) in marks.iter().enumerate().rev() {
        if let Some(c) = m.clock.as_deref().and_then(clock) {
            let mut at = cursor.date().and_time(c);
            if at > cursor {
                at -= Duration::days(1);
            }
            cursor = at;
        }
        out[i] = Some(instant(tz, cursor));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn mark(day: Option<&str>, clock: Option<&str>) -> Mark {
        Mark {
            day: day.map(|d| d.parse().unwrap()),
            clock: clock.map(String::from),
        }
    }

    #[test]
    fn day_lines_and_headers_read_back_what_is_written() {
        let d: NaiveDate = "2026-05-08".parse().unwrap();
        assert_eq!(day_line(d), "### Fri, May 8, 2026");
        assert_eq!(read_day_line(&day_line(d)), Some(d));
        assert_eq!(read_day_line("### Friday plans"), None);
        assert_eq!(read_day_line("\\### Fri, May 8, 2026"), None);
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let at = utc("2026-05-08T07:30:00Z").with_timezone(&berlin);
        let line = archived_line(&at);
        assert_eq!(line, "May 8, 2026, 9:30 AM (Europe/Berlin)");
        let md = format!("# t\n\nArchived: {line}\n\n---\n\n");
        assert_eq!(
            read_archived(&md, Tz::UTC),
            Some((utc("2026-05-08T07:30:00Z"), berlin))
        );
        // An archive from before zones were named reads in the fallback.
        let old = "# t\n\nArchived: May 8, 2026, 9:30 AM\n\n---\n";
        assert_eq!(
            read_archived(old, berlin),
            Some((utc("2026-05-08T07:30:00Z"), berlin))
        );
        assert_eq!(
            read_archived("# t\n\nArchived: x (Nowhere/City)\n", berlin),
            None
        );
    }

    #[test]
    fn day_lines_date_the_messages_after_them() {
        let lagos: Tz = "Africa/Lagos".parse().unwrap();
        let marks = [
            mark(None, None),
            mark(Some("2026-05-05"), Some("22:10")),
            mark(None, None),
            mark(Some("2026-05-06"), None),
            mark(None, Some("08:00")),
        ];
        let got = read(&marks, lagos, None);
        assert_eq!(
            got,
            [
                Some(utc("2026-05-05T21:10:00Z")),
                Some(utc("2026-05-05T21:10:00Z")),
                Some(utc("2026-05-05T21:10:00Z")),
                Some(utc("2026-05-05T23:00:00Z")),
                Some(utc("2026-05-06T07:00:00Z")),
            ]
        );
    }

    #[test]
    fn old_archives_are_walked_back_from_their_time() {
        let marks = [
            mark(None, Some("22:00")),
            mark(None, None),
            mark(None, Some("09:00")),
            mark(None, None),
        ];
        let got = read(&marks, Tz::UTC, Some(utc("2026-05-08T10:00:00Z")));
        assert_eq!(
            got,
            [
                Some(utc("2026-05-07T22:00:00Z")),
                Some(utc("2026-05-08T09:00:00Z")),
                Some(utc("2026-05-08T09:00:00Z")),
                Some(utc("2026-05-08T10:00:00Z")),
            ]
        );
        assert_eq!(read(&marks, Tz::UTC, None), [None, None, None, None]);
    }
}
