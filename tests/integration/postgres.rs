//! A home whose store is PostgreSQL (`store.url = "postgres://…"`): the
//! real `g2` on a throwaway cluster (`tests/pg_cluster.rs`) keeps its
//! groups, archives and messages there, finds what was archived, and
//! answers messages; nothing is written to a SQLite file.

use crate::pg_cluster::Cluster;
use crate::support::*;

/// A home on a fresh PostgreSQL database; `None` without PostgreSQL
/// outside CI (in CI that fails).
pub(crate) fn postgres_home() -> Option<TestHome> {
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

/// `dev` added, and three conversations archived, each with its (user,
/// assistant) words: `Trip` in `main`, `Deploy` in `dev`, `Garden` in `main`.
fn three_archives(home: &TestHome, said: [(&str, &str); 3]) {
    home.ok(&["groups", "add", "dev", "--name", "Dev"]);
    let names = [("main", "Trip"), ("dev", "Deploy"), ("main", "Garden")];
    for ((group, name), (user, assistant)) in names.into_iter().zip(said) {
        archive_text(home, group, name, user, assistant);
    }
}

#[test]
fn a_home_on_postgres_keeps_and_finds_everything_there() {
    let Some(home) = postgres_home() else {
        return;
    };
    three_archives(
        &home,
        [
            (
                "Shall we take the night train to Vienna?",
                "Yes, the sleeper leaves at 19:40.",
            ),
            (
                "Did the deploy of db-1 go through?",
                "It did; the trains of thought are another matter.",
            ),
            ("The tomatoes need water.", "I watered them."),
        ],
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
        db.contains("postgres://127.0.0.1:")
            && db.contains(&format!(
                "schema version {}",
                g2_host::store::POSTGRES_SCHEMA_VERSION
            )),
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

#[test]
fn a_sqlite_home_migrated_to_postgres_finds_and_recalls_the_same() {
    let cluster = Cluster::shared();
    if !require("PostgreSQL (initdb, pg_ctl)", cluster.is_some()) {
        return;
    }
    let Some(cluster) = cluster else { return };
    let home = TestHome::new();
    three_archives(
        &home,
        [
            (
                "Shall we take the night train to Vienna?",
                "Yes, the sleeper leaves at 19:40 from platform 7.",
            ),
            (
                "Did the deploy of the billing service go through?",
                "It did; the migration took four minutes.",
            ),
            (
                "The tomatoes need water every evening.",
                "I watered them and added compost.",
            ),
        ],
    );
    let questions = [
        "when does the sleeper train leave",
        "how long did the billing migration take",
        "what did I add to the tomatoes",
    ];
    let top = |home: &TestHome| -> Vec<String> {
        questions
            .iter()
            .map(|q| {
                let hits = home.json(&["memory", "search", q]);
                hits[0]["path"]
                    .as_str()
                    .or(hits[0]["archive_path"].as_str())
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    let searches = |home: &TestHome| -> Vec<serde_json::Value> {
        ["train", "migration", "tomatoes water"]
            .iter()
            .map(|q| {
                home.json(&["search", q])
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["name"].clone())
                    .collect()
            })
            .collect()
    };
    let (recall_before, search_before) = (top(&home), searches(&home));
    assert!(
        recall_before.iter().all(|p| !p.is_empty()),
        "{recall_before:?}"
    );
    let db = home.path().join("data/g2.db");
    let bytes_before = std::fs::read(&db).unwrap();

    let url = cluster.database();
    let counts = home.json(&["migrate", "--to", &url]);
    let count = |t: &str| -> i64 {
        let c = counts
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["table"] == t)
            .unwrap();
        assert_eq!(c["source"], c["target"], "{c}");
        c["target"].as_i64().unwrap()
    };
    assert_eq!(count("registered_groups"), 2, "main and dev: {counts}");
    assert_eq!(count("conversation_archives"), 3);
    assert!(count("archive_passages") >= 3);
    assert_eq!(count("passages_fts"), count("archive_passages"));
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes_before,
        "the SQLite file is only read"
    );
    // A second copy would mix two stores.
    let err = home.fails(&["migrate", "--to", &url]);
    assert!(err.contains("already holds"), "{err}");

    std::fs::write(
        home.path().join("g2.toml"),
        format!("[store]\nurl = \"{url}\"\n"),
    )
    .unwrap();
    assert_eq!(
        top(&home),
        recall_before,
        "recall finds the same on PostgreSQL"
    );
    assert_eq!(
        searches(&home),
        search_before,
        "g2 search finds the same on PostgreSQL"
    );
    // The copy goes on numbering where SQLite stopped.
    archive_text(
        &home,
        "dev",
        "Later",
        "one more thing about billing",
        "noted",
    );
    assert_eq!(
        home.json(&["search", "billing", "--group", "dev"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
