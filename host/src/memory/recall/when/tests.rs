use super::*;
use chrono::{Duration, TimeZone};

fn words(q: &str) -> Vec<String> {
    crate::search::question::words(q).collect()
}

/// Asked on Thursday 14 May 2026 at 10:00 in Berlin (UTC+2).
fn thursday() -> Asked {
    Asked {
        at: Utc.with_ymd_and_hms(2026, 5, 14, 8, 0, 0).unwrap(),
        tz: chrono_tz::Europe::Berlin,
    }
}

/// The local dates a window spans, in the asker's zone.
fn span(a: &Asked, w: &Window) -> (String, String) {
    let f = w.from.with_timezone(&a.tz);
    let l = (w.to - Duration::seconds(1)).with_timezone(&a.tz);
    (
        f.format("%Y-%m-%d").to_string(),
        l.format("%Y-%m-%d").to_string(),
    )
}

fn spans(q: &str, a: &Asked) -> Vec<(String, String)> {
    read(&words(q), a)
        .windows
        .iter()
        .map(|w| span(a, w))
        .collect()
}

fn one(q: &str, a: &Asked) -> (String, String) {
    let s = spans(q, a);
    assert_eq!(s.len(), 1, "{q}: {s:?}");
    s[0].clone()
}

fn d(s: &str) -> (String, String) {
    (s.to_string(), s.to_string())
}

