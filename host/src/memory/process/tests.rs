use super::*;
use crate::memory::extract::{Extracted, Kind, ObservationDraft, SummaryDraft};

/// The host the tests' passes claim jobs as.
const HOST: &str = "host-1";

/// Remembers each prompt as a fact; fails on a prompt saying "fail".
struct Echo;

impl Extractor for Echo {
    fn observations<'a>(
        &'a self,
        _group: &'a GroupFolder,
        b: &'a BatchInput,
    ) -> Extracted<'a, Vec<ObservationDraft>> {
        if b.prompt.contains("fail") {
            return Box::pin(std::future::ready(Err(ExtractError::Unavailable(
                "no".into(),
            ))));
        }
        if b.prompt.contains("garbled") {
            return Box::pin(std::future::ready(Err(ExtractError::Invalid(
                "not JSON".into(),
            ))));
        }
        if _group.as_str() == "broke" {
            return Box::pin(std::future::ready(Err(ExtractError::OverBudget(
                "used up".into(),
            ))));
        }
        Box::pin(std::future::ready(Ok(vec![ObservationDraft {
            kind: Kind::Fact,
            title: b.prompt.clone(),
            narrative: String::new(),
            facts: vec![],
            files: vec![],
            importance: 5,
            concerns: b.senders.clone(),
        }])))
    }

    fn summary<'a>(
        &'a self,
        _group: &'a GroupFolder,
        bs: &'a [BatchInput],
    ) -> Extracted<'a, SummaryDraft> {
        Box::pin(std::future::ready(Ok(SummaryDraft {
            title: bs.first().map(|b| b.prompt.clone()).unwrap_or_default(),
            request: bs.first().map(|b| b.prompt.clone()).unwrap_or_default(),
            completed: format!("{} prompts", bs.len()),
            ..SummaryDraft::default()
        })))
    }
}

/// [`Echo`], with room for every job of a test in one pass.
fn echo() -> (Arc<dyn Extractor>, MemorySettings) {
    let settings = MemorySettings {
        max_concurrent: 10,
        ..MemorySettings::default()
    };
    (Arc::new(Echo), settings)
}

#[tokio::test]
async fn batches_become_observations_once_and_sessions_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
    let fam = GroupFolder::new("fam").unwrap();
    let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    let f = fam.clone();
    s.write_blocking(move |tx| {
        let a = store::memory::open_session(tx, &f, "s", None, None, &ts(t0))?;
        for p in [
            "the boat is moored at pier 7",
            "the boat is moored at pier 7 now",
            "please fail",
        ] {
            let b = store::memory::start_batch(tx, a, p, &["Ann".to_string()], &ts(t0))?;
            store::memory::finish_batch(tx, b, Some("ok"), &ts(t0))?;
        }
        store::memory::end_session(tx, a, Some("clear"), &ts(t0))?;
        Ok(())
    })
    .unwrap();
    let (ex, settings) = echo();
    let p = pass(&s, &ex, &settings, HOST, t0).await.unwrap();
    assert_eq!((p.batches, p.observations, p.failed), (2, 2, 1), "{p:?}");
    // The restatement superseded the first.
    let list = s
        .read_blocking(move |c| obs::list(c, &(&fam).into(), true))
        .unwrap();
    let active: Vec<&str> = list
        .iter()
        .filter(|o| o.status == "active")
        .map(|o| o.title.as_str())
        .collect();
    assert_eq!(active, ["the boat is moored at pier 7 now"]);
    assert_eq!(list.iter().filter(|o| o.status == "superseded").count(), 1);
    assert_eq!(list[0].concerns, ["Ann"]);
    // Not summarised while a batch job waits for its retry; retried
    // after the backoff, failed for good after the last attempt.
    let later = |m: i64| t0 + chrono::TimeDelta::minutes(m);
    assert_eq!(
        pass(&s, &ex, &settings, HOST, t0).await.unwrap(),
        Processed::default()
    );
    let p = pass(&s, &ex, &settings, HOST, later(1)).await.unwrap();
    assert_eq!(p.failed, 1);
    // The third failure is final: the session is summarised at once.
    let p = pass(&s, &ex, &settings, HOST, later(3)).await.unwrap();
    assert_eq!((p.failed, p.summaries), (1, 1), "{p:?}");
    let fam = GroupFolder::new("fam").unwrap();
    let sum = s
        .read_blocking(move |c| obs::summary(c, &fam, "s"))
        .unwrap()
        .unwrap();
    assert_eq!(sum.title, "the boat is moored at pier 7");
    // Nothing is left to do, and nothing is done twice.
    assert_eq!(
        pass(&s, &ex, &settings, HOST, later(20)).await.unwrap(),
        Processed::default()
    );
    assert_eq!(s.read_blocking(obs::pending).unwrap(), (0, 0));
}

