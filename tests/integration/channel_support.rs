//! What the channel suites (`telegram`, `whatsapp`, `discord`, `slack`,
//! `channels`) share: starting `g2 serve` with a platform's environment,
//! registering a chat, reading a group's log, `g2 doctor`'s check of a
//! channel, a start refused without a secret, a host killed as a crash
//! would, and the waits they poll with. Each suite keeps its assertions.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// `g2 serve` with a platform's environment and `more` settings.
pub fn serve_env(home: &TestHome, env: &[(&'static str, String)], more: &[(&str, &str)]) -> Serve {
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(more);
    serve(home, &all)
}

/// `g2 groups add` for a chat.
pub fn register(home: &TestHome, folder: &str, jid: &str, name: &str) {
    home.ok(&["groups", "add", folder, "--jid", jid, "--name", name]);
}

/// Messages stored for a group (people's and the assistant's).
pub async fn stored(base: &str, folder: &str) -> Vec<Value> {
    get_json(&format!("{base}/api/groups/{folder}/messages?limit=500"))
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// One number from the store (a `COUNT(*)`).
pub async fn count(home: &TestHome, sql: &'static str) -> i64 {
    home.store()
        .read(move |c| c.query_row(sql, (), |r| r.get::<i64>(0)))
        .await
        .unwrap()
}

/// `g2 doctor --json`'s check named `name`, run with `env`.
pub fn doctor_check(home: &TestHome, env: &[(&str, &str)], name: &str) -> Value {
    let out = home.g2_with(&["doctor", "--json"], env);
    let checks: Value = serde_json::from_slice(&out.stdout).unwrap();
    checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} check: {checks}"))
}

/// `g2 serve` with a platform's environment but `missing`: it must refuse
/// to start; what it said.
pub async fn serve_refused(env: Vec<(&'static str, String)>, missing: &str) -> String {
    let home = TestHome::new();
    let env: Vec<(&'static str, String)> = env.into_iter().filter(|(k, _)| *k != missing).collect();
    let out = tokio::task::spawn_blocking(move || {
        let all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        home.g2_with(&["serve", "--listen", "127.0.0.1:0"], &all)
    })
    .await
    .unwrap();
    assert!(!out.status.success(), "started without {missing}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Kills the host at once (SIGKILL), as a crash would.
pub fn kill(s: &mut Serve) {
    s.child.kill().unwrap();
    s.child.wait().unwrap();
}

/// Waits until the group is marked failing; the reason it was given.
pub async fn failing_reason(base: &str, folder: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let st = get_json(&format!("{base}/api/groups/{folder}/status")).await;
        if let Some(e) = st["failing"]["error"].as_str() {
            return e.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "{folder} never marked failing: {st}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the group's turn has started (its in-flight mark stored).
pub async fn wait_in_flight(home: &TestHome, folder: &str, secs: u64) {
    let key = format!("inflight:{folder}");
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let k = key.clone();
        let n = home
            .store()
            .read(move |c| {
                c.query_row(
                    "SELECT COUNT(*) FROM router_state WHERE key = ?1",
                    [k],
                    |r| r.get::<i64>(0),
                )
            })
            .await
            .unwrap();
        if n > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the turn never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A command for the offline model that prints `n` numbered paragraphs of
/// `word` (about 75 characters each), blank lines between them: three of
/// 26 make a reply over 5,000 characters.
pub fn paragraphs(word: &str, n: usize) -> String {
    format!(
        "g2:bash for i in $(seq 1 {n}); do printf '{word} paragraph %s, with enough words in it to fill a line of text.\\n\\n' $i; done"
    )
}
