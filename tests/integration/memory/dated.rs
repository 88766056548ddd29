//! Memory dated by when things were said: a long session archived once
//! keeps each exchange's own day, in the group's timezone.

use std::path::Path;

use crate::support::*;

/// A transcript whose exchanges were said at the given times (RFC 3339).
fn dated_transcript(path: &Path, session_id: &str, exchanges: &[(&str, &str, &str)]) {
    let mut s = String::new();
    for (i, (at, user, assistant)) in exchanges.iter().enumerate() {
        for line in [
            serde_json::json!({
                "type": "user", "uuid": format!("u{i}"), "sessionId": session_id,
                "timestamp": at,
                "message": {"role": "user", "content": user}
            }),
            serde_json::json!({
                "type": "assistant", "uuid": format!("a{i}"), "sessionId": session_id,
                "timestamp": at,
                "message": {"role": "assistant", "content": [{"type": "text", "text": assistant}]}
            }),
        ] {
            s.push_str(&line.to_string());
            s.push('\n');
        }
    }
    std::fs::write(path, s).unwrap();
}

/// `g2 memory search` of `words` in `group`: each hit's (day, snippet).
fn days_of(
    home: &TestHome,
    env: &[(&str, &str)],
    group: &str,
    words: &str,
) -> Vec<(String, String)> {
    let out = home.g2_with(
        &["memory", "search", words, "--group", group, "--json"],
        env,
    );
    assert!(out.status.success(), "{out:?}");
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["day"].as_str().unwrap_or_default().to_string(),
                h["snippet"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The archive's day lines (an agent's own `### headings` are not).
fn day_lines(md: &str) -> Vec<&str> {
    md.lines()
        .filter(|l| g2_core::archive::dates::read_day_line(l).is_some())
        .collect()
}

#[test]
fn a_three_week_transcript_archived_once_dates_each_passage_by_its_day() {
    let home = TestHome::new();
    let env = [
        ("G2_MEMORY__TIMEZONE", "Europe/Berlin"),
        ("G2_MEMORY__EMBEDDINGS", "off"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("long.jsonl");
    // Monday evenings over three weeks, in one session; the last one just
    // before midnight UTC, which is already Tuesday in Berlin.
    dated_transcript(
        &t,
        "55555555-5555-4555-8555-555555555555",
        &[
            (
                "2026-05-04T17:00:00.000Z",
                "the kayak rental is booked",
                "noted the kayak",
            ),
            (
                "2026-05-11T17:00:00.000Z",
                "the garden shed needs paint",
                "noted the shed",
            ),
            (
                "2026-05-18T17:00:00.000Z",
                "the piano tuner comes friday",
                "noted the tuner",
            ),
            (
                "2026-05-25T22:30:00.000Z",
                "the lighthouse tour was great",
                "noted the tour",
            ),
        ],
    );
    let out = home.g2_with(
        &[
            "archive",
            t.to_str().unwrap(),
            "--group",
            "main",
            "--name",
            "Long",
        ],
        &env,
    );
    assert!(out.status.success(), "{out:?}");
    let archives = home.archives("main");
    assert_eq!(archives.len(), 1, "archived once");
    let md = std::fs::read_to_string(&archives[0]).unwrap();
    assert_eq!(
        day_lines(&md),
        [
            "### Mon, May 4, 2026",
            "### Mon, May 11, 2026",
            "### Mon, May 18, 2026",
            "### Tue, May 26, 2026",
        ],
        "{md}"
    );
    assert!(md.contains("(Europe/Berlin)"), "{md}");
    for (words, day) in [
        ("kayak rental", "2026-05-04"),
        ("garden shed", "2026-05-11"),
        ("piano tuner", "2026-05-18"),
        ("lighthouse tour", "2026-05-26"),
    ] {
        let hits = days_of(&home, &env, "main", words);
        assert_eq!(
            hits.first().map(|h| h.0.as_str()),
            Some(day),
            "{words}: {hits:?}"
        );
    }
    // A group asking in UTC sees the same moment on its own day: Monday.
    let utc = [("G2_MEMORY__EMBEDDINGS", "off")];
    let hits = days_of(&home, &utc, "main", "lighthouse tour");
    assert_eq!(hits[0].0, "2026-05-25", "{hits:?}");
}

#[test]
fn a_timezones_midnight_splits_the_days_of_a_real_transcript() {
    // Its first exchange is at 22:59 UTC, the rest after 23:00 UTC:
    // across midnight in Lagos (UTC+1), the same day in UTC.
    let f = fixture("ccl-v1.0.51-summary-lines-37f83ec9.jsonl");
    // A turn without a time of its own (the `**User**` and the agent's)
    // is dated by its day: that day's start in the zone.
    for (zone, group, days, first, second) in [
        (
            "Africa/Lagos",
            "main",
            vec!["### Mon, Jul 14, 2025", "### Tue, Jul 15, 2025"],
            "2025-07-13T23:00:00.000Z",
            "2025-07-14T23:00:00.000Z",
        ),
        (
            "UTC",
            "main",
            vec!["### Mon, Jul 14, 2025"],
            "2025-07-14T00:00:00.000Z",
            "2025-07-14T00:00:00.000Z",
        ),
    ] {
        let home = TestHome::new();
        let env = [
            ("G2_MEMORY__TIMEZONE", zone),
            ("G2_MEMORY__EMBEDDINGS", "off"),
        ];
        let out = home.g2_with(
            &[
                "archive",
                f.to_str().unwrap(),
                "--group",
                group,
                "--name",
                "Night",
            ],
            &env,
        );
        assert!(out.status.success(), "{out:?}");
        let md = std::fs::read_to_string(&home.archives(group)[0]).unwrap();
        assert_eq!(day_lines(&md), days, "{zone}: {md}");
        // The store dates the passages the same way.
        let rows: Vec<(String, String)> = {
            let store = home.store();
            store
                .read_blocking(|c| {
                    g2_host::store::query_all(
                        c,
                        "SELECT at, coalesce(at_end, '') FROM archive_passages ORDER BY ordinal",
                        (),
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                })
                .unwrap()
        };
        assert!(rows.len() >= 2, "{rows:?}");
        assert_eq!(
            (rows[0].0.as_str(), rows[1].0.as_str()),
            (first, second),
            "{zone}"
        );
    }
}
