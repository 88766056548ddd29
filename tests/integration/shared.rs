//! What the integration tests (`support.rs`) and the benches
//! (`host/benches/common/mod.rs`) share besides the `g2 serve` process,
//! both including this file by path: the `family` group's `g2 groups add`,
//! `g2 archive`'s arguments, a request's JSON answer, a chat message
//! posted, the cluster's group owners, and a count of a folder's entries.

// Each includer uses a part of these.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// `g2 groups add` of a `family` group that every message wakes.
pub const ADD_FAMILY: [&str; 6] = [
    "groups",
    "add",
    "family",
    "--name",
    "Family",
    "--no-trigger",
];

/// `g2 archive`'s arguments: the transcript at `transcript` into `group`
/// under `name`.
pub fn archive_args<'a>(transcript: &'a Path, group: &'a str, name: &'a str) -> [&'a str; 6] {
    let t = transcript.to_str().unwrap();
    ["archive", t, "--group", group, "--name", name]
}

/// Sends `req`; its JSON answer (it must have one).
pub async fn json_of(req: reqwest::RequestBuilder) -> Value {
    req.send().await.unwrap().json().await.unwrap()
}

/// Posts `text` to `folder`'s chat at `base` as `sender`, with the API
/// token when there is one; it must be accepted.
pub async fn post_message(
    client: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    folder: &str,
    (sender, text): (&str, &str),
) {
    let mut req = client
        .post(format!("{base}/api/groups/{folder}/messages"))
        .json(&serde_json::json!({ "sender": sender, "text": text }));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 202);
}

/// Each group's owner in `GET /api/cluster` at `base` (channels left out).
pub async fn owners(client: &reqwest::Client, base: &str) -> HashMap<String, Option<String>> {
    let status = json_of(client.get(format!("{base}/api/cluster"))).await;
    status["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| !g["name"].as_str().unwrap().starts_with("channel:"))
        .map(|g| {
            (
                g["name"].as_str().unwrap().to_string(),
                g["host_id"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// How many entries of the folder `dir` have a name `keep` takes.
pub fn count_entries(dir: impl AsRef<Path>, keep: impl Fn(&str) -> bool) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| keep(&e.as_ref().unwrap().file_name().to_string_lossy()))
        .count()
}
