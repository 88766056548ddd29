//! The file of a WhatsApp message (a voice note or an audio file, an
//! image, a document, a sticker), fetched the Cloud API's documented way:
//! `GET {graph_url}/{api_version}/{media-id}` with the access token
//! answers `{messaging_product, url, mime_type, sha256, file_size, id}`;
//! `GET` of that `url` with the same `Authorization: Bearer` header
//! answers the bytes (the URL lasts five minutes and serves only with the
//! token). A file whose announced `file_size` is over the limit is never
//! downloaded; a download is counted as it streams and cut past the limit.
//!
//! The token goes only in the `Authorization` header (marked sensitive),
//! and only over https unless `graph_url` itself is http (a local server);
//! errors never carry a URL or the token.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::Value;

use super::{Failure, Graph};
use crate::media::{Incoming, Missed};

/// How long one download may take (the client's 17 s is for JSON).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The file a message carries, before it is fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct WaFile {
    /// The media id the webhook gave.
    pub id: String,
    /// `audio`, `image`, `document` or `sticker`.
    pub kind: &'static str,
    /// The caption ("" when none).
    pub caption: String,
    /// A document's file name.
    pub name: Option<String>,
    /// The content type the webhook gave.
    pub mime: Option<String>,
    /// An audio recorded as a voice message (`"voice": true`).
    pub voice: bool,
}

/// The file `m` (one message of a webhook notification) carries, if it is
/// of a kind g2 keeps.
pub fn file_of(m: &Value) -> Option<WaFile> {
    let kind = match m["type"].as_str()? {
        "audio" => "audio",
        "image" => "image",
        "document" => "document",
        "sticker" => "sticker",
        _ => return None,
    };
    let o = &m[kind];
    let text = |k: &str| o[k].as_str().map(str::to_string);
    Some(WaFile {
        id: text("id").filter(|id| !id.is_empty())?,
        kind,
        caption: text("caption").unwrap_or_default(),
        name: text("filename").filter(|n| !n.trim().is_empty()),
        mime: text("mime_type").filter(|t| !t.trim().is_empty()),
        voice: kind == "audio" && o["voice"].as_bool() == Some(true),
    })
}

/// Fetches a file, at most `max` bytes of it: what it is, or why not.
pub async fn fetch(graph: &Graph, f: &WaFile, max: u64) -> Incoming {
    let mut claimed = f.mime.clone();
    let got = match describe(graph, f).await {
        Err(why) => Err(Missed::Failed(why)),
        Ok(d) => {
            if claimed.is_none() {
                claimed = d.mime;
            }
            match d.size {
                Some(size) if size > max => Err(Missed::TooLarge(size)),
                _ => download(graph, &d.url, max).await,
            }
        }
    };
    Incoming {
        name: f.name.clone(),
        claimed,
        voice: f.voice,
        got,
    }
}

/// What the Graph API says of a media id.
#[derive(Debug, PartialEq)]
struct Described {
    url: url::Url,
    mime: Option<String>,
    /// `file_size` (a number, or its digits as a string).
    size: Option<u64>,
}

async fn describe(graph: &Graph, f: &WaFile) -> Result<Described, String> {
    // Meta's media ids are digits; nothing else goes into the path.
    if f.id.len() > 64 || !f.id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("the message names no valid media id".into());
    }
    let url = format!(
        "{}/{}/{}",
        graph.settings.graph_url.trim_end_matches('/'),
        graph.settings.api_version,
        f.id
    );
    let v = graph
        .request(graph.http.get(&url))
        .await
        .map_err(|e| match e {
            Failure::Api(e) => format!("the Graph API did not give the file: {e}"),
            e => format!("the Graph API did not answer about the file: {e}"),
        })?;
    read_description(&v, &graph.settings.graph_url)
}