/// A store in `dir` with one completed batch of group `fam`, its job
/// (the key returned) claimed by [`HOST`] at the returned time.
fn claimed_batch(dir: &tempfile::TempDir) -> (Store, GroupFolder, DateTime<Utc>, i64) {
    let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
    let fam = GroupFolder::new("fam").unwrap();
    let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    let f = fam.clone();
    let key = s
        .write_blocking(move |tx| {
            let a = store::memory::open_session(tx, &f, "s", None, None, &ts(t0))?;
            let b = store::memory::start_batch(tx, a, "remember the oars", &[], &ts(t0))?;
            store::memory::finish_batch(tx, b, None, &ts(t0))?;
            store::memory::queue_completed(tx, &ts(t0))?;
            Ok(obs::claim(tx, Queue::Batches, &ts(t0), 1, HOST)?[0])
        })
        .unwrap();
    (s, fam, t0, key)
}

#[tokio::test]
async fn a_claim_left_by_a_killed_host_is_taken_again_and_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let (s, fam, t0, _) = claimed_batch(&dir);
    // HOST claimed it and was killed before storing anything.
    let ex: Arc<dyn Extractor> = Arc::new(Echo);
    let settings = MemorySettings::default();
    assert_eq!(pass(&s, &ex, &settings, HOST, t0).await.unwrap().batches, 0);
    // Another host starting leaves the claim alone; its own host's next
    // process releases it.
    assert_eq!(
        s.write_blocking(|tx| obs::release_claims(tx, "host-2"))
            .unwrap(),
        0
    );
    assert_eq!(
        s.write_blocking(|tx| obs::release_claims(tx, HOST))
            .unwrap(),
        1
    );
    assert_eq!(pass(&s, &ex, &settings, HOST, t0).await.unwrap().batches, 1);
    assert_eq!(pass(&s, &ex, &settings, HOST, t0).await.unwrap().batches, 0);
    let n = s
        .read_blocking(move |c| obs::list(c, &(&fam).into(), true))
        .unwrap()
        .len();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn invalid_answers_fail_at_once_and_a_spent_budget_pauses_its_group_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
    let t0: DateTime<Utc> = "2026-01-01T23:50:00Z".parse().unwrap();
    s.write_blocking(move |tx| {
        for (group, prompts) in [
            ("fam", &["garbled", "the oars are in the shed"][..]),
            ("broke", &["one", "two", "three"][..]),
        ] {
            let g = GroupFolder::new(group).unwrap();
            let a = store::memory::open_session(tx, &g, group, None, None, &ts(t0))?;
            for p in prompts {
                let b = store::memory::start_batch(tx, a, p, &[], &ts(t0))?;
                store::memory::finish_batch(tx, b, None, &ts(t0))?;
            }
        }
        Ok(())
    })
    .unwrap();
    let (ex, settings) = echo();
    let p = pass(&s, &ex, &settings, HOST, t0).await.unwrap();
    assert_eq!((p.batches, p.failed, p.deferred), (1, 1, 3), "{p:?}");
    let states: Vec<(String, i64, Option<String>, Option<String>)> = s
        .read_blocking(|c| {
            store::query_all(
                c,
                "SELECT state, attempts, next_attempt_at, error FROM memory_queue ORDER BY batch_id",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
        })
        .unwrap();
    // Invalid output is final at once, with its reason.
    assert_eq!(states[0].0, "failed");
    assert!(states[0].3.as_deref().unwrap().contains("not JSON"));
    assert_eq!(states[1].0, "done");
    // The spent group's jobs wait until midnight, no attempt used.
    for st in &states[2..] {
        assert_eq!(
            (st.0.as_str(), st.1, st.2.as_deref()),
            ("pending", 0, Some("2026-01-02T00:00:00.000Z")),
            "{states:?}"
        );
        assert!(st.3.as_deref().unwrap().contains("used up"));
    }
    assert_eq!(
        pass(&s, &ex, &settings, HOST, t0 + chrono::TimeDelta::minutes(5))
            .await
            .unwrap(),
        Processed::default()
    );
    assert_eq!(
        paused_until(t0 - chrono::TimeDelta::hours(5)),
        "2026-01-01T19:05:00.000Z"
    );
}

