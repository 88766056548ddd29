//! The times a question names, read against when and where it is asked.
//!
//! [`read`] takes a question's words (as `search::question::words` splits
//! them) and the moment and timezone it is asked in ([`Asked`]), and finds:
//! - **windows** ([`Window`], UTC instants, `from` inclusive, `to`
//!   exclusive) for the times it names, each a whole local day, week
//!   (Monday to Sunday), month or year in the asker's timezone;
//! - whether it asks **when** something happened (`when did …`, `what
//!   day …`, `how long ago …`), so the answer's date matters more than
//!   any window;
//! - which words named the time: a question with no other word that is not
//!   a stop word asks only about a time ("what did we say last Tuesday?").
//!
//! The forms, and how each is read (the table in docs/recall.md):
//!
//! | form | window |
//! |---|---|
//! | `today`, `yesterday`, `the day before yesterday` | that local day |
//! | `N days ago` (digits or one to twelve, `a`) | that local day |
//! | `N weeks ago`, `last week`, `this week` | that calendar week, Monday to Sunday |
//! | `N months ago`, `last month`, `this month` | that calendar month |
//! | `N years ago`, `last year`, `this year` | that calendar year |
//! | `last Tuesday` | the latest Tuesday before today |
//! | `on Tuesday`, `Tuesday` | the latest Tuesday, today included |
//! | `on 8 May`, `May 8th`, `8 May 2023`, `2023-05-08` | that day; without a year, the latest one not after today |
//! | `in May`, `May 2023` | that month; without a year, the latest May not after this month |
//! | `in 2023` | that year |
//! | `when did …`, `when was …`, `what day …`, `what date …`, `how long ago …` | none: asks when |
//!
//! A time the asker has not reached yet (`this week`'s rest) stays in its
//! window: recall filters nothing by it, it only favours what falls inside.

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;

use crate::search::question::MONTHS;

/// When and where a question is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    pub at: DateTime<Utc>,
    pub tz: Tz,
}

impl Asked {
    /// The asker's local date.
    fn today(&self) -> NaiveDate {
        self.at.with_timezone(&self.tz).date_naive()
    }

    /// The first instant of local date `d` (a day that starts in a
    /// daylight-saving gap starts at the gap's end).
    fn start_of(&self, d: NaiveDate) -> DateTime<Utc> {
        g2_core::archive::dates::instant(self.tz, d.and_time(chrono::NaiveTime::MIN))
    }

    /// The window of local dates `first..=last`.
    fn days(&self, first: NaiveDate, last: NaiveDate) -> Window {
        Window {
            from: self.start_of(first),
            to: self.start_of(last + Days::new(1)),
        }
    }
}

/// A span of time, `from` inclusive, `to` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl Window {
    /// Whether the span `first..=last` (a passage's messages) touches it.
    pub fn touches(&self, first: DateTime<Utc>, last: DateTime<Utc>) -> bool {
        first < self.to && last >= self.from
    }
}

/// What a question says about time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct When {
    pub windows: Vec<Window>,
    /// Beside `windows`: named only by everyday words ("today", "tonight",
    /// "this week", "on Tuesday"), which also speak of plans; a date, a
    /// day "ago", "yesterday" or "last …" names a time past.
    pub loose: Vec<bool>,
    /// It asks when something happened.
    pub asks_when: bool,
    /// The indexes of the words that named a time (or asked when).
    pub words: Vec<usize>,
}