/// Reads the Graph API's answer about a media id: the URL must be https
/// (or http when the Graph API itself is, a local server).
fn read_description(v: &Value, graph_url: &str) -> Result<Described, String> {
    let url = v["url"]
        .as_str()
        .and_then(|u| url::Url::parse(u).ok())
        .ok_or("the Graph API's answer names no media URL")?;
    let plain_ok = graph_url.starts_with("http://");
    if !(url.scheme() == "https" || (plain_ok && url.scheme() == "http")) {
        return Err("the Graph API gave a media URL that is not https".into());
    }
    let size = match &v["file_size"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    Ok(Described {
        url,
        mime: v["mime_type"].as_str().map(str::to_string),
        size,
    })
}

async fn download(graph: &Graph, url: &url::Url, max: u64) -> Result<Vec<u8>, Missed> {
    let token = &graph.token;
    let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
        Missed::Failed("the access token holds a character no HTTP header can carry".into())
    })?;
    auth.set_sensitive(true);
    let resp = graph
        .http
        .get(url.as_str())
        .header(AUTHORIZATION, auth)
        .timeout(DOWNLOAD_TIMEOUT)
        .send()
        .await
        .map_err(|e| {
            Missed::Failed(format!(
                "the download from WhatsApp failed: {}",
                token.redact(&e.without_url().to_string())
            ))
        })?;
    let status = resp.status();
    if !status.is_success() {
        return Err(Missed::Failed(format!(
            "WhatsApp answered the download with HTTP {}",
            status.as_u16()
        )));
    }
    crate::media::read_body(resp, max, |_| {
        Missed::Failed("the download from WhatsApp broke off".into())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_kinds_g2_keeps_are_read_from_a_message() {
        let voice = json!({ "type": "audio", "audio": {
            "mime_type": "audio/ogg; codecs=opus", "sha256": "x", "id": "1001", "voice": true } });
        assert_eq!(
            file_of(&voice),
            Some(WaFile {
                id: "1001".into(),
                kind: "audio",
                caption: String::new(),
                name: None,
                mime: Some("audio/ogg; codecs=opus".into()),
                voice: true,
            })
        );
        let doc = json!({ "type": "document", "document": {
            "caption": "read", "filename": "plan.pdf", "mime_type": "application/pdf", "id": "1002" } });
        let d = file_of(&doc).unwrap();
        assert_eq!(
            (d.kind, d.name.as_deref(), d.caption.as_str(), d.voice),
            ("document", Some("plan.pdf"), "read", false)
        );
        let sticker = json!({ "type": "sticker", "sticker": { "mime_type": "image/webp", "id": "1003", "animated": false } });
        assert_eq!(file_of(&sticker).unwrap().kind, "sticker");
        let image = json!({ "type": "image", "image": { "caption": "look", "mime_type": "image/jpeg", "id": "1004" } });
        assert_eq!(file_of(&image).unwrap().caption, "look");
        // Not kept (yet), or naming no file: the placeholder stays.
        for m in [
            json!({ "type": "video", "video": { "id": "1005" } }),
            json!({ "type": "text", "text": { "body": "hi" } }),
            json!({ "type": "image", "image": { "caption": "no id" } }),
        ] {
            assert_eq!(file_of(&m), None, "{m}");
        }
    }

    #[test]
    fn a_description_names_an_https_url_and_its_size() {
        let v = json!({ "messaging_product": "whatsapp",
            "url": "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1&ext=2&hash=3",
            "mime_type": "image/jpeg", "sha256": "ab", "file_size": "303833", "id": "1" });
        let d = read_description(&v, "https://graph.facebook.com").unwrap();
        assert_eq!(
            (d.size, d.mime.as_deref()),
            (Some(303_833), Some("image/jpeg"))
        );
        let mut n = v.clone();
        n["file_size"] = json!(12);
        assert_eq!(
            read_description(&n, "https://graph.facebook.com")
                .unwrap()
                .size,
            Some(12)
        );
        // The token never goes over plain http to a real Graph API.
        let mut plain = v.clone();
        plain["url"] = json!("http://lookaside.fbsbx.com/x");
        assert!(read_description(&plain, "https://graph.facebook.com").is_err());
        assert!(read_description(&plain, "http://127.0.0.1:9").is_ok());
        assert!(read_description(&json!({}), "https://graph.facebook.com").is_err());
    }
}
