use super::*;

fn store_with(archives: &[(&str, &str, &str)]) -> (tempfile::TempDir, store::Store) {
    let dir = tempfile::tempdir().unwrap();
    let store =
        store::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5)).unwrap();
    let rows: Vec<(String, String, String)> = archives
        .iter()
        .map(|(g, at, b)| (g.to_string(), at.to_string(), b.to_string()))
        .collect();
    store
        .write_blocking(move |tx| {
            for (i, (group, at, body)) in rows.iter().enumerate() {
                let id: i64 = tx.query_row(
                    "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
                     VALUES (?1, ?2, ?3, ?4, 'manual', ?5) RETURNING id",
                    crate::store::params![group, format!("s{i}"), format!("A{i}"), format!("groups/{group}/conversations/{i}.md"), at],
                    |r| r.get(0),
                )?;
                tx.execute(
                    "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
                    crate::store::params![id, format!("A{i}"), body],
                )?;
            }
            index_missing(tx)
        })
        .unwrap();
    (dir, store)
}

fn md(exchanges: &[(&str, &str)]) -> String {
    let mut s = String::from("# T\n\nArchived: x\n\n---\n\n");
    for (u, a) in exchanges {
        s.push_str(&format!("**User**: {u}\n\n**G2**: {a}\n\n"));
    }
    s
}

#[test]
fn questions_find_the_turn_that_answers_them() {
    let (_d, store) = store_with(&[
        (
            "main",
            "2026-05-01T10:00:00.000Z",
            &md(&[
                ("we sailed today", "nice"),
                ("remember that the boat is moored at pier 7", "noted"),
                ("the weather was fine", "good"),
            ]),
        ),
        (
            "main",
            "2026-05-02T10:00:00.000Z",
            &md(&[
                ("I went to the museum", "which exhibition?"),
                ("the boat show", "fun"),
            ]),
        ),
        (
            "fam",
            "2026-05-03T10:00:00.000Z",
            &md(&[("the boat is moored at pier 9", "ok")]),
        ),
    ]);
    let main = GroupFolder::new("main").unwrap();
    store
        .read_blocking(|c| {
            // No word is required: "where" and "is" are not searched.
            let hits = recall(c, &main, "where is the boat moored?", 5)?;
            assert_eq!(
                (hits[0].archive_id, hits[0].turn_start),
                (Some(1), Some(2)),
                "{hits:#?}"
            );
            assert!(hits[0].snippet.contains("[boat]"), "{}", hits[0].snippet);
            // Never another group's.
            assert!(
                hits.iter()
                    .all(|h| h.group == "main" && !h.snippet.contains("pier 9"))
            );
            // A named day lifts that day's passages.
            let hits = recall(c, &main, "on May 2nd, what did I see at the boat show?", 5)?;
            assert_eq!(hits[0].archive_id, Some(2), "{hits:#?}");
            // A named day brings that day's talk, whatever its words.
            let hits = recall(c, &main, "what did we talk about on May 1st?", 5)?;
            assert!(
                !hits.is_empty() && hits.iter().all(|h| h.archive_id == Some(1)),
                "{hits:#?}"
            );
            assert!(recall(c, &main, "?!", 5)?.is_empty());
            assert!(recall(c, &main, "zebra", 5)?.is_empty());
            Ok(())
        })
        .unwrap();
}

#[test]
fn observations_rank_first_and_forgetting_removes_them() {
    use crate::memory::testing::insert_fact;
    use crate::store::observations as obs;
    let (_d, store) = store_with(&[(
        "main",
        "2026-05-01T10:00:00.000Z",
        &md(&[("remember that the boat is moored at pier 7", "noted")]),
    )]);
    let main = GroupFolder::new("main").unwrap();
    let fam = GroupFolder::new("fam").unwrap();
    let (m, f) = (main.clone(), fam.clone());
    let id = store
        .write_blocking(move |tx| {
            let at = "2026-05-01T10:00:01.000Z";
            insert_fact(tx, &(&f).into(), "the boat is at pier 9", 8, &["Ann"], at)?;
            insert_fact(
                tx,
                &(&m).into(),
                "the boat is moored at pier 7",
                8,
                &["Ann"],
                at,
            )
        })
        .unwrap();
    let ask = |filters: Filters| {
        let m = main.clone();
        store
            .read_blocking(move |c| recall_with(c, &m, "where is the boat?", 5, &filters))
            .unwrap()
    };
    let hits = ask(Filters::default());
    assert_eq!(
        (hits[0].kind.as_str(), hits[0].id),
        ("observation", id),
        "{hits:#?}"
    );
    assert_eq!(hits[0].observation_kind.as_deref(), Some("fact"));
    assert!(hits.iter().any(|h| h.kind == "passage"));
    // Never the other group's.
    assert!(
        hits.iter().all(|h| !h.snippet.contains("pier 9")),
        "{hits:#?}"
    );
    let only = |k: &str| Filters {
        kind: Some(k.into()),
        since: None,
        asked: None,
    };
    assert!(ask(only("passage")).iter().all(|h| h.kind == "passage"));
    assert_eq!(ask(only("fact")).len(), 1);
    assert!(ask(only("decision")).is_empty());
    assert!(
        ask(Filters {
            kind: None,
            since: Some("2027".into()),
            asked: None,
        })
        .is_empty()
    );
    // Forgotten through another group: nothing happens.
    let (f, m) = (fam.clone(), main.clone());
    assert!(
        !store
            .write_blocking(move |tx| obs::forget(tx, &(&f).into(), id))
            .unwrap()
    );
    assert!(
        store
            .write_blocking(move |tx| obs::forget(tx, &(&m).into(), id))
            .unwrap()
    );
    assert!(ask(only("observation")).is_empty());
}