const WEEKDAYS: &[(&str, Weekday)] = &[
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

const NUMBERS: &[(&str, u32)] = &[
    ("a", 1),
    ("an", 1),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
];

fn weekday(w: &str) -> Option<Weekday> {
    let w = w
        .strip_suffix('s')
        .filter(|s| s.ends_with("day"))
        .unwrap_or(w);
    WEEKDAYS.iter().find(|(n, _)| *n == w).map(|(_, d)| *d)
}

fn month(w: &str) -> Option<u32> {
    MONTHS.iter().find(|(n, _)| *n == w).map(|(_, m)| *m)
}

fn number(w: &str) -> Option<u32> {
    NUMBERS
        .iter()
        .find(|(n, _)| *n == w)
        .map(|(_, v)| *v)
        .or_else(|| w.parse().ok().filter(|n| (1..=1000).contains(n)))
}

fn year(w: &str) -> Option<i32> {
    (w.len() == 4)
        .then(|| w.parse().ok())
        .flatten()
        .filter(|y| (1900..=2200).contains(y))
}

/// A day of the month (`8`, `8th`, `1st`).
fn day_number(w: &str) -> Option<u32> {
    let digits: &str = &w[..w.len() - w.trim_start_matches(|c: char| c.is_ascii_digit()).len()];
    let suffix = &w[digits.len()..];
    if digits.is_empty() || !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// The Monday of `d`'s week.
fn monday(d: NaiveDate) -> NaiveDate {
    d - Days::new(u64::from(d.weekday().num_days_from_monday()))
}

fn first_of_month(d: NaiveDate) -> NaiveDate {
    d.with_day(1).unwrap_or(d)
}

fn last_of_month(d: NaiveDate) -> NaiveDate {
    first_of_month(d) + Months::new(1) - Days::new(1)
}

/// The latest `day` of `month` not after `today` (this year's, else last
/// year's); None when no such date exists (30 February).
fn latest(today: NaiveDate, month: u32, day: u32) -> Option<NaiveDate> {
    let this = NaiveDate::from_ymd_opt(today.year(), month, day);
    match this {
        Some(d) if d <= today => Some(d),
        _ => NaiveDate::from_ymd_opt(today.year() - 1, month, day),
    }
}

/// Reads the times `words` name, asked at `asked` (see the module doc).
pub fn read(words: &[String], asked: &Asked) -> When {
    let today = asked.today();
    let w = |i: usize| words.get(i).map(String::as_str);
    let mut when = When::default();
    let mut used = vec![false; words.len()];
    let take = |when: &mut When,
                used: &mut Vec<bool>,
                range: std::ops::Range<usize>,
                win: Option<Window>,
                loose: bool| {
        for i in range {
            if i < used.len() && !used[i] {
                used[i] = true;
                when.words.push(i);
            }
        }
        if let Some(win) = win
            && !when.windows.contains(&win)
        {
            when.windows.push(win);
            when.loose.push(loose);
        }
    };
    let mut i = 0;
    while i < words.len() {
        if used[i] {
            i += 1;
            continue;
        }
        let here = words[i].as_str();
        // "when did", "what day", "how long ago".
        if matches!(
            (here, w(i + 1)),
            (
                "when",
                Some(
                    "did"
                        | "was"
                        | "were"
                        | "is"
                        | "are"
                        | "do"
                        | "does"
                        | "have"
                        | "has"
                        | "had"
                        | "will"
                )
            ) | ("what", Some("day" | "date" | "time" | "year" | "month"))
                | ("which", Some("day" | "date" | "year" | "month"))
        ) || (here == "how" && w(i + 1) == Some("long") && w(i + 2) == Some("ago"))
        {
            when.asks_when = true;
            let n = if here == "how" { 3 } else { 2 };
            take(&mut when, &mut used, i..i + n, None, false);
            i += n;
            continue;
        }
        let day = |d: NaiveDate| Some(asked.days(d, d));
        match here {
            "today" | "tonight" => {
                take(&mut when, &mut used, i..i + 1, day(today), true);
                i += 1;
                continue;
            }
            "yesterday" => {
                // "the day before yesterday".
                let before = i >= 2 && w(i - 2) == Some("day") && w(i - 1) == Some("before");
                if before {
                    take(
                        &mut when,
                        &mut used,
                        i - 2..i + 1,
                        day(today - Days::new(2)),
                        false,
                    );
                } else {
                    take(
                        &mut when,
                        &mut used,
                        i..i + 1,
                        day(today - Days::new(1)),
                        false,
                    );
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        // "N days|weeks|months|years ago".
        if let (Some(n), Some(unit), Some("ago")) = (number(here), w(i + 1), w(i + 2)) {
            let n = u64::from(n);
            let win = match unit.trim_end_matches('s') {
                "day" => day(today - Days::new(n)),
                "week" => {
                    let m = monday(today - Days::new(7 * n));
                    Some(asked.days(m, m + Days::new(6)))
                }
                "month" => {
                    let d = today - Months::new(u32::try_from(n).unwrap_or(u32::MAX).min(12_000));
                    Some(asked.days(first_of_month(d), last_of_month(d)))
                }
                "year" => {
                    let y = today.year() - i32::try_from(n).unwrap_or(i32::MAX).min(1000);
                    NaiveDate::from_ymd_opt(y, 1, 1)
                        .zip(NaiveDate::from_ymd_opt(y, 12, 31))
                        .map(|(a, b)| asked.days(a, b))
                }
                _ => None,
            };
            if win.is_some() {
                take(&mut when, &mut used, i..i + 3, win, false);
                i += 3;
                continue;
            }
        }
        // "last|this week|month|year|<weekday>".
        if matches!(here, "last" | "this" | "past") {
            let last = here != "this";
            let win = match w(i + 1) {
                Some("week") => {
                    let m = monday(today) - Days::new(if last { 7 } else { 0 });
                    Some(asked.days(m, m + Days::new(6)))
                }
                Some("month") => {
                    let d = if last { today - Months::new(1) } else { today };
                    Some(asked.days(first_of_month(d), last_of_month(d)))
                }
                Some("year") => {
                    let y = today.year() - i32::from(last);
                    NaiveDate::from_ymd_opt(y, 1, 1)
                        .zip(NaiveDate::from_ymd_opt(y, 12, 31))
                        .map(|(a, b)| asked.days(a, b))
                }
                Some(next) => weekday(next).and_then(|wd| {
                    // The latest such day before today ("this Tuesday":
                    // this week's, today included).
                    let back = (7 + today.weekday().num_days_from_monday()
                        - wd.num_days_from_monday())
                        % 7;
                    let back = if last && back == 0 { 7 } else { back };
                    let d = today - Days::new(u64::from(back));
                    (last || d >= monday(today)).then(|| asked.days(d, d))
                }),
                None => None,
            };
            if win.is_some() {
                take(&mut when, &mut used, i..i + 2, win, !last);
                i += 2;
                continue;
            }
        }
        // A date: "8 May [2023]", "May 8th[, 2023]", "2023-05-08".
        if let Some(y) = year(here)
            && let (Some(m), Some(d)) = (
                w(i + 1).and_then(|m| m.parse::<u32>().ok()),
                w(i + 2).and_then(day_number),
            )
            && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
        {
            take(&mut when, &mut used, i..i + 3, day(date), false);
            i += 3;
            continue;
        }
        if let Some(m) = month(here) {
            let next_day = w(i + 1).and_then(day_number);
            let prev_day = i
                .checked_sub(1)
                .and_then(|p| if used[p] { None } else { w(p) })
                .and_then(day_number);
            if let Some(d) = next_day.or(prev_day) {
                let (start, after) = if next_day.is_some() {
                    (i, i + 2)
                } else {
                    (i - 1, i + 1)
                };
                let with_year = w(after).and_then(year);
                let date = match with_year {
                    Some(y) => NaiveDate::from_ymd_opt(y, m, d),
                    None => latest(today, m, d),
                };
                if let Some(date) = date {
                    let end = after + usize::from(with_year.is_some());
                    let start = if start > 0 && w(start - 1) == Some("on") {
                        start - 1
                    } else {
                        start
                    };
                    take(&mut when, &mut used, start..end, day(date), false);
                    i = end;
                    continue;
                }
            }
            // "in May", "May 2023" ("may" alone is a verb).
            let with_year = w(i + 1).and_then(year);
            let after_in = i > 0 && w(i - 1) == Some("in");
            if with_year.is_some() || after_in {
                let y = with_year.unwrap_or_else(|| {
                    if m <= today.month() {
                        today.year()
                    } else {
                        today.year() - 1
                    }
                });
                if let Some(first) = NaiveDate::from_ymd_opt(y, m, 1) {
                    let start = if after_in { i - 1 } else { i };
                    let end = i + 1 + usize::from(with_year.is_some());
                    take(
                        &mut when,
                        &mut used,
                        start..end,
                        Some(asked.days(first, last_of_month(first))),
                        false,
                    );
                    i = end;
                    continue;
                }
            }
        }
        // "in 2023".
        if here == "in"
            && let Some(y) = w(i + 1).and_then(year)
            && let (Some(a), Some(b)) = (
                NaiveDate::from_ymd_opt(y, 1, 1),
                NaiveDate::from_ymd_opt(y, 12, 31),
            )
        {
            take(
                &mut when,
                &mut used,
                i..i + 2,
                Some(asked.days(a, b)),
                false,
            );
            i += 2;
            continue;
        }
        // "on Tuesday", "Tuesday": the latest, today included.
        if let Some(wd) = weekday(here) {
            let back = (7 + today.weekday().num_days_from_monday() - wd.num_days_from_monday()) % 7;
            let d = today - Days::new(u64::from(back));
            let start = if i > 0 && w(i - 1) == Some("on") && !used[i - 1] {
                i - 1
            } else {
                i
            };
            take(&mut when, &mut used, start..i + 1, day(d), true);
        }
        i += 1;
    }
    when.words.sort_unstable();
    when
}

#[cfg(test)]
mod tests;

/// The local day `at` (RFC 3339) falls on in `tz`, `2026-05-08`; with an
/// `at_end` on a later day, both: `2026-05-08…05-10` (the year repeated
/// only when it changes). A time that does not parse shows as given, cut
/// to its date.
pub fn day(at: &str, at_end: Option<&str>, tz: Tz) -> String {
    let local = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&tz).date_naive())
    };
    let Some(first) = local(at) else {
        return at.get(..10).unwrap_or(at).to_string();
    };
    match at_end.and_then(local).filter(|last| *last > first) {
        None => first.format("%Y-%m-%d").to_string(),
        Some(last) if last.year() == first.year() => {
            format!("{}…{}", first.format("%Y-%m-%d"), last.format("%m-%d"))
        }
        Some(last) => format!("{}…{}", first.format("%Y-%m-%d"), last.format("%Y-%m-%d")),
    }
}
