//! The files of a Discord message: its attachments (up to 10 a message:
//! images, documents, sound; a voice message is a message flagged
//! `IS_VOICE_MESSAGE` whose one attachment is `audio/ogg`, with
//! `duration_secs` and `waveform`), fetched from each attachment's `url`
//! on Discord's CDN and read up to the size limit.
//!
//! Invariants: the CDN's URLs are signed (`ex`, `is`, `hm` in the query)
//! and take no token, so this client has no `Authorization` header at
//! all: the bot token never goes to the CDN's host. An attachment whose
//! announced `size` is over the limit is not asked for, and a download is
//! cut as soon as it counts past it. Errors never name the URL.

use std::time::Duration;

use twilight_model::channel::Message as DcMessage;
use twilight_model::channel::message::MessageFlags;

use crate::media::{Incoming, Missed};
use crate::{Error, Result};

/// How long connecting to the CDN may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one download may take, whole.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// An attachment, before it is fetched.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DcFile {
    /// The signed CDN address (never logged, never in an error).
    url: String,
    /// As Discord announced it.
    size: u64,
    name: String,
    mime: Option<String>,
    voice: bool,
}

/// The files `msg` carries, in its order (none: a text).
pub(super) fn files_of(msg: &DcMessage) -> Vec<DcFile> {
    let voice = msg
        .flags
        .is_some_and(|f| f.contains(MessageFlags::IS_VOICE_MESSAGE));
    msg.attachments
        .iter()
        .map(|a| DcFile {
            url: a.url.clone(),
            size: a.size,
            name: a.filename.clone(),
            mime: a.content_type.clone(),
            voice,
        })
        .collect()
}

/// A client for Discord's CDN: no token, ever.
pub struct Cdn {
    http: reqwest::Client,
}

impl Cdn {
    pub fn new() -> Result<Cdn> {
        // reqwest is built without a bundled crypto provider: ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(DOWNLOAD_TIMEOUT)
            .build()
            .map_err(|e| Error::Config(format!("the Discord CDN client: {e}")))?;
        Ok(Cdn { http })
    }

    /// Fetches an attachment, at most `max` bytes of it: what it is, or
    /// why not.
    pub(super) async fn fetch(&self, f: &DcFile, max: u64) -> Incoming {
        let got = if f.size > max {
            Err(Missed::TooLarge(f.size))
        } else {
            self.download(f, max).await
        };
        Incoming {
            name: Some(f.name.clone()),
            claimed: f.mime.clone(),
            voice: f.voice,
            got,
        }
    }

