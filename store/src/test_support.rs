//! Stores seeded for tests, the store's own and the host's (built for
//! `cfg(test)` or with the `test-support` feature, which the host's tests
//! turn on).

use crate::{Store, params};

/// A SQLite store in a new directory holding one manual archive per
/// `(group, name, body)`, recorded and indexed for search (no passages),
/// dated 2025-01-01.
pub fn store_with_archives(archives: &[(&str, &str, &str)]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5))
        .expect("a new store");
    let rows: Vec<(String, String, String)> = archives
        .iter()
        .map(|(g, n, b)| (g.to_string(), n.to_string(), b.to_string()))
        .collect();
    store
        .write_blocking(move |tx| {
            for (i, (group, name, body)) in rows.iter().enumerate() {
                let id: i64 = tx.query_row(
                    "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
                     VALUES (?1, NULL, ?2, ?3, 'manual', '2025-01-01T00:00:00.000Z') RETURNING id",
                    params![group, name, format!("groups/{group}/conversations/{i}.md")],
                    |r| r.get(0),
                )?;
                tx.execute(
                    "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
                    params![id, name, body],
                )?;
            }
            Ok(())
        })
        .expect("archives recorded");
    (dir, store)
}
