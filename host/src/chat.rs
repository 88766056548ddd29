//! `g2 chat <folder>`: talk to a group from a terminal. A client of a
//! running `g2 serve`: each line typed is posted to the group's chat
//! (`POST …/messages`), and the chat's new messages — the assistant's
//! replies, and other people's messages — are printed as they arrive from
//! the SSE stream (`GET …/stream?after=`).
//!
//! The stream is open before the first line is posted, so no reply can
//! slip past; if the server closes it (a listener that fell behind), it is
//! reopened with `Last-Event-ID`. What others wrote is printed inert
//! ([`crate::terminal`]): escape sequences and bidi controls are shown,
//! not obeyed.

use std::io::Write;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::messages::Message;
use crate::terminal::{inert, inert_name};
use crate::{Error, Result};

pub struct ChatOptions {
    /// `http://127.0.0.1:4170`.
    pub url: String,
    pub folder: String,
    pub sender: String,
    pub token: Option<String>,
}

/// Runs until stdin ends (then waits briefly for replies still due).
pub async fn run(o: ChatOptions) -> Result<()> {
    g2_core::validate::group_folder(&o.folder)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let base = format!("{}/api/groups/{}", o.url.trim_end_matches('/'), o.folder);
    let auth = |r: reqwest::RequestBuilder| match &o.token {
        Some(t) => r.bearer_auth(t),
        None => r,
    };
    let unreachable = |e: reqwest::Error| {
        Error::Invalid(format!(
            "g2 serve does not answer at {}: {e} (start it with `g2 serve`)",
            o.url
        ))
    };
    // Live messages only; the response headers arrive once the server has
    // subscribed, so nothing posted after this can be missed.
    let stream = auth(client.get(format!("{base}/stream")))
        .send()
        .await
        .map_err(unreachable)?
        .error_for_status()
        .map_err(|e| Error::Invalid(format!("group {}: {e}", o.folder)))?;
    let me = o.sender.clone();
    let (replies_tx, mut replies) = tokio::sync::mpsc::unbounded_channel::<()>();
    let resume = {
        let (client, url, token) = (client.clone(), format!("{base}/stream"), o.token.clone());
        move |last: i64| {
            let mut r = client.get(&url);
            // Nothing seen yet: live again (a 0 would replay the whole chat).
            if last > 0 {
                r = r.header("last-event-id", last.to_string());
            }
            if let Some(t) = &token {
                r = r.bearer_auth(t);
            }
            r.send()
        }
    };
    let printer = tokio::spawn(async move {
        let (mut stream, mut last) = (stream, 0);
        loop {
            let mut messages = std::pin::pin!(message_stream(stream));
            while let Some(m) = messages.next().await {
                last = m.seq;
                if m.sender == me && !m.from_bot {
                    continue; // our own line, already on screen
                }
                // Other people's text: shown, never obeyed by the terminal.
                let who = m.sender_name.clone().unwrap_or(m.sender.clone());
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}: {}", inert_name(&who), inert(&m.text));
                let _ = out.flush();
                if m.from_bot {
                    let _ = replies_tx.send(());
                }
            }
            // The server closes a listener that fell behind: pick up after
            // the last message shown (not in a tight loop if it keeps closing).
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            match resume(last)
                .await
                .and_then(reqwest::Response::error_for_status)
            {
                Ok(r) => stream = r,
                Err(e) => {
                    eprintln!("the stream ended: {e}");
                    return;
                }
            }
        }
    });
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut sent = 0usize;
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| Error::io("reading stdin", e))?
    {
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if matches!(text, "/quit" | "/exit") {
            break;
        }
        let resp = auth(client.post(format!("{base}/messages")))
            .json(&json!({ "sender": o.sender, "text": text }))
            .send()
            .await
            .map_err(unreachable)?;
        if !resp.status().is_success() {
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            eprintln!(
                "not sent: {}",
                body["error"]["message"]
                    .as_str()
                    .unwrap_or("the server refused it")
            );
            continue;
        }
        sent += 1;
    }
    // Stdin ended (a pipe): give replies still due a moment.
    if sent > 0 {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), replies.recv()).await;
    }
    printer.abort();
    Ok(())
}

/// The messages of a `GET …/stream` response, as they arrive. Events are
/// split on bytes, so a character cut between two chunks stays whole;
/// events that are not messages (keep-alives) are skipped.
pub fn message_stream(resp: reqwest::Response) -> impl futures_util::Stream<Item = Message> {
    futures_util::stream::unfold(
        (resp.bytes_stream(), Vec::<u8>::new()),
        |(mut body, mut buf)| async move {
            loop {
                if let Some(end) = memchr::memmem::find(&buf, b"\n\n") {
                    let event: Vec<u8> = buf.drain(..end + 2).collect();
                    let event = String::from_utf8_lossy(&event);
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if let Ok(m) = serde_json::from_str::<Message>(&data.join("\n")) {
                        return Some((m, (body, buf)));
                    }
                    continue;
                }
                match body.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    _ => return None,
                }
            }
        },
    )
}
