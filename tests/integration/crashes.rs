//! A host killed (`kill -9`) at a named point of its work, with real
//! Docker, the real Claude Code, the offline model and `g2 serve`: the
//! test build of `g2` has fail points (`FAILPOINTS=name=sleep(ms)` holds it
//! there), the test waits until the point's effect is on disk and kills
//! it. A clear killed after writing its archive but before recording it,
//! and after recording it but before naming it: each leaves one archive,
//! recorded, once the host is back and the clear is asked again.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The files in the group's `conversations/`.
fn conversations(home: &TestHome) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(home.path().join("groups/main/conversations"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn recorded(home: &TestHome) -> Vec<String> {
    home.store()
        .read_blocking(|c| g2_host::store::archives::list(c, "main"))
        .unwrap()
        .into_iter()
        .map(|a| a.path)
        .collect()
}

async fn send_clear(base: &str) -> reqwest::Result<reqwest::Response> {
    http_client()
        .post(format!("{base}/api/groups/main/session/clear"))
        .json(&json!({ "name": "Taxes" }))
        .send()
        .await
}

async fn clear(base: &str) -> (u16, Value) {
    let r = send_clear(base).await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Starts a host stopping at `point`, has it clear a session, waits until
/// `reached` holds, and kills it there.
async fn killed_at(home: &TestHome, point: &str, reached: impl Fn() -> bool) {
    let spec = format!("{point}=sleep(600000)");
    let mut s = serve(home, &[("FAILPOINTS", &spec)]);
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default();
    assert!(
        log.contains("fail points set"),
        "this g2 was built without fail points (run the tests through cargo test): {log}"
    );
    ask(&s.url, "main", "ann", "plan the quarterly tax filing").await;
    let url = s.url.clone();
    // Cut by the kill: its error is expected.
    let pending = tokio::spawn(async move { send_clear(&url).await.err() });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reached() {
        assert!(
            Instant::now() < deadline,
            "{point} never reached: {:?}",
            conversations(home)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.child.kill().unwrap(); // SIGKILL, at the point
    s.child.wait().unwrap();
    pending.abort();
}

/// After the host is back: the clear asked again (answered `status`), then
/// one archive, recorded, and nothing pending.
async fn one_recorded_archive(home: &TestHome, status: u16) {
    let s = serve(home, &[]);
    let (st, body) = clear(&s.url).await;
    assert_eq!(st, status, "{body}");
    let files = conversations(home);
    assert_eq!(files.len(), 1, "one archive, nothing pending: {files:?}");
    assert!(files[0].ends_with("-taxes.md"), "{files:?}");
    assert_eq!(
        recorded(home),
        [format!("groups/main/conversations/{}", files[0])]
    );
    let md = std::fs::read_to_string(
        home.path()
            .join("groups/main/conversations")
            .join(&files[0]),
    )
    .unwrap();
    assert!(md.contains("plan the quarterly tax filing"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clear_killed_before_its_record_leaves_no_file_then_one() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let dir = home.path().join("groups/main/conversations");
    // At the fail point: the pending file linked and its temp file gone
    // (the link comes first, so a pending file alone is not there yet).
    let pending = |d: &Path| {
        let names: Vec<String> = std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.iter().any(|n| n.ends_with(".pending")) && !names.iter().any(|n| n.ends_with(".tmp"))
    };
    killed_at(&home, "archive-pending", || pending(&dir)).await;
    // Written, not recorded: what the kill left.
    assert!(recorded(&home).is_empty());
    assert_eq!(conversations(&home).len(), 1, "{:?}", conversations(&home));
    // The session was not cleared: clearing again archives it once.
    one_recorded_archive(&home, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clear_killed_after_its_record_names_its_archive_at_restart() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    killed_at(&home, "archive-recorded", || !recorded(&home).is_empty()).await;
    // Recorded, still pending: what the kill left.
    let left = conversations(&home);
    assert!(left.len() == 1 && left[0].ends_with(".pending"), "{left:?}");
    // The clear committed: asked again, there is nothing to clear, and the
    // start gave the archive its name.
    one_recorded_archive(&home, 404).await;
}
