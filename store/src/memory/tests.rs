use super::super::Store;
use super::*;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(1)).unwrap();
    (dir, s)
}

fn gf(s: &str) -> GroupFolder {
    GroupFolder::new(s).unwrap()
}

fn tool<'a>(id: &'a str, at: &'a str) -> NewActivity<'a> {
    NewActivity {
        tool: "Bash",
        tool_use_id: id,
        input: r#"{"command":"echo one"}"#,
        output: "one",
        ok: true,
        at,
        ..Default::default()
    }
}

#[test]
fn a_session_its_prompts_and_tool_calls() {
    let (_d, s) = store();
    let fam = gf("fam");
    s.write_blocking(|tx| {
        let a = open_session(
            tx,
            &fam,
            "sess-1",
            Some("startup"),
            None,
            "2026-01-01T00:00:00.000Z",
        )?;
        let b = open_session(
            tx,
            &fam,
            "sess-1",
            Some("resume"),
            None,
            "2026-01-01T00:00:01.000Z",
        )?;
        assert_eq!(a, b, "the same id maps to the same row");
        let b1 = start_batch(tx, a, "hello", &["Ann".into()], "2026-01-01T00:00:02.000Z")?;
        assert!(add_activity(
            tx,
            a,
            Some(b1),
            &tool("t1", "2026-01-01T00:00:03.000Z")
        )?);
        assert!(
            !add_activity(tx, a, Some(b1), &tool("t1", "2026-01-01T00:00:03.000Z"))?,
            "a replayed tool call is not recorded twice"
        );
        finish_batch(tx, b1, Some("done"), "2026-01-01T00:00:04.000Z")?;
        let b2 = start_batch(tx, a, "again", &[], "2026-01-01T00:00:05.000Z")?;
        assert_eq!(current_batch(tx, a)?, Some(b2));
        Ok(())
    })
    .unwrap();
    let list = s.read_blocking(|c| sessions(c, &fam)).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].prompts, list[0].tool_calls), (2, 1));
    let t = s
        .read_blocking(|c| timeline(c, &fam, "sess-1"))
        .unwrap()
        .unwrap();
    assert_eq!(t.batches.len(), 2);
    assert_eq!(t.batches[0].prompt_number, 1);
    assert_eq!(t.batches[0].senders, ["Ann"]);
    assert_eq!(t.batches[0].reply.as_deref(), Some("done"));
    assert_eq!(t.batches[0].activities[0].input["command"], "echo one");
    assert_eq!(t.batches[1].prompt_number, 2);
    // FTS follows the rows, in their transaction.
    let hits: i64 = s
        .read_blocking(|c| {
            c.query_row(
                "SELECT count(*) FROM prompts_fts WHERE prompts_fts MATCH 'hello'",
                (),
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(hits, 1);
}

#[test]
fn a_session_of_another_group_is_neither_found_nor_taken_over() {
    let (_d, s) = store();
    s.write_blocking(|tx| open_session(tx, &gf("fam"), "sess-1", None, None, "t"))
        .unwrap();
    let err = s
        .write_blocking(|tx| open_session(tx, &gf("work"), "sess-1", None, None, "t"))
        .unwrap_err();
    assert!(matches!(err, Error::Forbidden(_)), "{err}");
    assert!(
        s.read_blocking(|c| timeline(c, &gf("work"), "sess-1"))
            .unwrap()
            .is_none()
    );
    assert!(
        !s.write_blocking(|tx| forget_session(tx, &gf("work"), "sess-1"))
            .unwrap()
    );
}

#[test]
fn recovery_closes_idle_work_attaches_orphans_and_queues() {
    let (_d, s) = store();
    let fam = gf("fam");
    s.write_blocking(|tx| {
        let a = open_session(tx, &fam, "s", None, None, "2026-01-01T00:00:00.000Z")?;
        // A tool call that arrived before any prompt, and one after.
        add_activity(tx, a, None, &tool("early", "2026-01-01T00:00:01.000Z"))?;
        let b = start_batch(tx, a, "p", &[], "2026-01-01T00:00:02.000Z")?;
        add_activity(tx, a, None, &tool("late", "2026-01-01T00:00:03.000Z"))?;
        assert_eq!(attach_orphans(tx)?, 2);
        assert_eq!(attach_orphans(tx)?, 0, "idempotent");
        let late: i64 = tx.query_row(
            "SELECT batch_id FROM activities WHERE tool_use_id = 'late'",
            (),
            |r| r.get(0),
        )?;
        assert_eq!(late, b);
        assert_eq!(close_idle_batches(tx, "2026-01-01T00:05:00.000Z")?, 1);
        assert_eq!(close_stale_sessions(tx, "2026-01-01T01:00:00.000Z")?, 1);
        assert_eq!(close_stale_sessions(tx, "2026-01-01T01:00:00.000Z")?, 0);
        // The prompt's batch and the recovery batch.
        assert_eq!(queue_completed(tx, "2026-01-01T01:00:00.000Z")?, 2);
        assert_eq!(queue_completed(tx, "2026-01-01T01:00:00.000Z")?, 0);
        Ok(())
    })
    .unwrap();
    let t = s
        .read_blocking(|c| timeline(c, &fam, "s"))
        .unwrap()
        .unwrap();
    assert_eq!(t.session.status, "completed");
    assert_eq!(t.session.end_reason.as_deref(), Some("stale"));
    assert!(t.batches.iter().all(|b| b.status == "completed"));
    assert!(
        t.batches
            .iter()
            .any(|b| b.recovered && b.activities[0].tool_use_id == "early")
    );
}

#[test]
fn forgetting_takes_rows_and_index_entries() {
    let (_d, s) = store();
    let fam = gf("fam");
    s.write_blocking(|tx| {
        let a = open_session(tx, &fam, "old", None, None, "2025-01-01T00:00:00.000Z")?;
        let b = start_batch(tx, a, "milk", &[], "2025-01-01T00:00:01.000Z")?;
        add_activity(tx, a, Some(b), &tool("t", "2025-01-01T00:00:02.000Z"))?;
        open_session(tx, &fam, "new", None, None, "2026-01-01T00:00:00.000Z")?;
        Ok(())
    })
    .unwrap();
    assert_eq!(
        s.write_blocking(|tx| forget_before(tx, "2025-06-01T00:00:00.000Z"))
            .unwrap(),
        1
    );
    let (fts, rows): (i64, i64) = s
        .read_blocking(|c| {
            c.query_row(
                "SELECT (SELECT count(*) FROM prompts_fts) + (SELECT count(*) FROM activities_fts),
                        (SELECT count(*) FROM prompt_batches) + (SELECT count(*) FROM activities)",
                (),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .unwrap();
    assert_eq!((fts, rows), (0, 0));
    assert!(
        s.write_blocking(|tx| forget_session(tx, &fam, "new"))
            .unwrap()
    );
    assert!(s.read_blocking(|c| sessions(c, &fam)).unwrap().is_empty());
}
