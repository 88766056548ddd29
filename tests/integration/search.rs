//! `g2 search`: any word finds, every word and phrases rank first, BM25,
//! group filter, snippets, stable JSON.

use crate::steps::{sorted_keys, strs};
use crate::support::*;

#[test]
fn ranking_group_filter_and_json_shape() {
    let home = TestHome::new();
    home.ok(&["groups", "add", "dev", "--name", "Dev"]);
    let filler = "we talked about many other things that day. ".repeat(20);
    archive_text(
        &home,
        "main",
        "Once",
        &format!("the wombat came by once. {filler}"),
        "ok",
    );
    archive_text(
        &home,
        "main",
        "Often",
        "wombat wombat wombat, all about the wombat",
        "yes, wombats are great",
    );
    archive_text(
        &home,
        "dev",
        "Wombat planning",
        &format!("planning notes. {filler}"),
        "sure",
    );
    archive_text(&home, "main", "Unrelated", "nothing to see here", "indeed");

    let hits = home.json(&["search", "wombat"]);
    let names = strs(&hits, "name");
    assert_eq!(names.len(), 3, "{names:?}");
    // Dense body matches beat a single mention in a long text.
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(pos("Often") < pos("Once"), "{names:?}");
    // Scores are descending.
    let scores: Vec<f64> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");

    let keys = sorted_keys(&hits[0]);
    assert_eq!(
        keys,
        [
            "archive_id",
            "created_at",
            "group",
            "name",
            "path",
            "score",
            "session_id",
            "snippet"
        ]
    );
    let often = hits
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "Often")
        .unwrap();
    assert!(
        often["snippet"].as_str().unwrap().contains("[wombat]"),
        "{often}"
    );
    assert!(home.path().join(often["path"].as_str().unwrap()).is_file());

    let dev = home.json(&["search", "wombat", "--group", "dev"]);
    assert_eq!(dev.as_array().unwrap().len(), 1);
    assert_eq!(dev[0]["group"], "dev");

    assert_eq!(
        home.json(&["search", "wombat", "--limit", "1"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Stemming: "wombats" finds "wombat". No word is required: an archive
    // holding every word ranks before those holding some.
    assert_eq!(
        home.json(&["search", "wombats"]).as_array().unwrap().len(),
        3
    );
    let both = home.json(&["search", "wombat", "planning"]);
    assert_eq!(both.as_array().unwrap().len(), 3, "{both}");
    assert_eq!(both[0]["name"], "Wombat planning", "{both}");
    assert_eq!(home.json(&["search", "womb*"]).as_array().unwrap().len(), 3);
    assert!(
        home.json(&["search", "platypus"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(home.ok(&["search", "platypus"]).contains("no matches"));
}

#[test]
fn title_matches_weigh_more_than_body_matches() {
    let home = TestHome::new();
    archive_text(&home, "main", "Budget", "we discussed the budget", "fine");
    archive_text(&home, "main", "Holiday", "what about the budget", "fine");
    let hits = home.json(&["search", "budget"]);
    assert_eq!(hits[0]["name"], "Budget");
}

#[test]
fn fts_syntax_in_queries_is_just_text() {
    let home = TestHome::new();
    archive_text(
        &home,
        "main",
        "Quotes",
        "she said \"NEAR\" and OR and AND",
        "ok",
    );
    for q in ["\"", "NEAR(", "a OR", "col:umn", "*", "-x", "^", "AND"] {
        let out = home.g2(&["search", "--json", "--", q]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("fts5"),
            "{q:?} reached FTS5 as syntax: {stderr}"
        );
        if !out.status.success() {
            assert!(stderr.contains("no words"), "{q:?}: {stderr}");
        }
    }
    assert_eq!(home.json(&["search", "NEAR"]).as_array().unwrap().len(), 1);
    let err = home.fails(&["search", "--group", "../x", "a"]);
    assert!(err.contains("invalid group folder"), "{err}");
}

#[test]
fn a_question_finds_the_archive_that_answers_it() {
    let home = TestHome::new();
    archive_text(
        &home,
        "main",
        "Kernel",
        "which kernel is this box on? I ran uname -a",
        "Linux 6.1, x86_64",
    );
    archive_text(
        &home,
        "main",
        "Errands",
        "what did I do for the shopping list",
        "you wanted milk",
    );
    archive_text(
        &home,
        "main",
        "Uname flags",
        "what does uname -r print",
        "the kernel release",
    );
    // Stop words ("what", "did", "I", "for") find nothing; "uname" does.
    let hits = home.json(&["search", "what did I run uname for"]);
    let names = strs(&hits, "name");
    assert_eq!(names.len(), 2, "{hits}");
    assert!(names.contains(&"Kernel"), "{hits}");
    assert!(
        hits[0]["snippet"].as_str().unwrap().contains("[uname]"),
        "{hits}"
    );
    // The archive holding every word ranks first.
    let hits = home.json(&["search", "kernel release"]);
    assert_eq!(hits[0]["name"], "Uname flags", "{hits}");
}
