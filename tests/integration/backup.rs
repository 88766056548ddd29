//! `g2 backup` and `g2 restore` (docs/backup.md): a backup taken while the
//! host answers a stream of messages restores into a fresh home with every
//! row the backup counted, and that home serves (a reply in the same
//! session, the archive found); a non-empty home, a cut-short file and a
//! hostile entry are refused with nothing changed or left behind; no secret
//! is in a backup.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::hardening::tree;
use crate::steps::session_of;
use crate::support::*;
use g2_host::store::backup::summarize;

/// The entries of a folder (nothing left behind is none).
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// A stopped home with an archive, a token in g2.toml and a key in .env,
/// backed up; returns the home, the backup's folder and file.
fn backed_up() -> (TestHome, tempfile::TempDir, PathBuf) {
    let home = TestHome::new();
    archive_text(&home, "main", "Boat", "where is the boat?", "at pier 7");
    std::fs::write(
        home.path().join("g2.toml"),
        "[api]\ntoken = \"TOKEN-abcdefghijklmnop\"\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join(".env"),
        "ANTHROPIC_API_KEY=sk-ant-KEY-1234567890\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("home.tar.zst");
    home.ok(&["backup", file.to_str().unwrap()]);
    (home, dir, file)
}

#[test]
fn a_backup_holds_no_secret_and_restores_only_into_an_empty_home() {
    let (home, dir, file) = backed_up();
    let bytes = zstd::decode_all(std::fs::File::open(&file).unwrap()).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("at pier 7"), "the archive is in it");
    assert!(!text.contains("TOKEN-abcdefghijklmnop") && !text.contains("KEY-1234567890"));
    // Never over an existing file.
    assert!(
        home.fails(&["backup", file.to_str().unwrap()])
            .contains("exists already")
    );

    // Into a home in use: refused, nothing changed.
    let other = TestHome::new();
    let before = tree(other.path());
    let err = other.fails(&["restore", file.to_str().unwrap()]);
    assert!(err.contains("not an empty home"), "{err}");
    assert_eq!(tree(other.path()), before);

    // Into an empty one: every row, and the archive is found.
    let fresh = TestHome::empty();
    let out = fresh.json(&["restore", file.to_str().unwrap()]);
    assert_eq!(
        out["manifest"]["database"],
        serde_json::to_value(summarize(&fresh.home().db_path()).unwrap()).unwrap()
    );
    assert_eq!(out["manifest"]["settings_removed"][0], "api.token");
    assert!(!fresh.path().join(".env").exists());
    let hits = fresh.json(&["search", "pier"]);
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{hits}");
    drop(dir);
}

#[test]
fn a_cut_short_or_hostile_backup_is_refused_and_leaves_nothing() {
    let (_home, dir, file) = backed_up();
    let cut = dir.path().join("cut.tar.zst");
    let body = std::fs::read(&file).unwrap();
    std::fs::write(&cut, &body[..body.len() * 2 / 3]).unwrap();
    let hostile = |name: &str, kind: tar::EntryType, link: Option<&str>| {
        let path = dir.path().join(format!("hostile{}.tar.zst", name.len()));
        let mut tar = tar::Builder::new(zstd::Encoder::new(Vec::new(), 3).unwrap());
        let mut h = tar::Header::new_old();
        // Raw names: the tar crate refuses to write `..` itself.
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(kind);
        h.set_size(4);
        if let Some(l) = link {
            h.set_link_name(l).unwrap();
            h.set_size(0);
        }
        h.set_mode(0o644);
        h.set_cksum();
        let body: &[u8] = if link.is_some() { b"" } else { b"evil" };
        tar.append(&h, body).unwrap();
        std::fs::write(&path, tar.into_inner().unwrap().finish().unwrap()).unwrap();
        path
    };
    let cases = [
        (cut, "damaged or cut short"),
        (
            hostile("../evil", tar::EntryType::Regular, None),
            "never writes",
        ),
        (
            hostile("/tmp/g2-evil", tar::EntryType::Regular, None),
            "never writes",
        ),
        (
            hostile("groups/main/x", tar::EntryType::Symlink, Some("/etc")),
            "never writes",
        ),
    ];
    for (bad, why) in cases {
        let fresh = TestHome::empty();
        let err = fresh.fails(&["restore", bad.to_str().unwrap()]);
        assert!(err.contains(why), "{}: {err}", bad.display());
        assert_eq!(entries(fresh.path()), 0, "nothing left behind");
        assert!(!fresh.path().parent().unwrap().join("evil").exists());
    }
    assert!(!Path::new("/tmp/g2-evil").exists());
}

