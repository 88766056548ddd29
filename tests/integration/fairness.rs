//! One group can never stall another (docs/recall.md, "Bounded cost,
//! shared fairly"): a query is read up to its 64th content word, whatever
//! its length, on every path, and the answer says what was left out; one
//! group's flood of heavy requests leaves another group's hooks within
//! their deadline and its agent's requests answered, through a real
//! `g2 serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use g2_core::wire::{Action, TaskResponse};

use crate::support::*;

#[path = "flood_load.rs"]
mod flood_load;
use flood_load::{Flood, flood, hook, long_query, word};

/// Words left out of [`long_query`]: all but its first 64.
const IGNORED: usize = 10_000 - 64;

/// The answer at `path`, polled for at most `secs`.
async fn answer(path: &Path, secs: u64) -> TaskResponse {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(bytes) = std::fs::read(path)
            && let Ok(r) = serde_json::from_slice::<TaskResponse>(&bytes)
        {
            return r;
        }
        assert!(Instant::now() < deadline, "no answer at {}", path.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `url` with `params` as its query.
fn with_query(url: &str, params: &[(&str, &str)]) -> reqwest::Url {
    reqwest::Url::parse_with_params(url, params).unwrap()
}

/// The group's memory socket, once `g2 serve` made it.
async fn socket(home: &TestHome, folder: &str) -> PathBuf {
    let path = home.path().join(format!("data/ipc/{folder}/model.sock"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "no socket for {folder}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_thousand_word_search_is_answered_within_two_seconds_naming_what_was_left_out() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let filler = "we talked about many other things that day. ".repeat(20);
    for i in 0..20 {
        archive_text(
            &home,
            "main",
            &format!("Day {i}"),
            &format!("the wombat slept by pier {i}. {filler}"),
            "noted",
        );
    }
    let long = long_query();

    // The CLI: hits, and a note on stderr.
    let t = Instant::now();
    let out = home.g2(&["search", "--json", &long]);
    let took = t.elapsed();
    assert!(out.status.success(), "{out:?}");
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!hits.as_array().unwrap().is_empty(), "{hits}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{IGNORED} words after them were ignored")),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(2), "g2 search took {took:?}");

    let s = serve(&home, &[("G2_PROVIDER", "offline")]);
    // Over HTTP: hits, and the header naming what was left out.
    let t = Instant::now();
    let r = http_client()
        .get(with_query(
            &format!("{}/api/search", s.url),
            &[("q", long.as_str()), ("group", "main")],
        ))
        .send()
        .await
        .unwrap();
    let took = t.elapsed();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["g2-query-ignored-words"].to_str().unwrap(),
        IGNORED.to_string()
    );
    let hits: serde_json::Value = r.json().await.unwrap();
    assert!(!hits.as_array().unwrap().is_empty(), "{hits}");
    assert!(took < Duration::from_secs(2), "HTTP search took {took:?}");
    // The same over the group's memory.
    let r = http_client()
        .get(with_query(
            &format!("{}/api/groups/main/memory/search", s.url),
            &[("q", long.as_str())],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["g2-query-ignored-words"].to_str().unwrap(),
        IGNORED.to_string()
    );

    // The agent's tool, through the request files its MCP server writes.
    for (id, action) in [
        (
            "search-1",
            Action::SearchSessions {
                query: long.clone(),
                limit: None,
            },
        ),
        (
            "memory-1",
            Action::MemorySearch {
                query: long.clone(),
                limit: None,
                kind: None,
                since: None,
            },
        ),
    ] {
        let t = Instant::now();
        let at = put_request(home.path(), "main", id, action);
        let r = answer(&at, 30).await;
        let took = t.elapsed();
        assert!(r.ok, "{r:?}");
        assert!(
            r.text
                .contains(&format!("{IGNORED} words after them were ignored")),
            "{}",
            r.text
        );
        assert!(took < Duration::from_secs(2), "{id} took {took:?}");
    }
    let r = answer(
        &home.path().join("data/ipc/main/responses/search-1.json"),
        1,
    )
    .await;
    assert!(
        r.text.contains("Day "),
        "the archives were found: {}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_groups_flood_leaves_another_groups_hooks_and_requests_on_time() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "alpha", "--name", "Alpha"]);
    home.ok(&["groups", "add", "beta", "--name", "Beta"]);
    let filler = "we talked about many other things that day. ".repeat(40);
    for i in 0..30 {
        archive_text(
            &home,
            "alpha",
            &format!("Trip {i}"),
            &format!(
                "the wombat slept by pier {i} {} {}. {filler}",
                word(i),
                word(i * 7)
            ),
            "noted",
        );
    }
    home.ok(&["memory", "remember", "beta", "the boat is moored at pier 7"]);
    let s = serve(
        &home,
        &[
            ("G2_PROVIDER", "offline"),
            // The product's deadline, not the suite's relaxed one.
            ("G2_MEMORY__INJECT_WAIT_MS", "50"),
        ],
    );
    let (a, b) = (socket(&home, "alpha").await, socket(&home, "beta").await);
    let long = Arc::new(long_query());

    // Alpha floods: 8 concurrent loops of 10,000-word memory blocks, and
    // 8 of 10,000-word searches over HTTP, and its agent's requests.
    let Flood {
        stop,
        rounds: flooded,
        loops,
    } = flood(home.path(), &s.url, &long, || socket_client(&a));
    let deadline = Instant::now() + Duration::from_secs(120);
    while flooded.load(Ordering::Relaxed) < 8 {
        assert!(
            Instant::now() < deadline && !loops.iter().any(tokio::task::JoinHandle::is_finished),
            "alpha's flood did not get going"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Beta's hooks meanwhile: 100 round trips.
    let client = socket_client(&b);
    let mut times = Vec::new();
    let mut blocks = 0;
    for _ in 0..100 {
        let (took, block) = hook(&client, "where is the boat moored?").await;
        times.push(took);
        blocks += usize::from(block.contains("pier 7"));
    }
    // Beta's agent's request meanwhile.
    let t = Instant::now();
    let at = put_request(home.path(), "beta", "beta-tasks", Action::ListTasks {});
    let r = answer(&at, 30).await;
    let list_tasks = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    // Alpha's clients hang up: what waited in its lane leaves it, and the
    // rest of the suite gets the cores back.
    for f in &loops {
        f.abort();
    }
    for f in loops {
        if let Err(e) = f.await {
            assert!(e.is_cancelled(), "a flood loop failed: {e}");
        }
    }

    times.sort();
    let p50 = times[times.len() / 2];
    let p99 = times[times.len() * 99 / 100 - 1];
    eprintln!(
        "beta's hooks under alpha's flood ({} flood rounds): p50 {p50:?}, p99 {p99:?}, {blocks} of 100 with the block; list_tasks {list_tasks:?}",
        flooded.load(Ordering::Relaxed)
    );
    assert!(r.ok, "{r:?}");
    assert!(
        list_tasks < Duration::from_secs(1),
        "list_tasks took {list_tasks:?}"
    );
    // The product's figure (p99 under 50 ms) is a release build's
    // (`benches/flood.rs`); this debug build shares two cores with the
    // flood and the rest of the suite, so the test holds beta to what no
    // queue behind alpha would allow (before lanes: hooks past a second,
    // list_tasks not answered in 30 s): every hook answered within two
    // seconds, some with its memory (the share is the CPU's: 19-86 of 100
    // in a debug build, about a fifth in the release bench).
    assert!(p99 < Duration::from_secs(2), "p99 {p99:?}");
    assert!(blocks >= 1, "{blocks} of 100 hooks had the block");
    // Hooks that gave up at their deadline left beta's lane: once alpha
    // stops, beta's memory is back (a lane that kept their places would
    // refuse beta for good).
    let back = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, block) = hook(&client, "where is the boat moored now?").await;
        if block.contains("pier 7") {
            break;
        }
        assert!(Instant::now() < back, "beta's memory never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Alpha's own requests were all answered too: served, or refused at
    // once while its lane was full. They wait behind alpha's flood, which
    // a debug build on a busy machine serves slowly: the bound is wide.
    for i in 0..8 {
        let r = answer(
            &home
                .path()
                .join(format!("data/ipc/alpha/responses/flood-{i}.json")),
            300,
        )
        .await;
        assert!(r.ok || r.text.starts_with("busy: group alpha"), "{r:?}");
    }
}
