//! When memory was said: prompt batches, observations and summaries carry
//! the time their text was said beside the time they were recorded, and
//! read it back as their time.

use std::time::Duration;

use g2_core::validate::{GroupFolder, MemoryFolder};
use g2_store::Store;
use g2_store::memory;
use g2_store::observations::{self, Kind, ObservationDraft, Provenance, SummaryDraft};

use super::each;

/// Said three days before it was captured.
const SAID: &str = "2026-01-01T09:00:00.000Z";
const CAPTURED: &str = "2026-01-04T10:00:00.000Z";
/// A direct prompt: said when captured, as far as anyone knows.
const DIRECT: &str = "2026-01-04T11:00:00.000Z";
const PROCESSED: &str = "2026-01-04T12:00:00.000Z";

fn draft(title: &str) -> ObservationDraft {
    ObservationDraft {
        kind: Kind::Fact,
        title: title.into(),
        narrative: String::new(),
        facts: vec![],
        files: vec![],
        importance: 5,
        concerns: vec![],
    }
}

/// Group `main`'s session `s` of a routed prompt (said at [`SAID`]) and a
/// direct one, an observation learned from each, one remembered and one
/// of no batch, and the session's summary. The batches' ids.
fn fill(store: &Store) -> (i64, i64) {
    let g = GroupFolder::new("main").unwrap();
    store
        .write_blocking(move |tx| {
            let s = memory::open_session(tx, &g, "s", None, None, CAPTURED)?;
            let routed = memory::start_said_batch(
                tx,
                s,
                "Ann: the kayak is behind the garage",
                &["Ann".into()],
                Some(SAID),
                CAPTURED,
            )?;
            let direct = memory::start_batch(tx, s, "the canoe is in the barn", &[], DIRECT)?;
            memory::end_session(tx, s, None, DIRECT)?;
            let m = MemoryFolder::from(&g);
            for (title, batch, remembered) in [
                ("kayak behind the garage", Some(routed), false),
                ("canoe in the barn", Some(direct), false),
                ("paddles hang in the hall", None, true),
                ("oars lean on the wall", None, false),
            ] {
                let from = Provenance {
                    session: Some(s),
                    batch,
                    remembered,
                };
                observations::insert(tx, &m, &draft(title), from, PROCESSED, |_| false)?;
            }
            let summary = SummaryDraft {
                title: "boats put away".into(),
                ..SummaryDraft::default()
            };
            observations::insert_summary(tx, &g, s, &summary, PROCESSED)?;
            Ok((routed, direct))
        })
        .unwrap()
}

/// What `store` reads of the rows [`fill`] wrote: each observation's title
/// and said time, the summary's span, each prompt's time.
type Said = (Vec<(String, String)>, (String, Option<String>), Vec<String>);

fn read(store: &Store, prompts: [i64; 2]) -> Said {
    store
        .read_blocking(move |c| {
            let mut obs: Vec<(String, String)> =
                observations::list(c, &MemoryFolder::new("main")?, true)?
                    .into_iter()
                    .map(|o| (o.title, o.said_at))
                    .collect();
            obs.sort();
            let m = observations::summary(c, &GroupFolder::new("main")?, "s")?.unwrap();
            let mut at = Vec::new();
            for id in prompts {
                at.push(g2_store::recall::prompt(c, id)?.unwrap().at);
            }
            Ok((obs, (m.said_from, m.said_to), at))
        })
        .unwrap()
}

fn expected() -> Said {
    let obs = [
        ("canoe in the barn", DIRECT),
        ("kayak behind the garage", SAID),
        ("oars lean on the wall", PROCESSED),
        ("paddles hang in the hall", PROCESSED),
    ];
    (
        obs.iter()
            .map(|(t, at)| (t.to_string(), at.to_string()))
            .collect(),
        (SAID.into(), Some(DIRECT.into())),
        vec![SAID.into(), DIRECT.into()],
    )
}

#[test]
fn prompts_observations_and_summaries_read_as_said() {
    each(|store| {
        let (routed, direct) = fill(store);
        assert_eq!(read(store, [routed, direct]), expected());
        // Found by words, they read as said too.
        let (obs, sums) = store
            .read_blocking(|c| {
                Ok((
                    observations::matching(c, ["main", "global"], "kayak", 5)?,
                    observations::matching_summaries(c, ["main", "global"], "boats", 5)?,
                ))
            })
            .unwrap();
        assert_eq!(obs[0].0.said_at, SAID);
        assert_eq!(sums[0].0.said_from, SAID);
        // An archive made after the prompt was said but before it was
        // captured does not hold it: "not archived yet" is a matter of
        // when things were recorded.
        super::archive(
            store,
            "main",
            1,
            "Boats",
            "# Boats\n",
            "2026-01-02T00:00:00.000Z",
        );
        let live = store
            .write_blocking(|tx| {
                tx.execute("UPDATE conversation_archives SET session_id = 's'", ())?;
                g2_store::recall::unarchived_prompts(tx, "kayak", ["main", "global"], 5)
            })
            .unwrap();
        assert_eq!(live.iter().map(|p| p.id).collect::<Vec<_>>(), [routed]);
        assert_eq!(live[0].at, SAID);
    });
}

#[test]
fn a_store_copied_to_postgres_keeps_when_memory_was_said() {
    let Some(cluster) = crate::pg_cluster::Cluster::shared() else {
        assert!(!super::in_ci(), "PostgreSQL is required in CI");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g2.db");
    let sqlite = Store::open(&path, Duration::from_secs(5)).unwrap();
    let ids = fill(&sqlite);
    drop(sqlite);
    let pg = Store::open_postgres(&cluster.database(), Duration::from_secs(5)).unwrap();
    g2_store::copy::sqlite_to_postgres(&path, &pg, |_| {}).unwrap();
    assert_eq!(read(&pg, [ids.0, ids.1]), expected());
}
