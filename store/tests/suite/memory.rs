//! Memory capture: sessions, prompt batches, tool calls, observations and
//! their queues.

use g2_core::validate::{GroupFolder, MemoryFolder};
use g2_store::memory::{self, NewActivity};
use g2_store::observations::{self, Kind, ObservationDraft, Provenance, Queue};

use super::each;

#[test]
fn a_session_batch_and_tool_call_are_captured() {
    each(|store| {
        let g = GroupFolder::new("main").unwrap();
        let (session, batch, dup) = store
            .write_blocking(move |tx| {
                let s = memory::open_session(
                    tx,
                    &g,
                    "sess-1",
                    Some("startup"),
                    None,
                    "2026-01-01T00:00:00.000Z",
                )?;
                let again =
                    memory::open_session(tx, &g, "sess-1", None, None, "2026-01-01T00:00:01.000Z")?;
                assert_eq!(s, again);
                let other = GroupFolder::new("family")?;
                assert!(
                    memory::open_session(
                        tx,
                        &other,
                        "sess-1",
                        None,
                        None,
                        "2026-01-01T00:00:02.000Z"
                    )
                    .is_err()
                );
                let b = memory::start_batch(
                    tx,
                    s,
                    "where is the key?",
                    &[],
                    "2026-01-01T00:00:03.000Z",
                )?;
                let files: Vec<String> = vec!["notes.md".into()];
                let call = NewActivity {
                    tool: "Read",
                    tool_use_id: "tu-1",
                    input: "{\"file\":\"notes.md\"}",
                    output: "the key is under the mat",
                    files_read: &files,
                    files_modified: &[],
                    ok: true,
                    subagent: false,
                    at: "2026-01-01T00:00:04.000Z",
                };
                let first = memory::add_activity(tx, s, Some(b), &call)?;
                let dup = memory::add_activity(tx, s, Some(b), &call)?;
                assert!(first);
                memory::finish_batch(tx, b, Some("Under the mat."), "2026-01-01T00:00:05.000Z")?;
                memory::end_session(tx, s, Some("clear"), "2026-01-01T00:00:06.000Z")?;
                Ok((s, b, dup))
            })
            .unwrap();
        assert!(!dup, "a tool call is recorded once");
        let (batches, open, queued) = store
            .write_blocking(move |tx| {
                let q = memory::queue_completed(tx, "2026-01-01T00:01:00.000Z")?;
                Ok((
                    memory::batches_of(tx, session)?,
                    memory::open_batch(tx, session)?,
                    q,
                ))
            })
            .unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].row, batch);
        assert_eq!(open, None);
        assert_eq!(queued, 1);
        // Found by meaning: a finished prompt no archive holds, of its group only.
        let by_id = |groups: [&'static str; 2]| {
            store
                .read_blocking(move |c| {
                    g2_store::recall::unarchived_prompts_by_ids(c, &[batch, -1], groups)
                })
                .unwrap()
        };
        assert_eq!(
            by_id(["main", "global"])
                .iter()
                .map(|p| p.id)
                .collect::<Vec<_>>(),
            [batch]
        );
        assert!(by_id(["family", "global"]).is_empty());
        let claimed = store
            .write_blocking(|tx| {
                observations::claim(tx, Queue::Batches, "2026-01-01T00:02:00.000Z", 5, "host-a")
            })
            .unwrap();
        assert_eq!(claimed, vec![batch]);
        store
            .read_blocking(move |c| observations::check_claim(c, Queue::Batches, batch, "host-a"))
            .unwrap();
        // host-a never joined (or its process is gone): on PostgreSQL the
        // others release its claim; SQLite's one host releases its own.
        let released = store
            .write_blocking(|tx| observations::release_absent_claims(tx, &[]))
            .unwrap();
        let shared = store.dialect() == g2_store::Dialect::Postgres;
        assert_eq!(released, usize::from(shared));
        assert_eq!(
            store
                .read_blocking(move |c| observations::check_claim(
                    c,
                    Queue::Batches,
                    batch,
                    "host-a"
                ))
                .is_ok(),
            !shared
        );
    });
}

#[test]
fn observations_supersede_and_forget() {
    each(|store| {
        let g = MemoryFolder::new("main").unwrap();
        let draft = |title: &str| ObservationDraft {
            kind: Kind::Fact,
            title: title.into(),
            narrative: "Where the spare key is kept.".into(),
            facts: vec!["The key is under the mat".into()],
            files: vec![],
            importance: 7,
            concerns: vec!["Alice".into()],
        };
        let g2 = g.clone();
        let (a, b) = store
            .write_blocking(move |tx| {
                let a = observations::insert(
                    tx,
                    &g2,
                    &draft("Spare key location"),
                    Provenance::default(),
                    "2026-01-01T00:00:00.000Z",
                    |t| t == "Spare key location",
                )?;
                let b = observations::insert(
                    tx,
                    &g2,
                    &draft("Spare key location"),
                    Provenance::default(),
                    "2026-01-02T00:00:00.000Z",
                    |t| t == "Spare key location",
                )?;
                Ok((a, b))
            })
            .unwrap();
        let g3 = g.clone();
        let (active, all) = store
            .read_blocking(move |c| {
                Ok((
                    observations::list(c, &g3, false)?,
                    observations::list(c, &g3, true)?,
                ))
            })
            .unwrap();
        assert_eq!(
            active.iter().map(|o| o.id).collect::<Vec<_>>(),
            [b],
            "the same title supersedes"
        );
        assert_eq!(all.len(), 2);
        assert!(all.iter().any(|o| o.id == a));
        // Found by meaning: active ones of the group only; no summary yet.
        let (mine, theirs, summaries) = store
            .read_blocking(move |c| {
                Ok((
                    observations::active_by_ids(c, &[a, b], ["main", "global"])?,
                    observations::active_by_ids(c, &[a, b], ["family", "global"])?,
                    observations::summaries_by_ids(c, &[a, b], ["main", "global"])?,
                ))
            })
            .unwrap();
        assert_eq!(mine.iter().map(|o| o.id).collect::<Vec<_>>(), [b]);
        assert!(theirs.is_empty() && summaries.is_empty());
        let g4 = g.clone();
        let forgot = store
            .write_blocking(move |tx| observations::forget(tx, &g4, b))
            .unwrap();
        assert!(forgot);
        let jobs = store
            .write_blocking(|tx| g2_store::embeddings::pending(tx, 10))
            .unwrap();
        assert!(
            jobs.iter().all(|j| j.id != b),
            "a forgotten observation is not embedded: {jobs:?}"
        );
        store.write_blocking(observations::rebuild_indexes).unwrap();
    });
}
