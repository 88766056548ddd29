//! The store's suite, run against both backends: every test gets a fresh
//! SQLite file and a fresh database in a throwaway PostgreSQL cluster
//! (`tests/pg_cluster.rs`), and asserts the same on each.

// Tests fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

#[path = "../../../tests/pg_cluster.rs"]
mod pg_cluster;

mod archives;
mod cluster;
mod db;
mod fulltext;
mod mcp;
mod memory;
mod rows;
mod said;

use std::time::Duration;

use g2_store::Store;

/// One backend's store for one test; the SQLite file lives as long as it.
pub struct Backend {
    pub name: &'static str,
    pub store: Store,
    _dir: Option<tempfile::TempDir>,
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A fresh store on each backend. Without PostgreSQL the suite runs on
/// SQLite alone and says so; in CI that is a failure.
pub fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(&dir.path().join("g2.db"), Duration::from_secs(5)).unwrap();
    let mut all = vec![Backend {
        name: "sqlite",
        store: sqlite,
        _dir: Some(dir),
    }];
    match pg_cluster::Cluster::shared() {
        Some(cluster) => all.push(Backend {
            name: "postgres",
            store: Store::open_postgres(&cluster.database(), Duration::from_secs(5))
                .expect("opening the PostgreSQL store"),
            _dir: None,
        }),
        None if in_ci() => {
            panic!(
                "PostgreSQL is required in CI but missing: scripts/setup.sh should have installed it"
            )
        }
        None => eprintln!("PostgreSQL is missing (run scripts/setup.sh): SQLite only"),
    }
    all
}

/// Records an archive of `group` (the `n`th: its file name) as the host
/// does, with its passages.
pub fn archive(
    store: &Store,
    group: &str,
    n: usize,
    title: &str,
    body: &str,
    at: &str,
) -> g2_store::archives::ArchiveRecord {
    let group = g2_core::validate::GroupFolder::new(group).unwrap();
    let (title, body, at) = (title.to_string(), body.to_string(), at.to_string());
    store
        .write_blocking(move |tx| {
            g2_store::archives::insert(
                tx,
                g2_store::archives::NewArchive {
                    group: &group,
                    session_id: None,
                    title: &title,
                    rel_path: &format!("groups/{group}/conversations/{n}.md"),
                    body: &body,
                    trigger: g2_store::archives::Trigger::Manual,
                    created_at: &at,
                },
            )
        })
        .unwrap()
}

/// Runs `f` on a fresh store of each backend; a failure names the backend.
pub fn each(f: impl Fn(&Store)) {
    for b in backends() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&b.store)));
        if let Err(e) = r {
            eprintln!("failed on {}", b.name);
            std::panic::resume_unwind(e);
        }
    }
}
