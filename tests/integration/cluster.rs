//! Leases with a real `g2 serve` (real Docker, Claude Code, the offline
//! model): a host holds every group it serves and shows it in `g2 cluster
//! status` and `GET /api/cluster`; stopped past its lease while another
//! host (the test, through the store) takes a group, it stores nothing
//! for that group once it runs again, closes the group's container, and
//! answers its waiting message exactly once when the lease comes back.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;
use g2_host::store::leases;

/// The owner `status` (`g2 cluster status --json` or `GET /api/cluster`)
/// names for `group`.
fn owner(status: &Value, group: &str) -> Option<String> {
    status["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == group)
        .unwrap_or_else(|| panic!("{group} in {status}"))["host_id"]
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_holds_its_groups_shows_them_and_hands_them_over_when_it_stops() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    let s = serve(&home, &[("G2_CLUSTER__HOST_ID", "host-a")]);
    assert!(!ask(&s.url, "family", "ann", "hello there").await.is_empty());
    let api = get_json(&format!("{}/api/cluster", s.url)).await;
    let cli = home.json(&["cluster", "status"]);
    for status in [&api, &cli] {
        let hosts = status["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 1, "{status}");
        assert_eq!(hosts[0]["host_id"], "host-a");
        assert_eq!(hosts[0]["api"], s.url.as_str());
        assert_eq!(hosts[0]["live"], true);
        assert_eq!(hosts[0]["groups"], 2);
        assert_eq!(status["lease_secs"], 10);
        for g in ["main", "family"] {
            assert_eq!(owner(status, g).as_deref(), Some("host-a"), "{status}");
        }
    }
    let page = get_text(&format!("{}/", s.url)).await;
    assert!(
        page.contains("on <span class=\"host\">host-a</span>"),
        "the viewer names the owner: {page}"
    );
    let text = home.ok(&["cluster", "status"]);
    assert!(
        text.contains("host-a") && text.contains("live") && text.contains("family"),
        "{text}"
    );
    // A graceful stop (SIGTERM) leaves: its leases end at once, not
    // after 10 s.
    drop(s);
    let status = home.json(&["cluster", "status"]);
    assert_eq!(status["hosts"].as_array().unwrap().len(), 0, "{status}");
    assert_eq!(owner(&status, "family"), None, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_stopped_past_its_lease_is_fenced_and_answers_once_its_lease_is_back() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    let s = serve(
        &home,
        &[
            ("G2_CLUSTER__HOST_ID", "host-a"),
            ("G2_CLUSTER__LEASE_SECS", "2"),
        ],
    );
    assert!(!ask(&s.url, "family", "ann", "hello there").await.is_empty());
    assert_eq!(
        running_containers_of(&home).len(),
        1,
        "the family's container stays warm"
    );

    // Paused past its lease; meanwhile another host takes the family.
    let pid = s.child.id();
    signal(pid, "-STOP");
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    let store = home.store();
    let other = store
        .write_blocking(|tx| leases::acquire(tx, "family", "host-b", 60_000))
        .unwrap()
        .expect("an expired lease is free");
    assert!(other.generation >= 2, "{other:?}");
    signal(pid, "-CONT");

    // Any host takes the message in; the one that lost the group does not
    // answer it, and its container for the group goes.
    let seq = post(&s.url, "family", "ann", "are you still there?").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !running_containers_of(&home).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the fenced group's container stays up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        bot_texts(&s.url, "family").await.len(),
        1,
        "nothing answered by a fenced host"
    );
    let status = get_json(&format!("{}/api/cluster", s.url)).await;
    assert_eq!(
        owner(&status, "family").as_deref(),
        Some("host-b"),
        "{status}"
    );
    assert_eq!(
        owner(&status, "main").as_deref(),
        Some("host-a"),
        "{status}"
    );

    // The other host gives it up: this one takes it back at its next
    // heartbeat and answers what waits, once.
    assert!(
        store
            .write_blocking(|tx| leases::release(tx, "family", "host-b", other.generation))
            .unwrap()
    );
    let answers = wait_bot(&s.url, "family", 2, 120).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = bot_messages(&s.url, "family").await;
    assert_eq!(all.len(), 2, "answered exactly once: {answers:?}");
    assert!(all[1]["seq"].as_i64().unwrap() > seq);
    let status = get_json(&format!("{}/api/cluster", s.url)).await;
    assert_eq!(
        owner(&status, "family").as_deref(),
        Some("host-a"),
        "{status}"
    );
    let generation = status["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "family")
        .unwrap()["generation"]
        .as_i64()
        .unwrap();
    assert!(generation > other.generation, "{status}");
}