#[test]
fn global_memory_and_the_live_conversation_are_recalled_too() {
    use crate::memory::testing::insert_fact;
    let (_d, store) = store_with(&[(
        "main",
        "2026-05-01T10:00:00.000Z",
        &md(&[("we talked about the weather", "it was sunny")]),
    )]);
    let main = GroupFolder::new("main").unwrap();
    store
        .write_blocking(|tx| {
            let at = "2026-05-01T10:00:01.000Z";
            let global = MemoryFolder::global();
            insert_fact(tx, &global, "the family doctor is Dr. Lee", 9, &[], at)?;
            // A session archived at 10:00 whose later prompt is not.
            let m = GroupFolder::new("main").unwrap();
            let s = store::memory::open_session(tx, &m, "live", None, None, at)?;
            for (p, when) in [
                ("the lawnmower is in the shed", "2026-05-01T09:00:00.000Z"),
                ("the kayak is behind the garage", "2026-05-01T11:00:00.000Z"),
            ] {
                let b = store::memory::start_batch(tx, s, p, &[], when)?;
                store::memory::finish_batch(tx, b, Some("noted"), when)?;
            }
            tx.execute("UPDATE conversation_archives SET session_id = 'live'", ())?;
            Ok(())
        })
        .unwrap();
    let ask = |q: &str| {
        let (m, q) = (main.clone(), q.to_string());
        store.read_blocking(move |c| recall(c, &m, &q, 5)).unwrap()
    };
    let hits = ask("who is our doctor?");
    assert_eq!(
        (hits[0].kind.as_str(), hits[0].group.as_str()),
        ("observation", "global"),
        "{hits:#?}"
    );
    let hits = ask("where is the kayak?");
    assert_eq!(hits[0].kind, "prompt", "{hits:#?}");
    assert_eq!(hits[0].session_id.as_deref(), Some("live"));
    // What the archive holds is recalled as its passage, not as a prompt.
    assert!(
        ask("where is the lawnmower?")
            .iter()
            .all(|h| h.kind != "prompt"),
    );
    // Another group does not see main's prompts, but does see global's.
    let fam = GroupFolder::new("fam").unwrap();
    let theirs = store
        .read_blocking(move |c| Ok((recall(c, &fam, "kayak", 5)?, recall(c, &fam, "doctor", 5)?)))
        .unwrap();
    assert!(theirs.0.is_empty(), "{theirs:#?}");
    assert_eq!(theirs.1.len(), 1, "{theirs:#?}");
}

#[test]
fn a_search_of_several_groups_merges_by_score_and_counts_global_once() {
    use crate::memory::testing::insert_fact;
    let (_d, store) = store_with(&[
        (
            "main",
            "2026-05-01T10:00:00.000Z",
            &md(&[("the boat is moored at pier 7", "noted")]),
        ),
        (
            "fam",
            "2026-05-02T10:00:00.000Z",
            &md(&[("the boat needs new oars", "ok"), ("the weather", "fine")]),
        ),
    ]);
    store
        .write_blocking(|tx| {
            let at = "2026-05-01T10:00:01.000Z";
            let title = "the boat key hangs by the door";
            insert_fact(tx, &MemoryFolder::global(), title, 5, &[], at)?;
            Ok(())
        })
        .unwrap();
    let groups = vec![
        GroupFolder::new("main").unwrap(),
        GroupFolder::new("fam").unwrap(),
    ];
    let (all, top) = store
        .read_blocking(move |c| {
            Ok((
                recall_groups(c, &groups, "the boat", 10)?,
                recall_groups(c, &groups, "the boat", 2)?,
            ))
        })
        .unwrap();
    // Each group's recall holds global's memory: the merge keeps it once.
    let global: Vec<_> = all.iter().filter(|h| h.group == "global").collect();
    assert_eq!(global.len(), 1, "{all:#?}");
    for g in ["main", "fam"] {
        assert!(all.iter().any(|h| h.group == g), "{g}: {all:#?}");
    }
    assert!(all.windows(2).all(|w| w[0].score >= w[1].score), "{all:#?}");
    // The limit keeps the best of the merged list, not of one group's.
    assert_eq!(top, all[..2].to_vec(), "{all:#?}");
}

