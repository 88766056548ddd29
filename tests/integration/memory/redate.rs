//! `g2 memory reindex` dates the passages of archives recorded before
//! passages were dated by their messages (all at the archive's time): from
//! their session's transcript while it exists, else from the markdown's
//! own times.

use g2_host::archives::{Prepared, Trigger};
use g2_host::store::{self, Store};

use crate::support::*;

const SESSION: &str = "55555555-5555-4555-8555-555555555555";
const ARCHIVED: &str = "2026-05-09T09:00:00.000Z";
/// Embeddings off: the reindex has nothing to embed.
const ENV: &[(&str, &str)] = &[("G2_MEMORY__EMBEDDINGS", "off")];

/// A routed chat over two days as Claude Code wrote it: Ann on the
/// evening of May 7 and the morning of May 8 (UTC), the agent answering.
fn transcript() -> String {
    let line = |kind: &str, at: &str, content: serde_json::Value| {
        serde_json::json!({
            "type": kind, "uuid": format!("{kind}-{at}"), "sessionId": SESSION,
            "timestamp": at, "message": {"role": kind, "content": content}
        })
        .to_string()
    };
    let said = |at: &str, text: &str| {
        serde_json::Value::String(g2_core::envelope::write([("Ann", at, text)]))
    };
    let answer = |text: &str| serde_json::json!([{"type": "text", "text": text}]);
    [
        line(
            "user",
            "2026-05-07T22:00:05.000Z",
            said("2026-05-07T22:00:00.000Z", "the boat is moored at pier 7"),
        ),
        line(
            "assistant",
            "2026-05-07T22:00:09.000Z",
            answer("Noted: pier 7."),
        ),
        line(
            "user",
            "2026-05-08T08:30:05.000Z",
            said("2026-05-08T08:30:00.000Z", "where is the boat?"),
        ),
        line(
            "assistant",
            "2026-05-08T08:30:09.000Z",
            answer("At pier 7."),
        ),
    ]
    .join("\n")
}

/// The same conversation archived the old way: no day lines, no timezone.
const OLD_MARKDOWN: &str = "# Boat\n\nArchived: May 9, 2026, 9:00 AM\n\n---\n\n\
**Ann** (22:00): the boat is moored at pier 7\n\n\
**G2**: Noted: pier 7.\n\n\
**Ann** (08:30): where is the boat?\n\n\
**G2**: At pier 7.\n";

/// Its passages' (id, at), by ordinal.
fn times(store: &Store) -> Vec<(i64, String)> {
    store
        .read_blocking(|c| {
            store::query_all(
                c,
                "SELECT id, at FROM archive_passages ORDER BY ordinal",
                (),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .unwrap()
}

/// Every passage back at the archive's time, as before passages were
/// dated by their messages.
fn make_old(store: &Store) {
    store
        .write_blocking(|tx| {
            tx.execute(
                "UPDATE archive_passages SET at = ?1, at_end = NULL",
                [ARCHIVED],
            )
        })
        .unwrap();
}

#[test]
fn reindex_re_dates_an_old_archive() {
    let home = TestHome::new();
    let store = home.store();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("t.jsonl");
    std::fs::write(&source, transcript()).unwrap();
    let placed = home.place_transcript("main", SESSION, &source);
    let p = Prepared {
        group: gf("main"),
        session_id: Some(SESSION.into()),
        title: "Boat".into(),
        file_name: "2026-05-09-boat.md".into(),
        rel_path: "groups/main/conversations/2026-05-09-boat.md".into(),
        body: OLD_MARKDOWN.into(),
        trigger: Trigger::Clear,
        created_at: ARCHIVED.into(),
        stats: Default::default(),
        pending: false,
    };
    store
        .write_blocking(move |tx| Ok(store::archives::insert(tx, &p)?.id))
        .unwrap();
    make_old(&store);
    let before = times(&store);
    assert_eq!(before.len(), 2, "{before:?}");

    // The transcript is there: its days.
    let out = home.g2_with(&["memory", "reindex"], ENV);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "re-dated 1 archives: 1 from transcripts, 0 from their markdown, 0 unchanged"
        ),
        "{stdout}"
    );
    let after = times(&store);
    assert_eq!(
        after,
        vec![
            (before[0].0, "2026-05-07T22:00:00.000Z".to_string()),
            (before[1].0, "2026-05-08T08:30:00.000Z".to_string()),
        ],
        "dated in place, the rows kept"
    );
    // What a person sees.
    let out = home.g2_with(
        &[
            "memory", "search", "where", "is", "the", "boat", "--group", "main", "--json",
        ],
        ENV,
    );
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let hit = hits
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["turn_start"] == 2)
        .unwrap_or_else(|| panic!("{hits:#}"));
    assert_eq!(hit["at"], "2026-05-08T08:30:00.000Z", "{hit:#}");
    assert_eq!(hit["day"], "2026-05-08", "{hit:#}");

    // Again: nothing changes.
    let out = home.g2_with(&["memory", "reindex"], ENV);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "re-dated 0 archives: 0 from transcripts, 0 from their markdown, 1 unchanged"
        ),
        "{stdout}"
    );

    // The transcript gone: the markdown's times, walked back from its
    // Archived time (May 9, 9:00): 08:30 that morning, 22:00 the evening
    // before.
    std::fs::remove_file(placed).unwrap();
    make_old(&store);
    let out = home.g2_with(&["memory", "reindex"], ENV);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "re-dated 1 archives: 0 from transcripts, 1 from their markdown, 0 unchanged"
        ),
        "{stdout}"
    );
    assert_eq!(
        times(&store),
        vec![
            (before[0].0, "2026-05-08T22:00:00.000Z".to_string()),
            (before[1].0, "2026-05-09T08:30:00.000Z".to_string()),
        ]
    );
}
