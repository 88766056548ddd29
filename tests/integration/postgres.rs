//! A home whose store is PostgreSQL (`store.url = "postgres://…"`): the
//! real `g2` on a throwaway cluster (`tests/pg_cluster.rs`) keeps its
//! groups, archives and messages there, finds what was archived, and
//! answers messages; nothing is written to a SQLite file.

use crate::pg_cluster::Cluster;
use crate::support::*;

/// A home on a fresh PostgreSQL database; `None` without PostgreSQL
/// outside CI (in CI that fails).
fn postgres_home() -> Option<TestHome> {
    let cluster = Cluster::shared();
    if !require("PostgreSQL (initdb, pg_ctl)", cluster.is_some()) {
        return None;
    }
    let url = cluster?.database();
    let home = TestHome::empty();
    std::fs::write(
        home.path().join("g2.toml"),
        format!("[store]\nurl = \"{url}\"\n"),
    )
    .unwrap();
    home.ok(&["init"]);
    Some(home)
}

fn archive_text(home: &TestHome, group: &str, name: &str, user: &str, assistant: &str) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl");
    write_transcript(
        &t,
        "55555555-5555-4555-8555-555555555555",
        &[(user, assistant)],
    );
    home.ok(&[
        "archive",
        t.to_str().unwrap(),
        "--group",
        group,
        "--name",
        name,
    ]);
}

#[test]
fn a_home_on_postgres_keeps_and_finds_everything_there() {
    let Some(home) = postgres_home() else {
        return;
    };
    home.ok(&["groups", "add", "dev", "--name", "Dev"]);
    archive_text(
        &home,
        "main",
        "Trip",
        "Shall we take the night train to Vienna?",
        "Yes, the sleeper leaves at 19:40.",
    );
    archive_text(
        &home,
        "dev",
        "Deploy",
        "Did the deploy of db-1 go through?",
        "It did; the trains of thought are another matter.",
    );
    archive_text(
        &home,
        "main",
        "Garden",
        "The tomatoes need water.",
        "I watered them.",
    );

    let names = |args: &[&str]| -> Vec<String> {
        home.json(args)
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["name"].as_str().unwrap().to_string())
            .collect()
    };
    // A stem finds both groups' archives; the group filter keeps one.
    assert_eq!(names(&["search", "train"]), ["Trip", "Deploy"]);
    assert_eq!(names(&["search", "trains", "--group", "dev"]), ["Deploy"]);
    assert_eq!(
        names(&["search", "db-1"])[0],
        "Deploy",
        "every word ranks first"
    );
    assert!(names(&["search", "wombat"]).is_empty());
    let groups = home.json(&["groups", "list"]);
    assert_eq!(groups.as_array().unwrap().len(), 2, "{groups}");

    let doctor = home.g2(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    let db = text
        .lines()
        .find(|l| l.contains("database"))
        .unwrap_or_default();
    assert!(
        db.contains("postgres://127.0.0.1:") && db.contains("schema version 1"),
        "{text}"
    );
    assert!(!db.contains("postgres@"), "the user stays out: {db}");
    assert!(
        !home.path().join("data/g2.db").exists(),
        "nothing is written to SQLite"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_on_postgres_is_answered_and_stored_there() {
    if !image_ready() {
        return;
    }
    let Some(home) = postgres_home() else {
        return;
    };
    let s = serve(&home, &[]);
    let r = ask(&s.url, "main", "ann", "hello from postgres").await;
    assert_eq!(r, "Offline model (g2) received: \"hello from postgres\"");
    let texts = bot_texts(&s.url, "main").await;
    assert_eq!(texts, [r]);
    assert!(!home.path().join("data/g2.db").exists());
}