/// An archive of one long session: the same words said on several days.
fn dated_md() -> String {
    let mut s =
        String::from("# Shed\n\nArchived: May 14, 2026, 10:00 AM (Europe/Berlin)\n\n---\n\n");
    for (day, words) in [
        ("Tue, May 5, 2026", "the shed roof first quote"),
        ("Tue, May 12, 2026", "the shed roof second quote"),
        ("Wed, May 13, 2026", "the shed roof third quote"),
    ] {
        s.push_str(&format!(
            "### {day}\n\n**Ann** (18:00): {words}\n\n**G2**: noted\n\n"
        ));
    }
    s
}

#[test]
fn last_tuesday_asked_on_a_fixed_date_finds_tuesdays_passage_first() {
    let (_d, store) = store_with(&[("main", "2026-05-14T08:00:00.000Z", &dated_md())]);
    let main = GroupFolder::new("main").unwrap();
    // Thursday 14 May 2026, 10:00 in Berlin.
    let asked = when::Asked {
        at: "2026-05-14T08:00:00Z".parse().unwrap(),
        tz: chrono_tz::Europe::Berlin,
    };
    let ask = |q: &str| {
        let (m, q) = (main.clone(), q.to_string());
        let filters = Filters {
            asked: Some(asked),
            ..Filters::default()
        };
        store
            .read_blocking(move |c| recall_with(c, &m, &q, 5, &filters))
            .unwrap()
    };
    let first = |q: &str| {
        let hits = ask(q);
        assert!(!hits.is_empty(), "{q}");
        (hits[0].day.clone(), hits[0].snippet.clone())
    };
    // Without a time, the newest is first.
    assert_eq!(first("what about the shed roof?").0, "2026-05-13");
    // Every passage is dated by its own day, not the archive's.
    let days: Vec<String> = ask("shed roof").into_iter().map(|h| h.day).collect();
    assert_eq!(days.len(), 3, "{days:?}");
    for d in ["2026-05-05", "2026-05-12", "2026-05-13"] {
        assert!(days.contains(&d.to_string()), "{days:?}");
    }
    assert_eq!(
        first("what did we say about the shed roof last Tuesday?").0,
        "2026-05-12"
    );
    assert_eq!(first("what did we say last tuesday").0, "2026-05-12");
    assert_eq!(first("the shed roof, last week").0, "2026-05-05");
    assert_eq!(first("shed roof yesterday").0, "2026-05-13");
    assert_eq!(first("the roof on 5 May").0, "2026-05-05");
    // A question about something else that names a time does not lift
    // what was said then past the per-prompt gate.
    let other = ask("is the kayak trip still on Tuesday?");
    assert!(
        other
            .iter()
            .all(|h| h.score < crate::memory::context::Injection::SHIPPED.gate),
        "{other:#?}"
    );
    // Asked in Tokyo at 00:30 on the 14th (still the 13th in Berlin and
    // UTC), "yesterday" is Tokyo's 13th: Wednesday's passage (said at 18:00
    // Berlin, 01:00 on the 14th in Tokyo) is not in it, Tuesday's is.
    let tokyo = when::Asked {
        at: "2026-05-13T15:30:00Z".parse().unwrap(),
        tz: chrono_tz::Asia::Tokyo,
    };
    let m = main.clone();
    let hits = store
        .read_blocking(move |c| {
            recall_with(
                c,
                &m,
                "shed roof yesterday",
                5,
                &Filters {
                    asked: Some(tokyo),
                    ..Filters::default()
                },
            )
        })
        .unwrap();
    assert_eq!(hits[0].day, "2026-05-13", "{hits:#?}");
    assert!(hits[0].snippet.contains("second"), "{hits:#?}");
    // `since` a date is that day's start where the question is asked.
    let m = main.clone();
    let hits = store
        .read_blocking(move |c| {
            recall_with(
                c,
                &m,
                "shed roof",
                5,
                &Filters {
                    since: Some("2026-05-13".into()),
                    asked: Some(asked),
                    ..Filters::default()
                },
            )
        })
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
}
