//! The files of a Slack message (`files` of a `message` event, subtype
//! `file_share` or none), fetched the Web API's way: a GET of the file's
//! `url_private_download` (else `url_private`) with the bot token in
//! `Authorization: Bearer` (the app needs the `files:read` scope), read up
//! to the size limit. A clip recorded in Slack (`subtype: slack_audio`) is
//! a voice message.
//!
//! Invariants: a file Slack announces (`size`) as over the limit is never
//! asked for, and a download stops once it passes it; the token goes only
//! to Slack's own hosts (those of `channels.slack.api_url`'s domain);
//! Slack answers a download it does not authorise with its sign-in page
//! (HTTP 200, HTML), which is a failed download, never a kept file; errors
//! never name a file's URL or the token.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::Value;

use super::{Secret, WebApi};
use crate::media::{Incoming, Missed};

/// How long one file's download may take (the Web API's calls have
/// less).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// A file a message carries, before it is fetched.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SlFile {
    /// As Slack announced it (0: not told).
    size: u64,
    name: Option<String>,
    mime: Option<String>,
    /// Where its bytes are; none when Slack gave no link.
    url: Option<String>,
    /// Why Slack gave no link, when it said.
    hidden: Option<&'static str>,
    voice: bool,
}

/// The files a message event (`event`, or an edit's `message`) carries.
pub(super) fn files_of(event: &Value) -> Vec<SlFile> {
    fn text(v: &Value) -> Option<&str> {
        v.as_str().map(str::trim).filter(|s| !s.is_empty())
    }
    let Some(files) = event["files"].as_array() else {
        return Vec::new();
    };
    files
        .iter()
        .map(|f| SlFile {
            size: f["size"].as_u64().unwrap_or(0),
            name: text(&f["name"]).or(text(&f["title"])).map(str::to_string),
            mime: text(&f["mimetype"]).map(str::to_string),
            url: text(&f["url_private_download"])
                .or(text(&f["url_private"]))
                .map(str::to_string),
            hidden: match f["mode"].as_str() {
                Some("tombstone") => Some("it was deleted"),
                Some("hidden_by_limit") => Some("Slack hides it (the workspace's file limit)"),
                _ if f["file_access"] == "check_file_info" => {
                    Some("Slack sent only its id (a file from another workspace)")
                }
                _ => None,
            },
            voice: f["subtype"] == "slack_audio",
        })
        .collect()
}

