//! What the channel suites (`telegram`, `whatsapp`, `discord`, `slack`,
//! `channels`) share: starting `g2 serve` with a platform's environment,
//! registering a chat, reading a group's log, `g2 doctor`'s check of a
//! channel and what it must say, a start refused without a secret, a host
//! killed as a crash would, a long reply and what its parts must be, and
//! the waits they poll with. Each suite keeps its own cases.

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

/// The texts of the messages stored for a group.
pub async fn stored_texts(base: &str, folder: &str) -> Vec<String> {
    let log = stored(base, folder).await;
    log.iter()
        .map(|m| m["text"].as_str().unwrap().to_string())
        .collect()
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

/// Checks a doctor check's verdict: `ok`, its detail saying each of `says`
/// and none of `never` (a secret it was given, say).
pub fn assert_check(check: &Value, ok: bool, says: &[&str], never: &[&str]) {
    assert_eq!(check["ok"], ok, "{check}");
    let detail = check["detail"].as_str().unwrap();
    for w in says {
        assert!(detail.contains(w), "{w:?} not said: {check}");
    }
    for w in never {
        assert!(!detail.contains(w), "{w:?} said: {check}");
    }
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

/// A command for the offline model whose reply is three results of `n`
/// paragraphs each, of `Alpha`, `Beta` and `Gamma` ([`paragraphs`]).
pub fn long_ask(n: usize) -> String {
    ["Alpha", "Beta", "Gamma"]
        .map(|w| paragraphs(w, n))
        .join("\n")
}

/// What the parts of a platform's reply to [`long_ask`] must be.
pub struct LongReply {
    /// Messages it comes in.
    pub parts: usize,
    /// Paragraphs of each result (as asked).
    pub paragraphs: usize,
    /// Characters of all the parts, at least.
    pub over: usize,
    /// Whether one part is within the platform's limit.
    pub fits: fn(&str) -> bool,
    /// The platform's retry delay, waited out before the first part went.
    pub waited: Duration,
}

impl LongReply {
    /// Checks the parts `sent` (text, when sent) of the reply asked at
    /// `asked_at`: in order, each within the limit, over the length in
    /// all, the first after the wait; and 2 s on, nothing more sent (what
    /// `sent_now` counts then).
    pub async fn check(
        &self,
        sent: &[(String, Instant)],
        asked_at: Instant,
        sent_now: impl FnOnce() -> usize,
    ) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (now, texts): (usize, Vec<&str>) =
            (sent_now(), sent.iter().map(|(t, _)| t.as_str()).collect());
        assert_eq!(now, self.parts, "{} messages: {texts:?}", self.parts);
        assert_eq!(sent.len(), self.parts, "{texts:?}");
        let total: usize = texts.iter().map(|t| t.chars().count()).sum();
        assert!(total > self.over, "{total} characters");
        assert!(texts[0].contains("Alpha paragraph 1,"), "{:.200}", texts[0]);
        let last = texts[texts.len() - 1];
        let end = format!("Gamma paragraph {},", self.paragraphs);
        assert!(last.contains(&end), "in order: {last:.200}");
        assert!(texts.iter().all(|t| (self.fits)(t)), "{texts:?}");
        assert!(
            sent[0].1 - asked_at >= self.waited,
            "waited the platform's retry delay"
        );
    }
}