    async fn download(&self, f: &DcFile, max: u64) -> std::result::Result<Vec<u8>, Missed> {
        let failed = |e: reqwest::Error| {
            Missed::Failed(if e.is_timeout() {
                "the download from Discord's CDN timed out".into()
            } else {
                format!(
                    "the download from Discord's CDN failed: {}",
                    e.without_url()
                )
            })
        };
        let resp = self.http.get(&f.url).send().await.map_err(failed)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(Missed::Failed(format!(
                "Discord's CDN answered the download with HTTP {}",
                status.as_u16()
            )));
        }
        crate::media::read_body(resp, max, |e| {
            Missed::Failed(if e.is_timeout() {
                "the download from Discord's CDN timed out".into()
            } else {
                "the download from Discord's CDN broke off".into()
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn message(flags: u64, attachments: serde_json::Value) -> DcMessage {
        serde_json::from_value(json!({
            "id": "11", "channel_id": "22", "guild_id": "77",
            "author": { "id": "5", "username": "ann", "discriminator": "0", "global_name": null,
                        "avatar": null, "bot": false, "public_flags": 0 },
            "content": "", "timestamp": "2026-11-26T10:00:00.000000+00:00",
            "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [],
            "mention_roles": [], "attachments": attachments, "embeds": [], "pinned": false,
            "type": 0, "flags": flags,
        }))
        .expect("a message as Discord sends it")
    }

    fn attachment(id: u64, name: &str, ty: &str, size: u64, url: &str) -> serde_json::Value {
        json!({ "id": id.to_string(), "filename": name, "content_type": ty, "size": size,
                "url": url, "proxy_url": url })
    }

    #[test]
    fn a_voice_message_and_several_files_are_read_in_order() {
        let mut voice = attachment(1, "voice-message.ogg", "audio/ogg", 9000, "https://cdn/v");
        voice["duration_secs"] = json!(4.2);
        voice["waveform"] = json!("AAAA");
        let files = files_of(&message(1 << 13, json!([voice])));
        assert_eq!(files.len(), 1);
        assert!(files[0].voice);
        assert_eq!(files[0].mime.as_deref(), Some("audio/ogg"));
        let two = files_of(&message(
            0,
            json!([
                attachment(1, "a.png", "image/png", 10, "https://cdn/a"),
                attachment(2, "b.pdf", "application/pdf", 20, "https://cdn/b"),
            ]),
        ));
        let names: Vec<&str> = two.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a.png", "b.pdf"]);
        assert!(two.iter().all(|f| !f.voice));
        assert!(files_of(&message(0, json!([]))).is_empty());
    }

    /// A one-shot HTTP server answering `body` with `status`; its URL, and
    /// the request it read (to check for headers).
    async fn server(
        status: &'static str,
        body: Vec<u8>,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\n") {
                let n = tcp.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            let head = format!("HTTP/1.1 {status}\r\nconnection: close\r\n\r\n");
            let _ = tcp.write_all(head.as_bytes()).await;
            let _ = tcp.write_all(&body).await;
            let _ = tcp.shutdown().await;
            String::from_utf8_lossy(&req).into_owned()
        });
        (
            format!("http://{addr}/attachments/1/2/f.bin?ex=1&is=0&hm=sig"),
            handle,
        )
    }

    fn file(url: &str, size: u64) -> DcFile {
        DcFile {
            url: url.into(),
            size,
            name: "f.bin".into(),
            mime: Some("application/octet-stream".into()),
            voice: false,
        }
    }

    #[tokio::test]
    async fn downloads_are_capped_unauthenticated_and_name_no_url() {
        let cdn = Cdn::new().unwrap();
        // Fetched whole, with no Authorization header.
        let (url, req) = server("200 OK", vec![7; 3000]).await;
        let got = cdn.fetch(&file(&url, 3000), 4096).await;
        assert_eq!(got.got.unwrap().len(), 3000);
        assert!(
            !req.await
                .unwrap()
                .to_ascii_lowercase()
                .contains("authorization")
        );
        // Announced over the limit: never asked for.
        let got = cdn
            .fetch(&file("http://127.0.0.1:9/never", 5000), 4096)
            .await;
        assert_eq!(got.got, Err(Missed::TooLarge(5000)));
        // Announced small, sent large (no length given): cut past it.
        let (url, _req) = server("200 OK", vec![7; 10_000]).await;
        let got = cdn.fetch(&file(&url, 100), 4096).await;
        assert!(
            matches!(got.got, Err(Missed::TooLarge(n)) if n > 4096),
            "{got:?}"
        );
        // An error answer: its status, not its address.
        let (url, _req) = server(
            "404 Not Found",
            b"This content is no longer available.".to_vec(),
        )
        .await;
        let Err(Missed::Failed(why)) = cdn.fetch(&file(&url, 10), 4096).await.got else {
            panic!("not a failure");
        };
        assert_eq!(why, "Discord's CDN answered the download with HTTP 404");
        // No server at all: why, without the address.
        let Err(Missed::Failed(why)) = cdn
            .fetch(&file("http://127.0.0.1:9/attachments/x?hm=sig", 10), 4096)
            .await
            .got
        else {
            panic!("not a failure");
        };
        assert!(!why.contains("127.0.0.1") && !why.contains("sig"), "{why}");
    }
}
