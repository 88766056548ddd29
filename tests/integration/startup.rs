//! `g2 serve`'s start-up recovery runs in the background: `/health`
//! answers while archives recorded without passages are split for recall,
//! SIGTERM stops the host within 2 s in the middle of it, and the next
//! start finishes what is left.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{self, TestHome};

const ARCHIVES: usize = 12;
/// Exchanges per archive: 2,000 (about 2 MB of transcript each) make the
/// recovery last seconds in a test build.
const EXCHANGES: usize = 2000;
/// A word only the last archive's last exchange holds.
const LAST_WORD: &str = "quokkalantern";

/// A home whose archives have no passages, as archives recorded before
/// passages existed: archived with `g2 archive`, then their passages
/// deleted.
fn home_to_recover() -> TestHome {
    let home = TestHome::new();
    let dir = tempfile::tempdir().unwrap();
    let words = [
        "boat", "harbour", "pier", "weather", "museum", "rain", "coffee", "server", "deploy",
        "kernel", "garden", "bicycle", "river", "mountain", "library", "concert", "piano",
    ];
    let text = |seed: usize, n: usize| -> String {
        (0..n)
            .map(|k| words[(seed * 7 + k * 13 + k * k) % words.len()])
            .collect::<Vec<_>>()
            .join(" ")
    };
    for a in 0..ARCHIVES {
        let exchanges: Vec<(String, String)> = (0..EXCHANGES)
            .map(|i| {
                let mut user = format!("{} turn{a}x{i}", text(a * EXCHANGES + i, 40));
                if a == ARCHIVES - 1 && i == EXCHANGES - 1 {
                    user.push_str(&format!(" the {LAST_WORD} is in the shed"));
                }
                (user, text(i, 80))
            })
            .collect();
        let pairs: Vec<(&str, &str)> = exchanges
            .iter()
            .map(|(u, r)| (u.as_str(), r.as_str()))
            .collect();
        let t = dir.path().join(format!("t{a}.jsonl"));
        support::write_transcript(&t, &format!("44444444-4444-4444-8444-{a:012}"), &pairs);
        home.ok(&[
            "archive",
            t.to_str().unwrap(),
            "--group",
            "main",
            "--name",
            &format!("A{a}"),
        ]);
    }
    home.store()
        .write_blocking(g2_host::store::recall::clear_passages)
        .unwrap();
    assert_eq!(unindexed(&home), ARCHIVES as i64);
    home
}

fn unindexed(home: &TestHome) -> i64 {
    home.store()
        .read_blocking(g2_host::store::recall::count_archives_without_passages)
        .unwrap()
}

/// The log from byte `from` on.
fn log_from(home: &TestHome, from: usize) -> String {
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default();
    log.get(from..).unwrap_or_default().to_string()
}

/// Waits (up to `secs`) until the log from `from` holds `needle`.
fn wait_log(home: &TestHome, from: usize, needle: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let log = log_from(home, from);
        if log.contains(needle) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log after {secs} s:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log_len(path: &Path) -> usize {
    std::fs::metadata(path.join("serve.log")).map_or(0, |m| m.len() as usize)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_mid_recovery_stops_within_two_seconds_and_the_next_start_finishes() {
    let home = home_to_recover();
    let mut serve = support::serve(&home, &[]);
    // Recovery is under way: an archive split, not all of them.
    wait_log(&home, 0, "recovery: indexed 1/", 60);
    let health = support::http_client()
        .get(format!("{}/health", serve.url))
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .expect("/health answers during recovery");
    assert!(health.status().is_success(), "{}", health.status());
    let left = unindexed(&home);
    assert!(
        left > 0,
        "the recovery ended before the test could look at it"
    );

    // The bound runs from the signal: the process's start is not counted.
    let signalled = Instant::now();
    support::signal(serve.child.id(), "-TERM");
    let status = loop {
        if let Some(s) = serve.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(30),
            "g2 serve still runs 30 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = signalled.elapsed();
    eprintln!(
        "stopped {took:?} after SIGTERM, {} of {ARCHIVES} archives left to index",
        unindexed(&home)
    );
    assert!(status.success(), "g2 serve exited with {status}");
    assert!(
        took < Duration::from_secs(2),
        "g2 serve took {took:?} to stop on SIGTERM"
    );
    let log = log_from(&home, 0);
    assert!(log.contains("recovery: stopped at"), "{log}");
    assert!(unindexed(&home) > 0, "stopped mid-recovery, not after it");
    drop(serve);

    // The next start splits what is left; recall then finds the last
    // archive's words.
    let from = log_len(home.path());
    let _serve = support::serve(&home, &[]);
    wait_log(&home, from, "archives; done", 120);
    assert_eq!(unindexed(&home), 0);
    let hits = home.json(&["memory", "search", LAST_WORD, "--group", "main"]);
    let found = hits.as_array().unwrap().iter().any(|h| {
        h["kind"] == "passage"
            && h["snippet"]
                .as_str()
                .is_some_and(|s| s.to_lowercase().contains(LAST_WORD))
    });
    assert!(found, "recall misses the last archive: {hits:#}");
}
