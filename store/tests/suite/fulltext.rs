//! Full-text search: FTS5 on SQLite, tsvector/tsquery on PostgreSQL. The
//! same queries (the FTS5 syntax the host builds) find the same rows;
//! ranking may differ in its numbers but not in what is clearly better.

use g2_core::validate::{GroupFolder, MemoryFolder};
use g2_store::memory;
use g2_store::observations::{self, Kind, ObservationDraft, Provenance, SummaryDraft};
use g2_store::search::{self, Index};
use g2_store::{Store, recall};

use super::{archive, each};

fn add(store: &Store, group: &str, n: usize, title: &str, body: &str) -> i64 {
    let at = format!("2026-01-{:02}T00:00:00.000Z", n + 1);
    archive(store, group, n, title, body, &at).id
}

fn corpus(store: &Store) -> [i64; 4] {
    [
        add(
            store,
            "main",
            1,
            "Tax research",
            "**Alice**: I researched the tax deductions for 2025.\n",
        ),
        add(
            store,
            "main",
            2,
            "Garden",
            "**Alice**: The tomatoes need watering; taxes can wait.\n",
        ),
        add(
            store,
            "main",
            3,
            "Servers",
            "**Bob**: Did you run the uname command on db-1?\n",
        ),
        add(
            store,
            "family",
            4,
            "Tax at home",
            "**Carol**: tax tax tax, the family's taxes.\n",
        ),
    ]
}

#[test]
fn archives_are_found_by_stem_prefix_phrase_and_group() {
    each(|store| {
        let [tax, garden, servers, family] = corpus(store);
        let ids = |fts: &str, group: Option<&str>| -> Vec<i64> {
            let (fts, group) = (fts.to_string(), group.map(str::to_string));
            let mut v: Vec<i64> = store
                .read_blocking(move |c| search::ranked(c, &fts, 10, group.as_deref()))
                .unwrap()
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            v.sort_unstable();
            v
        };
        // "taxes" and "tax" share a stem; the title counts.
        assert_eq!(ids(r#""taxes""#, Some("main")), [tax, garden]);
        assert_eq!(ids(r#""tax""#, None), [tax, garden, family]);
        assert_eq!(ids(r#""resea"*"#, None), [tax]);
        assert_eq!(ids(r#""run the uname""#, None), [servers]);
        assert_eq!(ids(r#""uname the run""#, None), Vec::<i64>::new());
        assert_eq!(
            ids(r#""db-1""#, None),
            [servers],
            "punctuation splits words"
        );
        assert_eq!(
            ids(r#""tomatoes" OR "uname""#, Some("main")),
            [garden, servers]
        );
        assert_eq!(ids(r#""tax" "deductions""#, None), [tax]);
        // The title outweighs a body that says it once.
        let best = store
            .read_blocking(|c| search::ranked(c, r#""tax""#, 10, Some("main")))
            .unwrap();
        assert_eq!(best[0].0, tax, "{best:?}");
        assert!(best[0].1 > best[1].1);
        let hits = store
            .read_blocking(|c| {
                search::archive_hits(c, r#""tomatoes""#, 5, None, |b: &str| {
                    b.chars().take(20).collect()
                })
            })
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            (hits[0].archive_id, hits[0].snippet.as_str()),
            (garden, "**Alice**: The tomat")
        );
        let (all, count) = store
            .read_blocking(|c| {
                Ok((
                    search::matching(c, r#""tax""#)?,
                    search::capped_count(c, Index::Archives, r#""tax""#, 2)?,
                ))
            })
            .unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(count, 2, "counting stops at the cap");
    });
}

#[test]
fn passages_prompts_observations_and_summaries_are_found() {
    each(|store| {
        corpus(store);
        let g = GroupFolder::new("main").unwrap();
        let mg = MemoryFolder::new("main").unwrap();
        store
            .write_blocking(move |tx| {
                let s =
                    memory::open_session(tx, &g, "s-9", None, None, "2026-02-01T00:00:00.000Z")?;
                let b = memory::start_batch(
                    tx,
                    s,
                    "Where did we park the bicycle?",
                    &[],
                    "2026-02-01T00:00:01.000Z",
                )?;
                memory::finish_batch(
                    tx,
                    b,
                    Some("Behind the library."),
                    "2026-02-01T00:00:02.000Z",
                )?;
                let draft = ObservationDraft {
                    kind: Kind::Fact,
                    title: "Bicycle parking".into(),
                    narrative: "The bicycle is parked behind the library.".into(),
                    facts: vec!["Bicycle behind library".into()],
                    files: vec![],
                    importance: 5,
                    concerns: vec![],
                };
                observations::insert(
                    tx,
                    &mg,
                    &draft,
                    Provenance::default(),
                    "2026-02-01T00:00:03.000Z",
                    |_| false,
                )?;
                observations::insert_summary(
                    tx,
                    &g,
                    s,
                    &SummaryDraft {
                        request: "Find the bicycle".into(),
                        investigated: "Notes".into(),
                        learned: "It is behind the library".into(),
                        completed: "Answered".into(),
                        next_steps: "None".into(),
                        title: "Bicycle".into(),
                    },
                    "2026-02-01T00:00:04.000Z",
                )?;
                Ok(())
            })
            .unwrap();
        let groups = ["main", "global"];
        let (cands, newest, ranked, prompts, obs, sums) = store
            .read_blocking(move |c| {
                Ok((
                    recall::passage_candidates(c, r#""tax" OR "tomatoes""#, groups, 10)?,
                    recall::newest_matching(c, r#""tax""#, groups, 10)?,
                    recall::bm25_passages(c, r#""uname""#, groups, 10)?,
                    recall::unarchived_prompts(c, r#""bicycle""#, groups, 10)?,
                    observations::matching(c, groups, r#""library""#, 10)?,
                    observations::matching_summaries(c, groups, r#""library""#, 10)?,
                ))
            })
            .unwrap();
        assert_eq!(cands.len(), 2, "{cands:?}");
        assert!(cands.iter().all(|p| p.score > 0.0 && p.group == "main"));
        assert_eq!(newest.len(), 2);
        assert!(newest[0].at > newest[1].at, "newest first");
        assert_eq!(ranked.len(), 1);
        assert!(ranked[0].text.contains("uname"));
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].reply, "Behind the library.");
        assert_eq!(obs.len(), 1);
        assert_eq!(sums.len(), 1);
    });
}
