//! Small steps several suites take alike, kept beside `support.rs` (which
//! is at its size): reading JSON answers, a turn on a
//! chat's stream, a group's session, what a stalled connection got.

use serde_json::Value;

use g2_host::sessions::SessionManager;

use crate::support::{Serve, Sse, Stall, TestHome, gf, image_ready, post, serve};

/// `g2 serve` with `env` on a home with a `family` group that needs a
/// trigger, so nothing a test posts there wakes its agent; `None` without
/// the agent image.
pub fn quiet_family(env: &[(&str, &str)]) -> Option<(TestHome, Serve)> {
    if !image_ready() {
        return None;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    let s = serve(&home, env);
    Some((home, s))
}

/// The string field `key` of each item of a JSON array.
pub fn strs<'a>(items: &'a Value, key: &str) -> Vec<&'a str> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h[key].as_str().unwrap())
        .collect()
}

/// The item of a JSON array whose `key` is `value`; panics showing them all.
pub fn item<'a>(items: &'a Value, key: &str, value: &str) -> &'a Value {
    items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i[key] == value)
        .unwrap_or_else(|| panic!("no {key} {value:?} in {items}"))
}

/// A JSON object's keys, sorted.
pub fn sorted_keys(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

/// A group's chat as a member sees it: its live stream, opened before
/// anything is said, so no reply can be missed.
pub struct Chat {
    base: String,
    folder: String,
    stream: Sse,
}

impl Chat {
    /// Opens `folder`'s live stream on the host at `base`.
    pub async fn open(base: &str, folder: &str) -> Chat {
        Chat {
            base: base.to_string(),
            folder: folder.to_string(),
            stream: Sse::open(base, folder, None).await,
        }
    }

    /// Posts `text` as `sender`: the assistant's next reply (within 120 s).
    pub async fn say(&mut self, sender: &str, text: &str) -> String {
        post(&self.base, &self.folder, sender, text).await;
        self.stream.reply(120).await
    }

    /// The assistant's next reply, within `secs`.
    pub async fn reply(&mut self, secs: u64) -> String {
        self.stream.reply(secs).await
    }
}

/// Points `folder` at the session `id`, from the pointer's generation now.
pub async fn set_session(sessions: &SessionManager, folder: &str, id: &str) {
    let p = sessions.get(&gf(folder)).await.unwrap();
    sessions.set(&gf(folder), id, p.generation).await.unwrap();
}

/// The session `folder`'s pointer names.
pub async fn session_of(sessions: &SessionManager, folder: &str) -> Option<String> {
    sessions.get(&gf(folder)).await.unwrap().session_id
}

impl Stall {
    /// Checks what a connection stalled this way got before it was closed:
    /// a stalled head nothing or a 408, a stalled body a 408 whose body has
    /// `error_mark`, an idle one its answer, starting `idle_status`.
    pub fn check_closed(&self, got: &str, error_mark: &str, idle_status: &str) {
        match self {
            Stall::Head => assert!(got.is_empty() || got.starts_with("HTTP/1.1 408"), "{got}"),
            Stall::Body => {
                assert!(got.starts_with("HTTP/1.1 408"), "{got}");
                assert!(got.contains(error_mark), "{got}");
            }
            Stall::Idle => assert!(got.starts_with(idle_status), "{got}"),
        }
    }
}

/// A request a real provider answered for `group` today, as the gateway
/// records it: 1,200 tokens in, 80 out, with `model`.
pub fn spend(home: &TestHome, group: &str, model: &str) {
    use g2_host::store::usage::{Outcome, Purpose, Record, Tokens, insert};
    let now = chrono::Utc::now();
    let spent = Record {
        caller: group.into(),
        purpose: Purpose::Agent,
        provider: "anthropic".into(),
        model: model.into(),
        tokens: Tokens {
            input: 1200,
            output: 80,
            ..Tokens::default()
        },
        duration_ms: 900,
        status: 200,
        outcome: Outcome::Ok,
        streamed: true,
        started_at: now.to_rfc3339(),
        day: now.format("%Y-%m-%d").to_string(),
    };
    home.store()
        .write_blocking(move |tx| insert(tx, &spent))
        .unwrap();
}
