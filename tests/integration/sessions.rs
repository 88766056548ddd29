//! Session pointers, the generation guard, clear and resume.

use crate::steps::{session_of, set_session};
use crate::support::*;
use g2_core::validate::GroupFolder;
use g2_host::Error;

const A: &str = "11111111-1111-4111-8111-111111111111";
const B: &str = "22222222-2222-4222-8222-222222222222";
const C: &str = "33333333-3333-4333-8333-333333333333";

#[tokio::test]
async fn a_cleared_session_cannot_come_back_from_a_running_turn() {
    let home = TestHome::new();
    let s = home.sessions();
    let p0 = s.get(&gf("main")).await.unwrap();
    let p1 = s.set(&gf("main"), A, p0.generation).await.unwrap();
    assert_eq!(p1.generation, p0.generation + 1);

    // A turn reads the pointer when it starts...
    let turn_read = s.get(&gf("main")).await.unwrap();
    // ...meanwhile the agent clears the session...
    s.clear(&gf("main"), "First", turn_read.generation)
        .await
        .unwrap();
    // ...and when the turn ends it tries to write its session id back.
    let err = s
        .set(&gf("main"), A, turn_read.generation)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StaleGeneration { .. }), "{err}");
    let now = s.get(&gf("main")).await.unwrap();
    assert_eq!(now.session_id, None);
    assert_eq!(now.generation, turn_read.generation + 1);

    // A fresh manager (another process) sees the same state.
    let other = home.sessions();
    assert_eq!(other.get(&gf("main")).await.unwrap(), now);
    // Its stale write is refused too, by the database, not the cache.
    let err = other.set(&gf("main"), B, p0.generation).await.unwrap_err();
    assert!(matches!(err, Error::StaleGeneration { .. }));
}

#[tokio::test]
async fn racing_writers_from_one_generation_only_one_wins() {
    let home = TestHome::new();
    let s = home.sessions();
    let g = s.get(&gf("main")).await.unwrap().generation;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = s.clone();
        let id = format!("{i:08x}-0000-4000-8000-000000000000");
        tasks.push(tokio::spawn(
            async move { s.set(&gf("main"), &id, g).await },
        ));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(Error::StaleGeneration { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(s.get(&gf("main")).await.unwrap().generation, g + 1);
}

#[tokio::test]
async fn setting_the_active_session_again_keeps_the_generation() {
    let home = TestHome::new();
    let s = home.sessions();
    let p = s.set(&gf("main"), A, 0).await.unwrap();
    let again = s
        .set(&gf("main"), &A.to_uppercase(), p.generation)
        .await
        .unwrap();
    assert_eq!(again.generation, p.generation);
    assert_eq!(again.session_id.as_deref(), Some(A));
}

#[tokio::test]
async fn clear_archives_bookmarks_and_removes_the_pointer_atomically() {
    let home = TestHome::new();
    let s = home.sessions();
    let p = s.set(&gf("main"), A, 0).await.unwrap();
    let t = home.home().transcript_path(&gf("main"), A).unwrap();
    write_transcript(
        &t,
        A,
        &[("Let us do the tax research", "Sure, the quokka tax applies")],
    );

    let cleared = s
        .clear(&gf("main"), "Tax research", p.generation)
        .await
        .unwrap();
    let archive = cleared.archive.expect("transcript archived");
    assert!(
        archive.path.ends_with("-tax-research.md"),
        "{}",
        archive.path
    );
    assert_eq!(archive.session_id.as_deref(), Some(A));
    let md = std::fs::read_to_string(home.path().join(&archive.path)).unwrap();
    assert!(md.starts_with("# Tax research\n"));
    assert!(md.contains("**User**: Let us do the tax research"));
    assert_eq!(cleared.history.name, "Tax research");
    assert_eq!(cleared.history.session_id, A);
    assert_eq!(s.get(&gf("main")).await.unwrap().session_id, None);
    let history = s.history(&gf("main")).await.unwrap();
    assert_eq!(history.len(), 1);
    // Indexed in the same transaction.
    let hits = home
        .store()
        .read(|c| g2_host::search::search(c, "quokka", None, 10))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].archive_id, archive.id);

    // Nothing to clear now: a clear error, nothing written.
    let g = s.get(&gf("main")).await.unwrap().generation;
    let err = s.clear(&gf("main"), "Again", g).await.unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    assert_eq!(home.archives("main").len(), 1);
}