fn r(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn every_form_of_the_table_reads_as_documented() {
    let a = thursday();
    assert_eq!(one("what did we say today?", &a), d("2026-05-14"));
    assert_eq!(one("what happened yesterday", &a), d("2026-05-13"));
    assert_eq!(one("the day before yesterday", &a), d("2026-05-12"));
    assert_eq!(one("three days ago", &a), d("2026-05-11"));
    assert_eq!(one("3 days ago", &a), d("2026-05-11"));
    assert_eq!(one("a week ago", &a), r("2026-05-04", "2026-05-10"));
    assert_eq!(one("last week", &a), r("2026-05-04", "2026-05-10"));
    assert_eq!(one("this week", &a), r("2026-05-11", "2026-05-17"));
    assert_eq!(one("two months ago", &a), r("2026-03-01", "2026-03-31"));
    assert_eq!(one("last month", &a), r("2026-04-01", "2026-04-30"));
    assert_eq!(one("this month", &a), r("2026-05-01", "2026-05-31"));
    assert_eq!(one("last year", &a), r("2025-01-01", "2025-12-31"));
    assert_eq!(one("a year ago", &a), r("2025-01-01", "2025-12-31"));
    assert_eq!(one("what did we say last Tuesday", &a), d("2026-05-12"));
    assert_eq!(one("last Thursday", &a), d("2026-05-07"), "not today");
    assert_eq!(one("on Thursday", &a), d("2026-05-14"), "today included");
    assert_eq!(one("on Friday", &a), d("2026-05-08"));
    assert_eq!(one("this Tuesday", &a), d("2026-05-12"));
    assert_eq!(one("on 8 May", &a), d("2026-05-08"));
    assert_eq!(one("May 8th", &a), d("2026-05-08"));
    assert_eq!(one("on May 20", &a), d("2025-05-20"), "not after today");
    assert_eq!(one("8 May 2023", &a), d("2023-05-08"));
    assert_eq!(one("May 8, 2023", &a), d("2023-05-08"));
    assert_eq!(one("2023-05-08", &a), d("2023-05-08"));
    assert_eq!(one("in May", &a), r("2026-05-01", "2026-05-31"));
    assert_eq!(one("in June", &a), r("2025-06-01", "2025-06-30"));
    assert_eq!(one("May 2023", &a), r("2023-05-01", "2023-05-31"));
    assert_eq!(one("in 2023", &a), r("2023-01-01", "2023-12-31"));
}

#[test]
fn when_questions_ask_for_a_date_and_plain_ones_name_no_time() {
    let a = thursday();
    for q in [
        "when did Ann start the new job?",
        "When was the boat moved",
        "what day is the party",
        "how long ago did we fix the printer",
    ] {
        let w = read(&words(q), &a);
        assert!(w.asks_when && w.windows.is_empty(), "{q}: {w:?}");
    }
    for q in [
        "where is the boat moored?",
        "we may go to the sea",
        "the last train",
        "a day at the beach",
        "what is the time",
    ] {
        let w = read(&words(q), &a);
        assert!(w.windows.is_empty() && !w.asks_when, "{q}: {w:?}");
    }
}

#[test]
fn the_words_that_named_a_time_are_marked() {
    let a = thursday();
    let q = words("what did Bob say in May about the boat");
    let w = read(&q, &a);
    let named: Vec<&str> = w.words.iter().map(|&i| q[i].as_str()).collect();
    assert_eq!(named, ["in", "may"]);
    let q = words("when did Ann start the job last week");
    let w = read(&q, &a);
    let named: Vec<&str> = w.words.iter().map(|&i| q[i].as_str()).collect();
    assert_eq!(named, ["when", "did", "last", "week"]);
    assert!(w.asks_when && w.windows.len() == 1);
}

#[test]
fn a_days_window_is_the_askers_local_day_around_midnight() {
    // 00:30 on 15 May in Tokyo is still 14 May in UTC: "yesterday" there
    // is Tokyo's 14 May, from 15:00 UTC on the 13th.
    let tokyo = Asked {
        at: Utc.with_ymd_and_hms(2026, 5, 14, 15, 30, 0).unwrap(),
        tz: chrono_tz::Asia::Tokyo,
    };
    let w = read(&words("yesterday"), &tokyo).windows[0];
    assert_eq!(w.from, Utc.with_ymd_and_hms(2026, 5, 13, 15, 0, 0).unwrap());
    assert_eq!(w.to, Utc.with_ymd_and_hms(2026, 5, 14, 15, 0, 0).unwrap());
    // The same instant asked in UTC: yesterday is 13 May, UTC's.
    let utc = Asked {
        tz: chrono_tz::UTC,
        ..tokyo
    };
    assert_eq!(one("yesterday", &utc), d("2026-05-13"));
    // A passage's span touches a window when any of it falls inside.
    let t = |h| Utc.with_ymd_and_hms(2026, 5, 13, h, 0, 0).unwrap();
    assert!(w.touches(t(14), t(16)));
    assert!(!w.touches(t(10), t(14)));
}

#[test]
fn a_day_that_starts_in_a_daylight_saving_gap_starts_when_it_can() {
    // Santiago skipped from 00:00 to 01:00 on 8 September 2024.
    let a = Asked {
        at: Utc.with_ymd_and_hms(2024, 9, 9, 15, 0, 0).unwrap(),
        tz: chrono_tz::America::Santiago,
    };
    let w = read(&words("yesterday"), &a).windows[0];
    assert_eq!(w.from, Utc.with_ymd_and_hms(2024, 9, 8, 4, 0, 0).unwrap());
}

#[test]
fn a_day_is_the_local_date_and_a_span_names_both_ends() {
    let berlin: Tz = "Europe/Berlin".parse().unwrap();
    // 23:30 UTC is the next day in Berlin.
    assert_eq!(day("2026-05-07T23:30:00Z", None, berlin), "2026-05-08");
    assert_eq!(day("2026-05-07T23:30:00Z", None, Tz::UTC), "2026-05-07");
    assert_eq!(
        day("2026-05-08T09:00:00Z", Some("2026-05-10T09:00:00Z"), berlin),
        "2026-05-08…05-10"
    );
    assert_eq!(
        day(
            "2025-12-31T09:00:00Z",
            Some("2026-01-02T09:00:00Z"),
            Tz::UTC
        ),
        "2025-12-31…2026-01-02"
    );
    // The same day twice is one day; a bad time shows as its date part.
    assert_eq!(
        day("2026-05-08T09:00:00Z", Some("2026-05-08T10:00:00Z"), berlin),
        "2026-05-08"
    );
    assert_eq!(day("2026-05-08 garbled", None, berlin), "2026-05-08");
}
