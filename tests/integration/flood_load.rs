//! One group's flood of heavy requests, shared by the fairness tests
//! (`fairness.rs`) and the flood bench (`host/benches/flood.rs`, which
//! includes this file by path): the 10,000-word query, a hook's request
//! for the per-prompt block, and alpha's flood of them.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use g2_core::wire::{Action, TaskRequest};
use serde_json::json;
use tokio::task::JoinHandle;

/// `wombat pier` and 9,998 other distinct words: 10,000 in all, short
/// enough to go in a URL (HTTP servers take at most 64 KiB there).
pub fn long_query() -> String {
    let tail: Vec<String> = (0..9_998u32).map(word).collect();
    format!("wombat pier {}", tail.join(" "))
}

/// A short word no text holds but the test's: `x` and `i` in base 36.
pub fn word(mut i: u32) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut w = Vec::new();
    loop {
        w.push(digits[(i % 36) as usize]);
        i /= 36;
        if i == 0 {
            break;
        }
    }
    w.push(b'x');
    w.reverse();
    String::from_utf8(w).unwrap()
}

/// A hook's request for the per-prompt block: its round trip and block.
pub async fn hook(client: &reqwest::Client, prompt: &str) -> (Duration, String) {
    let t = Instant::now();
    let r = client
        .post("http://g2/g2/memory/context")
        .json(&json!({ "event": "UserPromptSubmit", "prompt": prompt }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    let block = v["context"].as_str().unwrap_or_default().to_string();
    (t.elapsed(), block)
}

/// Alpha's flood under way: its loops, the flag that stops them and how
/// many rounds they completed.
pub struct Flood {
    pub stop: Arc<AtomicBool>,
    pub rounds: Arc<AtomicUsize>,
    pub loops: Vec<JoinHandle<()>>,
}

/// Floods `alpha` of `g2 serve` at `url` with `long`: 8 concurrent loops,
/// each a memory block on the group's socket (a client from `socket`)
/// then a memory search over HTTP, served or refused at once when alpha's
/// lane is full; and 8 of its agent's `search_sessions` requests, written
/// into `home`'s IPC folder.
pub fn flood(
    home: &Path,
    url: &str,
    long: &Arc<String>,
    socket: impl Fn() -> reqwest::Client,
) -> Flood {
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let search = reqwest::Url::parse_with_params(
        &format!("{url}/api/groups/alpha/memory/search"),
        &[("q", long.as_str())],
    )
    .unwrap();
    let loops = (0..8)
        .map(|_| {
            let (stop, rounds, long, search) =
                (stop.clone(), rounds.clone(), long.clone(), search.clone());
            let (socket, http) = (socket(), reqwest::Client::new());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    hook(&socket, &long).await;
                    let r = http.get(search.clone()).send().await.unwrap();
                    assert!(r.status() == 200 || r.status() == 429, "{}", r.status());
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for i in 0..8 {
        let req = TaskRequest {
            request_id: format!("flood-{i}"),
            action: Action::SearchSessions {
                query: long.to_string(),
                limit: Some(50),
            },
        };
        g2_core::ipc::write_request(&home.join("data/ipc/alpha"), &req).unwrap();
    }
    Flood {
        stop,
        rounds,
        loops,
    }
}