#[tokio::test]
async fn a_refused_clear_leaves_no_archive_behind() {
    let home = TestHome::new();
    let s = home.sessions();
    let p = s.set(&gf("main"), A, 0).await.unwrap();
    write_transcript(
        &home.home().transcript_path(&gf("main"), A).unwrap(),
        A,
        &[("hi", "hello")],
    );
    let err = s
        .clear(&gf("main"), "Stale", p.generation - 1)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StaleGeneration { .. }));
    assert!(
        home.archives("main").is_empty(),
        "{:?}",
        home.archives("main")
    );
    assert!(s.history(&gf("main")).await.unwrap().is_empty());
    assert_eq!(
        s.get(&gf("main")).await.unwrap().session_id.as_deref(),
        Some(A)
    );
    let n: i64 = home
        .store()
        .read(|c| c.query_row("SELECT count(*) FROM archives_fts", (), |r| r.get(0)))
        .await
        .unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn resume_restores_and_bookmarks_the_current_session() {
    let home = TestHome::new();
    home.ok(&["groups", "add", "dev", "--name", "Dev"]);
    let s = home.sessions();
    let p = s.set(&gf("main"), A, 0).await.unwrap();
    let first = s
        .clear(&gf("main"), "First", p.generation)
        .await
        .unwrap()
        .history;
    let p = s.get(&gf("main")).await.unwrap();
    let p = s.set(&gf("main"), B, p.generation).await.unwrap();
    write_transcript(
        &home.home().transcript_path(&gf("main"), B).unwrap(),
        B,
        &[("second talk", "ok")],
    );

    let r = s
        .resume(&gf("main"), first.id, p.generation, Some("Second"))
        .await
        .unwrap();
    assert_eq!(r.pointer.session_id.as_deref(), Some(A));
    // The restored session keeps its original start time.
    assert_eq!(
        r.pointer.created_at.as_deref(),
        Some(first.created_at.as_str())
    );
    let saved = r.saved.unwrap();
    assert_eq!(
        (saved.session_id.as_str(), saved.name.as_str()),
        (B, "Second")
    );
    assert!(r.saved_archive.unwrap().path.ends_with("-second.md"));
    let history = s.history(&gf("main")).await.unwrap();
    assert_eq!(
        history
            .iter()
            .map(|h| h.session_id.as_str())
            .collect::<Vec<_>>(),
        [B]
    );

    // Another group cannot resume main's history entry.
    let dev = s.get(&gf("dev")).await.unwrap();
    let err = s
        .resume(&gf("dev"), saved.id, dev.generation, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    assert_eq!(s.history(&gf("main")).await.unwrap().len(), 1);
    assert_eq!(s.get(&gf("dev")).await.unwrap().session_id, None);

    // Without a name, the current session is bookmarked anyway.
    let p = s.get(&gf("main")).await.unwrap();
    let r = s
        .resume(&gf("main"), saved.id, p.generation, None)
        .await
        .unwrap();
    assert_eq!(r.pointer.session_id.as_deref(), Some(B));
    let auto = r.saved.unwrap();
    assert_eq!(auto.session_id, A);
    assert_eq!(auto.name, "before resuming Second");
    let _ = C;
}

#[tokio::test]
async fn invalid_names_never_touch_the_store() {
    let home = TestHome::new();
    let s = home.sessions();
    // A bad folder name never becomes a GroupFolder, the only thing the
    // session manager takes: it is refused before any store is reached.
    for bad in ["../main", "global", "a/b", ""] {
        assert!(
            matches!(
                GroupFolder::new(bad).map_err(Error::from),
                Err(Error::Validation(_))
            ),
            "{bad:?}"
        );
    }
    for bad in ["../../etc/passwd", "not-a-uuid", ""] {
        assert!(
            matches!(s.set(&gf("main"), bad, 0).await, Err(Error::Validation(_))),
            "{bad:?}"
        );
    }
    let p = s.set(&gf("main"), A, 0).await.unwrap();
    assert!(matches!(
        s.clear(&gf("main"), "   ", p.generation).await,
        Err(Error::Invalid(_))
    ));
    assert_eq!(
        s.get(&gf("main")).await.unwrap().session_id.as_deref(),
        Some(A)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_requests_act_on_their_own_group_only() {
    use g2_core::wire::{Action, TaskResponse};
    let home = TestHome::new();
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    home.ok(&["groups", "add", "work", "--name", "Work"]);
    let sessions = home.sessions();
    let work_id = "11111111-2222-4333-8444-555555555555";
    set_session(&sessions, "work", work_id).await;
    let tasks = g2_host::requests::RequestServer::new(
        home.home(),
        home.store(),
        sessions.clone(),
        home.links(),
    );

    // A family request naming a work session id still acts on family.
    let ask = |folder: &str, id: &str, action: Action| {
        put_request(home.path(), folder, id, action);
    };
    ask("family", "r1", Action::ClearSession { name: "x".into() });
    ask("family", "r2", Action::ListSessions {});
    ask(
        "family",
        "r3",
        Action::ResumeSession {
            history_id: 1,
            save_current_as: None,
        },
    );
    let dir = home.path().join("data/ipc/family/tasks");
    std::fs::write(
        dir.join("r4.json"),
        b"{\"requestId\":\"r4\",\"type\":\"register_group\",\"folder\":\"evil\"}",
    )
    .unwrap();
    tasks.drain(&gf("family")).await;

    let answer = |id: &str| -> TaskResponse {
        serde_json::from_slice(
            &std::fs::read(
                home.path()
                    .join(format!("data/ipc/family/responses/{id}.json")),
            )
            .unwrap(),
        )
        .unwrap()
    };
    let r1 = answer("r1");
    assert!(
        !r1.ok && r1.text.contains("active session in group \"family\""),
        "{r1:?}"
    );
    assert_eq!(answer("r2").text, "No earlier sessions.");
    assert!(!answer("r3").ok);
    // Work's pointer is untouched; the unknown action is kept with a reason.
    assert_eq!(
        session_of(&sessions, "work").await.as_deref(),
        Some(work_id)
    );
    let errors = home.path().join("data/ipc/family/errors");
    assert!(errors.join("r4.json").exists());
    assert!(
        std::fs::read_to_string(errors.join("r4.json.reason.txt"))
            .unwrap()
            .contains("not a valid request")
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "every request was claimed"
    );
    assert!(
        home.path()
            .join("data/ipc/work/responses")
            .read_dir()
            .map(|mut d| d.next().is_none())
            .unwrap_or(true)
    );
}

/// The new user's sequence with `g2 serve` running and main's agent warm:
/// a clear from the command line goes through the host, which lets the
/// agent finish first; the archive holds the whole session and is never
/// written after; the next message starts a fresh session; and the
/// agent's own clear and resume go on working after a resume from outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clear_from_outside_never_splits_a_live_session() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let mut main = Sse::open(&s.url, "main", None).await;
    post(&s.url, "main", "Ann", "remember the quokka is called Pip").await;
    main.reply(120).await;
    let first = home.ok(&["sessions", "show", "main"]).trim().to_string();
    // The agent is warm, and busy with a slow turn when the clear comes.
    post(
        &s.url,
        "main",
        "Ann",
        "g2:bash sleep 3; echo slow turn done",
    )
    .await;
    let cleared = home.json(&["sessions", "clear", "main", "--name", "Quokka"]);
    assert_eq!(
        cleared["history"]["session_id"],
        first.as_str(),
        "{cleared}"
    );
    // The slow turn was answered before the clear took its archive.
    let slow = main.reply(60).await;
    assert!(slow.contains("slow turn done"), "{slow}");
    let archive = home
        .path()
        .join(cleared["archive"]["path"].as_str().unwrap());
    let archived = std::fs::read_to_string(&archive).unwrap();
    assert!(
        archived.contains("slow turn done"),
        "the whole session: {archived}"
    );
    let transcript = home.home().transcript_path(&gf("main"), &first).unwrap();
    let before = std::fs::read(&transcript).unwrap();
    assert_eq!(
        home.ok(&["sessions", "show", "main"]).trim(),
        "no active session (generation 2)"
    );

    // The next message starts a fresh session; the old one is left alone.
    post(&s.url, "main", "Bob", "hello again").await;
    main.reply(120).await;
    let second = home.ok(&["sessions", "show", "main"]).trim().to_string();
    assert!(second != first && second.len() == 36, "{second}");
    assert_eq!(
        std::fs::read(&transcript).unwrap(),
        before,
        "the archived session grew"
    );
    assert_eq!(std::fs::read_to_string(&archive).unwrap(), archived);

    // A resume from outside, then the agent's own clear and resume.
    let history = home.json(&["sessions", "history", "main"]);
    let id = history[0]["id"].as_i64().unwrap().to_string();
    let resumed = home.json(&["sessions", "resume", "main", &id, "--save-as", "Second"]);
    assert_eq!(
        resumed["pointer"]["session_id"],
        first.as_str(),
        "{resumed}"
    );
    post(&s.url, "main", "Bob", "g2:clear Mine").await;
    let mine = main.reply(120).await;
    assert!(mine.contains("bookmarked"), "the agent's own clear: {mine}");
    post(&s.url, "main", "Bob", "g2:sessions").await;
    let list = main.reply(120).await;
    let second_id = list
        .lines()
        .find(|l| l.contains("\"Second\""))
        .and_then(|l| l.trim().strip_prefix('#'))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no Second in {list}"))
        .to_string();
    post(&s.url, "main", "Bob", &format!("g2:resume {second_id}")).await;
    let back = main.reply(120).await;
    assert!(
        back.contains(&format!("Resumed session {second}")),
        "{back}"
    );
    drop(s);
}

/// Without a host, a clear takes the home's lock itself and first settles
/// what a killed clear left; with `g2 run` holding the home it is refused.
#[test]
fn a_clear_without_a_host_settles_what_a_killed_one_left() {
    let home = TestHome::new();
    let dir = home.path().join("groups/main/conversations");
    std::fs::create_dir_all(&dir).unwrap();
    // What a clear killed between writing and recording leaves.
    std::fs::write(dir.join(".2026-11-27-boat.md.pending"), "# Boat\n").unwrap();
    home.ok(&["sessions", "set", "main", A]);
    let out = home.ok(&["sessions", "clear", "main", "--name", "Next"]);
    assert!(out.contains("cleared session"), "{out}");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(left.iter().all(|n| !n.contains("pending")), "{left:?}");
}