/// Posts to `main` and waits for each reply, until told to stop; counts
/// the replies.
fn traffic(
    base: String,
    stop: Arc<AtomicBool>,
    replies: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            n += 1;
            let reply = ask(
                &base,
                "main",
                "Ann",
                &format!("note {n}: the shed key is blue"),
            )
            .await;
            assert!(!reply.is_empty());
            replies.fetch_add(1, Ordering::SeqCst);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_the_host_serves_restores_into_a_home_that_serves() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    // A cleared session with its archive and captured prompts; the loop
    // below starts a new session with its transcript.
    ask(&s.url, "main", "Ann", "the dinghy is tied up at pier 7").await;
    let cleared = ask(&s.url, "main", "Bob", "g2:clear Boat").await;
    assert!(cleared.contains("bookmarked"), "{cleared}");

    let stop = Arc::new(AtomicBool::new(false));
    let replies = Arc::new(AtomicUsize::new(0));
    let load = traffic(s.url.clone(), stop.clone(), replies.clone());
    // The loop is answered before, during and after the backup.
    while replies.load(Ordering::SeqCst) < 1 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("home.tar.zst");
    let out = home.command(&["backup", file.to_str().unwrap(), "--json"], &[]);
    let out = tokio::task::spawn_blocking(move || {
        let mut out = out;
        out.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Value = serde_json::from_slice(&out.stdout).unwrap();
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let session = session_of(&home.sessions(), "main")
        .await
        .expect("a session");
    let source = get_json(&format!("{}/api/groups/main/messages?limit=1000", s.url)).await;
    drop(s);

    let counted = &written["manifest"]["database"]["rows"];
    for table in [
        "messages",
        "sessions",
        "session_history",
        "conversation_archives",
        "prompt_batches",
    ] {
        assert!(counted[table].as_i64().unwrap() > 0, "{table}: {counted}");
    }
    assert_eq!(
        written["manifest"]["archives_missing"],
        serde_json::json!([])
    );

    let fresh = TestHome::empty();
    let restored = fresh.json(&["restore", file.to_str().unwrap()]);
    assert_eq!(
        restored["manifest"]["database"],
        written["manifest"]["database"]
    );
    let now = serde_json::to_value(summarize(&fresh.home().db_path()).unwrap()).unwrap();
    assert_eq!(now, written["manifest"]["database"], "every table's rows");
    // Every message the backup counted, as the source had it.
    let restored_messages = {
        let s2 = serve(&fresh, &[]);
        let got = get_json(&format!("{}/api/groups/main/messages?limit=1000", s2.url)).await;
        // The restored home serves: a reply in the session it had, and the
        // archive is found.
        let reply = ask(&s2.url, "main", "Ann", "where are the oars?").await;
        assert!(!reply.is_empty());
        assert_eq!(
            session_of(&fresh.sessions(), "main").await,
            Some(session.clone())
        );
        let hits = fresh.json(&["search", "pier"]);
        assert!(hits.as_array().is_some_and(|h| !h.is_empty()), "{hits}");
        got
    };
    let restored_messages = restored_messages.as_array().unwrap();
    let last = restored_messages.last().unwrap()["seq"].as_i64().unwrap();
    let expected: Vec<&Value> = source
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["seq"].as_i64().unwrap() <= last)
        .collect();
    assert_eq!(restored_messages.iter().collect::<Vec<_>>(), expected);
    assert_eq!(
        restored_messages.len() as i64,
        counted["messages"].as_i64().unwrap()
    );
    assert!(
        fresh
            .home()
            .transcript_path(&gf("main"), &session)
            .unwrap()
            .is_file(),
        "the session's transcript"
    );
}
