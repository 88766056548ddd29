//! Archives, their passages and the embedding jobs and vectors the
//! passages get (triggers on SQLite, trigger functions on PostgreSQL).

use g2_store::archives;
use g2_store::{embeddings, recall};

use super::{archive, each};

const BODY: &str = "# Planning the trip\n\n**Alice**: Shall we go to Lisbon in May?\n\n\
**Andy**: Lisbon in May is warm; the tram 28 is worth it.\n\n\
**Alice**: Book the hotel near Alfama then.\n";

fn planned(store: &g2_store::Store, group: &str, n: usize, at: &str) -> archives::ArchiveRecord {
    archive(store, group, n, "Planning the trip", BODY, at)
}

#[test]
fn archives_are_recorded_with_passages_and_jobs() {
    each(|store| {
        let a = planned(store, "main", 1, "2026-05-01T10:00:00.000Z");
        let b = planned(store, "family", 2, "2027-05-02T10:00:00.000Z");
        assert!(b.id > a.id);
        let (listed, by_path, recorded, missing, passages) = store
            .read_blocking(move |c| {
                Ok((
                    archives::list(c, "main")?,
                    archives::by_path(c, "groups/family/conversations/2.md")?,
                    archives::is_recorded(c, "groups/main/conversations/1.md")?,
                    archives::is_recorded(c, "groups/main/conversations/9.md")?,
                    recall::group_passages(c, "main")?,
                ))
            })
            .unwrap();
        assert_eq!(listed, vec![a.clone()]);
        assert_eq!(by_path.map(|r| r.id), Some(b.id));
        assert!(recorded && !missing);
        assert!(!passages.is_empty());
        // Each passage waits for its vector.
        let jobs = store
            .write_blocking(|tx| embeddings::pending(tx, 100))
            .unwrap();
        assert_eq!(jobs.len(), passages.len() * 2, "{jobs:?}");
        assert!(
            jobs.iter()
                .all(|j| j.kind == "passage" && !j.text.is_empty())
        );
        // Said within a window (the passages carry the archive's time,
        // 2026-05-01); the other group is not read.
        let window = |from: &str, to: &str| {
            let w = vec![(from.to_string(), to.to_string())];
            store
                .read_blocking(move |c| recall::passages_in(c, "main", &w, 10))
                .unwrap()
        };
        assert_eq!(
            window("2026-05-01T00:00:00.000Z", "2026-05-02T00:00:00.000Z").len(),
            passages.len()
        );
        assert!(window("2026-05-02T00:00:00.000Z", "2026-05-03T00:00:00.000Z").is_empty());
        let ids: Vec<i64> = passages.iter().map(|p| p.id).collect();
        let by_ids = store
            .read_blocking(move |c| recall::passages_by_ids(c, &ids, ["main", "main"]))
            .unwrap();
        assert_eq!(by_ids.len(), passages.len());
    });
}

#[test]
fn vectors_are_read_after_a_cursor_and_deletes_counted() {
    each(|store| {
        planned(store, "main", 1, "2026-05-01T10:00:00.000Z");
        let (stored, again) = store
            .write_blocking(|tx| {
                let jobs = embeddings::pending(tx, 100)?;
                let mut stored = 0;
                for j in &jobs {
                    stored += usize::from(embeddings::put(tx, j, "minilm", &[0, 0, 128, 63])?);
                }
                // A job done twice is not stored twice.
                let again = embeddings::put(tx, &jobs[0], "minilm", &[0, 0, 128, 63])?;
                Ok((stored, again))
            })
            .unwrap();
        assert!(stored > 0 && !again);
        let (all, (last, deletes), (vectors, jobs)) = store
            .read_blocking(|c| {
                Ok((
                    embeddings::vectors_after(c, "main", "passage", "minilm", 0)?,
                    embeddings::extent(c, "main", "passage", "minilm")?,
                    embeddings::counts(c, "minilm")?,
                ))
            })
            .unwrap();
        assert_eq!(all.len(), stored);
        assert_eq!(all[0].2, vec![0, 0, 128, 63]);
        assert_eq!(last, all.last().unwrap().0);
        assert_eq!((deletes, vectors, jobs), (0, stored as i64, 0));
        let later = store
            .read_blocking(move |c| {
                embeddings::vectors_after(c, "main", "passage", "minilm", all[0].0)
            })
            .unwrap();
        assert_eq!(later.len(), stored - 1);
        // Clearing the passages drops their vectors, and the deletes are
        // counted for the cache.
        store.write_blocking(recall::clear_passages).unwrap();
        let (_, deletes) = store
            .read_blocking(|c| embeddings::extent(c, "main", "passage", "minilm"))
            .unwrap();
        assert_eq!(deletes, stored as i64);
    });
}

/// What `g2 memory reindex` does to date old archives again: read them in
/// pages, compare their passages, update times in place or replace them,
/// and rebuild the passages' full-text index.
#[test]
fn passages_are_dated_again_in_place_or_replaced() {
    each(|store| {
        // An archive of the old kind: no day lines, every passage at its time.
        let a = planned(store, "main", 1, "2026-05-01T10:00:00.000Z");
        let page = store
            .read_blocking(|c| recall::archives_after(c, 0, 10))
            .unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!((page[0].id, page[0].group.as_str()), (a.id, "main"));
        assert!(page[0].body.contains("Lisbon"));
        let id = a.id;
        let before = store
            .read_blocking(move |c| recall::archive_passages(c, id))
            .unwrap();
        assert!(!before.is_empty());
        let in_april = || {
            let w = vec![(
                "2026-04-28T00:00:00.000Z".to_string(),
                "2026-04-29T00:00:00.000Z".to_string(),
            )];
            store
                .read_blocking(move |c| recall::passages_in(c, "main", &w, 10))
                .unwrap()
        };
        assert!(in_april().is_empty());
        // Dated in place: the same rows, now said on 28 April.
        store
            .write_blocking(move |tx| {
                recall::set_passage_times(
                    tx,
                    id,
                    0,
                    "2026-04-28T09:00:00.000Z",
                    Some("2026-04-28T09:05:00.000Z"),
                )?;
                recall::rebuild_passage_index(tx)
            })
            .unwrap();
        let after = store
            .read_blocking(move |c| recall::archive_passages(c, id))
            .unwrap();
        assert_eq!(after[0].at, "2026-04-28T09:00:00.000Z");
        assert_eq!(after[0].at_end.as_deref(), Some("2026-04-28T09:05:00.000Z"));
        assert_eq!(in_april().len(), 1);
        // Words still find them after the index is rebuilt.
        let found = store
            .read_blocking(|c| recall::passage_candidates(c, "\"alfama\"", ["main", "main"], 10))
            .unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        // Replaced: a new split, dated by its own messages.
        let dated = format!(
            "# T\n\nArchived: May 2, 2026, 9:00 AM (UTC)\n\n---\n\n### Sat, May 2, 2026\n\n{}",
            BODY.split_once("\n\n").unwrap().1
        );
        let passages = g2_store::passages::split(&dated);
        let replaced = store
            .write_blocking(move |tx| {
                recall::replace_passages(tx, id, "main", "2026-05-01T10:00:00.000Z", &passages)
            })
            .unwrap();
        assert!(replaced);
        let now = store
            .read_blocking(move |c| recall::archive_passages(c, id))
            .unwrap();
        assert!(
            now.iter().all(|p| p.at.starts_with("2026-05-02")),
            "{now:?}"
        );
        // An archive that is gone is not written.
        assert!(
            !store
                .write_blocking(|tx| recall::replace_passages(tx, 9_999, "main", "x", &[]))
                .unwrap()
        );
    });
}