#[tokio::test]
async fn a_compaction_gets_a_summary_that_the_end_of_the_session_renews() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
    let fam = GroupFolder::new("fam").unwrap();
    let t0: DateTime<Utc> = "2026-01-01T10:00:00Z".parse().unwrap();
    let later = |m: i64| t0 + chrono::TimeDelta::minutes(m);
    let f = fam.clone();
    let session = s
        .write_blocking(move |tx| {
            let a = store::memory::open_session(tx, &f, "s", None, None, &ts(t0))?;
            for p in ["the oars are in the shed", "the boat is blue"] {
                let b = store::memory::start_batch(tx, a, p, &[], &ts(t0))?;
                store::memory::finish_batch(tx, b, None, &ts(t0))?;
            }
            // The turn under way when Claude Code compacted.
            store::memory::start_batch(tx, a, "and the sail?", &[], &ts(t0))?;
            store::archives::insert(
                tx,
                &crate::archives::Prepared {
                    group: f.clone(),
                    session_id: Some("s".into()),
                    title: "Boat".into(),
                    file_name: "boat.md".into(),
                    rel_path: "groups/fam/conversations/boat.md".into(),
                    body: "# Boat\n".into(),
                    trigger: crate::archives::Trigger::Precompact,
                    created_at: ts(later(1)),
                    stats: Default::default(),
                    pending: false,
                },
            )?;
            Ok(a)
        })
        .unwrap();
    let (ex, settings) = echo();
    let summary = || {
        let f = fam.clone();
        s.read_blocking(move |c| obs::summary(c, &f, "s"))
            .unwrap()
            .map(|m| m.completed)
    };
    let p = pass(&s, &ex, &settings, HOST, later(2)).await.unwrap();
    assert_eq!((p.batches, p.summaries), (2, 1), "{p:?}");
    assert_eq!(summary().as_deref(), Some("3 prompts"));
    // Nothing new: no new summary.
    let p = pass(&s, &ex, &settings, HOST, later(3)).await.unwrap();
    assert_eq!(p, Processed::default());
    // The session ends: its summary is made again, over everything.
    s.write_blocking(move |tx| {
        let b = store::memory::start_batch(tx, session, "the mast is new", &[], &ts(later(4)))?;
        store::memory::finish_batch(tx, b, None, &ts(later(4)))?;
        tx.execute(
            "UPDATE prompt_batches SET status = 'completed' WHERE status = 'active'",
            (),
        )?;
        store::memory::end_session(tx, session, Some("clear"), &ts(later(5)))?;
        Ok(())
    })
    .unwrap();
    let p = pass(&s, &ex, &settings, HOST, later(6)).await.unwrap();
    assert_eq!(p.summaries, 1, "{p:?}");
    assert_eq!(summary().as_deref(), Some("4 prompts"));
    // Its index follows the newer text.
    let f = fam.clone();
    let hits = s
        .read_blocking(move |c| {
            crate::memory::recall::recall_with(
                c,
                &f,
                "4 prompts",
                5,
                &crate::memory::recall::Filters {
                    kind: Some("summary".into()),
                    since: None,
                    asked: None,
                },
            )
        })
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        pass(&s, &ex, &settings, HOST, later(7)).await.unwrap(),
        Processed::default()
    );
}

#[test]
fn restatements_are_recognised() {
    assert!(same_statement(
        "The boat is moored at pier 7",
        "the boat: moored at pier 7!"
    ));
    assert!(same_statement(
        "boat moored pier 7",
        "the boat is moored at pier 7 now"
    ));
    assert!(!same_statement(
        "the boat is at pier 7",
        "the car is at pier 7"
    ));
    assert!(!same_statement("", "x"));
}

#[tokio::test]
async fn an_outcome_whose_claim_was_released_meanwhile_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (s, fam, t0, key) = claimed_batch(&dir);
    let ex: Arc<dyn Extractor> = Arc::new(Echo);
    let x = extract(&s, &ex, Queue::Batches, key).await.unwrap();
    // Meanwhile host-1 was taken for dead: its claim released, and
    // host-2 claimed the job.
    s.write_blocking(|tx| {
        obs::release_claims(tx, HOST)?;
        obs::claim(tx, Queue::Batches, &ts(t0), 1, "host-2")
    })
    .unwrap();
    let Err(err) = settle(&s, x, Queue::Batches, t0, HOST).await else {
        panic!("host-1's outcome stored");
    };
    assert!(err.to_string().contains("no longer claimed"), "{err}");
    let stored = s
        .read_blocking(move |c| obs::list(c, &(&fam).into(), true))
        .unwrap();
    assert!(stored.is_empty(), "{stored:?}");
    s.write_blocking(move |tx| obs::check_claim(tx, Queue::Batches, key, "host-2"))
        .unwrap();
}