/// What a message's files are called in its text when they are not
/// fetched (no media is kept): `[image: a.png] [voice message]`.
pub(super) fn placeholder(files: &[SlFile]) -> String {
    files
        .iter()
        .map(|f| {
            let kind = match f.mime.as_deref().unwrap_or("") {
                _ if f.voice => return "[voice message]".to_string(),
                m if m.starts_with("image/") => "image",
                m if m.starts_with("audio/") => "audio",
                m if m.starts_with("video/") => "video",
                _ => "file",
            };
            match &f.name {
                Some(n) => format!("[{kind}: {n}]"),
                None => format!("[{kind}]"),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fetches a file with the bot token, at most `max` bytes of it: what it
/// is, or why not.
pub(super) async fn fetch(api: &WebApi, token: &Secret, f: &SlFile, max: u64) -> Incoming {
    let got = match (&f.url, f.hidden) {
        _ if f.size > max => Err(Missed::TooLarge(f.size)),
        (_, Some(why)) => Err(Missed::Failed(why.into())),
        (None, None) => Err(Missed::Failed("Slack gave no link to it".into())),
        (Some(url), None) if !from_slack(url, api.url()) => Err(Missed::Failed(
            "its link is not Slack's, so it was not fetched".into(),
        )),
        (Some(url), None) => download(api, token, url, f, max).await,
    };
    Incoming {
        name: f.name.clone(),
        claimed: f.mime.clone(),
        voice: f.voice,
        got,
    }
}

async fn download(
    api: &WebApi,
    token: &Secret,
    url: &str,
    f: &SlFile,
    max: u64,
) -> Result<Vec<u8>, Missed> {
    let failed = |why: String| Missed::Failed(why);
    let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .map_err(|_| failed("the bot token holds a character no HTTP header can carry".into()))?;
    auth.set_sensitive(true);
    let clean = |e: reqwest::Error| token.redact(&e.without_url().to_string());
    let resp = api
        .get(url)
        .header(AUTHORIZATION, auth)
        .timeout(DOWNLOAD_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(format!("the download from Slack failed: {}", clean(e))))?;
    let status = resp.status().as_u16();
    match status {
        200..=299 => {}
        401 | 403 => {
            return Err(failed(format!(
                "Slack refused the download (HTTP {status}); the app needs the files:read scope"
            )));
        }
        404 | 410 => {
            return Err(failed(format!(
                "Slack has no such file (HTTP {status}): deleted?"
            )));
        }
        _ => {
            return Err(failed(format!(
                "Slack answered the download with HTTP {status}"
            )));
        }
    }
    let html = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("text/html"));
    let wants_html = f
        .mime
        .as_deref()
        .is_some_and(|m| m.to_ascii_lowercase().starts_with("text/html"));
    if html && !wants_html {
        return Err(sign_in_page());
    }
    let bytes = crate::media::read_body(resp, max, |_| {
        failed("the download from Slack broke off".into())
    })
    .await?;
    // Without a content type: the page by its first bytes.
    if !wants_html && looks_like_html(&bytes) {
        return Err(sign_in_page());
    }
    Ok(bytes)
}

/// What Slack answers a download without a token it accepts: its
/// sign-in page, with HTTP 200.
fn sign_in_page() -> Missed {
    Missed::Failed(
        "Slack answered with its sign-in page, not the file: the app needs the files:read scope"
            .into(),
    )
}

fn looks_like_html(bytes: &[u8]) -> bool {
    let start: Vec<u8> = bytes
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take(15)
        .map(u8::to_ascii_lowercase)
        .collect();
    start.starts_with(b"<!doctype html") || start.starts_with(b"<html")
}

/// Whether `url` is on one of Slack's hosts, as `api` (the Web API's
/// URL) names them: its host, or one of its domain (`files.slack.com`
/// for `slack.com`), over https (or the Web API's own scheme).
fn from_slack(url: &str, api: &str) -> bool {
    let (Ok(file), Ok(api)) = (url::Url::parse(url), url::Url::parse(api)) else {
        return false;
    };
    if file.scheme() != "https" && file.scheme() != api.scheme() {
        return false;
    }
    let (Some(host), Some(api_host)) = (file.host_str(), api.host_str()) else {
        return false;
    };
    let domain = match api.host() {
        // `api.slack.com` is of `slack.com`; `slack.com` is its own.
        Some(url::Host::Domain(d)) if d.matches('.').count() >= 2 => {
            d.split_once('.').map_or(d, |(_, rest)| rest)
        }
        _ => api_host,
    };
    host == api_host || host == domain || host.ends_with(&format!(".{domain}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_messages_files_are_read_with_their_links_and_voice_clips() {
        let event = json!({"type": "message", "subtype": "file_share", "files": [
            {"id": "F1", "name": "audio_message.webm", "title": "Audio clip", "mimetype": "audio/webm",
             "filetype": "webm", "size": 5120, "subtype": "slack_audio",
             "url_private": "https://files.slack.com/files-pri/T1-F1/audio_message.webm",
             "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/audio_message.webm"},
            {"id": "F2", "title": "shot", "mimetype": "image/png", "size": 70,
             "url_private": "https://files.slack.com/files-pri/T1-F2/shot.png"},
            {"id": "F3", "mode": "tombstone"},
            {"id": "F4", "file_access": "check_file_info"},
        ]});
        let files = files_of(&event);
        assert_eq!(files.len(), 4);
        assert!(files[0].voice && files[0].size == 5120);
        assert_eq!(files[0].name.as_deref(), Some("audio_message.webm"));
        assert!(files[0].url.as_deref().unwrap().contains("/download/"));
        assert_eq!(
            (files[1].name.as_deref(), files[1].voice),
            (Some("shot"), false)
        );
        assert!(files[1].url.as_deref().unwrap().ends_with("/shot.png"));
        assert_eq!(files[2].hidden, Some("it was deleted"));
        assert!(files[3].hidden.unwrap().contains("only its id"));
        assert_eq!(placeholder(&files[..2]), "[voice message] [image: shot]");
        assert_eq!(placeholder(&files[2..3]), "[file]");
        assert!(files_of(&json!({"text": "no files"})).is_empty());
    }

    #[test]
    fn the_token_goes_only_to_slacks_hosts() {
        let api = "https://slack.com/api";
        for ok in [
            "https://files.slack.com/files-pri/T1-F1/download/a.png",
            "https://slack.com/files-pri/T1-F1/a.png",
        ] {
            assert!(from_slack(ok, api), "{ok}");
        }
        for bad in [
            "http://files.slack.com/files-pri/T1-F1/a.png",
            "https://files.slack.com.evil.example/a.png",
            "https://evilslack.com/a.png",
            "https://127.0.0.1/a.png",
            "not a url",
        ] {
            assert!(!from_slack(bad, api), "{bad}");
        }
        assert!(from_slack(
            "https://files.slack.com/x",
            "https://api.slack.com/api"
        ));
        // A local Web API: its own host and scheme.
        let local = "http://127.0.0.1:4000";
        assert!(from_slack("http://127.0.0.1:4000/files-pri/T-F/a", local));
        assert!(!from_slack("http://127.0.0.2:4000/files-pri/T-F/a", local));
    }

    #[test]
    fn a_sign_in_page_is_not_a_file() {
        assert!(looks_like_html(b"\n  <!DOCTYPE html><html lang=\"en\">"));
        assert!(looks_like_html(b"<HTML><head>"));
        assert!(!looks_like_html(b"\x89PNG\r\n"));
        assert!(!looks_like_html(b"<svg xmlns="));
    }
}