#[tokio::test]
async fn memory_is_dated_when_it_was_said_not_when_it_was_recorded() {
    use crate::memory::ingest::capture;
    use crate::memory::recall::{Filters, recall_with};
    use g2_core::wire::Captured;
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
    let fam = GroupFolder::new("fam").unwrap();
    let now = Utc::now();
    let days_ago = |d: i64| ts(now - chrono::TimeDelta::days(d));
    let (three, two) = (days_ago(3), days_ago(2));
    let redactor = g2_core::privacy::Redactor::default();
    // Session "s1": two routed prompts, said three and two days ago, taken
    // in now; session "s2": a direct prompt, with no time but its capture.
    let routed = |time: &str, text: &str| Captured::Prompt {
        text: g2_core::envelope::write([("Ann", time, text)]),
        private: false,
    };
    let direct = Captured::Prompt {
        text: "the canoe is in the barn".into(),
        private: false,
    };
    let events = [
        ("s1", routed(&three, "the kayak is behind the garage")),
        ("s1", Captured::Stop { reply: None }),
        ("s1", routed(&two, "the kayak paddle is in the kayak")),
        ("s1", Captured::Stop { reply: None }),
        ("s1", Captured::SessionEnd { reason: None }),
        ("s2", direct),
        ("s2", Captured::Stop { reply: None }),
        ("s2", Captured::SessionEnd { reason: None }),
    ];
    let at = ts(now);
    for (i, (sid, event)) in events.iter().enumerate() {
        let (f, r, at) = (fam.clone(), &redactor, &at);
        s.write_blocking(move |tx| capture(tx, &f, &format!("e{i}"), Some(sid), at, event, r))
            .unwrap();
    }
    let batches: Vec<(String, Option<String>, String)> = s
        .read_blocking(|c| {
            store::query_all(
                c,
                "SELECT prompt, said_at, started_at FROM prompt_batches ORDER BY id",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })
        .unwrap();
    assert_eq!(batches[0].1.as_deref(), Some(three.as_str()), "{batches:?}");
    assert_eq!(batches[1].1.as_deref(), Some(two.as_str()), "{batches:?}");
    assert_eq!(batches[2].1, None, "a direct prompt's time is not known");
    assert_eq!(batches[2].2, at);
    let (ex, settings) = echo();
    let p = pass(&s, &ex, &settings, HOST, now).await.unwrap();
    assert_eq!((p.batches, p.summaries), (3, 2), "{p:?}");
    // Observations: said when their prompt was, else when it was captured.
    let f = fam.clone();
    let list = s
        .read_blocking(move |c| obs::list(c, &(&f).into(), true))
        .unwrap();
    let said = |title: &str| {
        let o = list.iter().find(|o| o.title.contains(title)).unwrap();
        (o.said_at.clone(), o.created_at.clone())
    };
    assert_eq!(said("behind the garage"), (three.clone(), at.clone()));
    assert_eq!(said("paddle"), (two.clone(), at.clone()));
    assert_eq!(said("canoe"), (at.clone(), at.clone()));
    // Summaries span their session's prompts.
    let summary = |sid: &'static str| {
        let f = fam.clone();
        let m = s
            .read_blocking(move |c| obs::summary(c, &f, sid))
            .unwrap()
            .unwrap();
        (m.said_from, m.said_to)
    };
    assert_eq!(summary("s1"), (three.clone(), Some(two.clone())));
    assert_eq!(summary("s2"), (at.clone(), Some(at.clone())));
    // Recall reads each hit as said.
    let ask = |q: &'static str| {
        let f = fam.clone();
        s.read_blocking(move |c| recall_with(c, &f, q, 10, &Filters::default()))
            .unwrap()
    };
    let hits = ask("where is the kayak behind the garage?");
    for kind in ["prompt", "observation", "summary"] {
        let h = hits
            .iter()
            .find(|h| h.kind == kind && h.title.contains("garage"));
        let h = h.unwrap_or_else(|| panic!("no {kind}: {hits:#?}"));
        assert_eq!(h.at, three, "{h:#?}");
        let end = (kind == "summary").then(|| two.clone());
        assert_eq!(h.at_end, end, "{h:#?}");
    }
    let hits = ask("canoe");
    let o = hits.iter().find(|h| h.kind == "observation").unwrap();
    assert_eq!(o.at, at, "{hits:#?}");
    let pr = hits.iter().find(|h| h.kind == "prompt").unwrap();
    assert_eq!(pr.at, at, "{hits:#?}");
}
