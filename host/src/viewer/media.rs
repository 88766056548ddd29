//! A group's media files (`/groups/{folder}/media/{date}/{name}`), served
//! from g2's own origin for the chat page's images and players: the type
//! from the file's bytes, `nosniff`, and anything that is not a picture,
//! a sound or a video as a download, never a page.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Registered;
use crate::api::Api;

/// The types shown in the page; anything else is downloaded.
fn inline(mime: &str) -> bool {
    matches!(
        mime,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "video/mp4" | "video/webm"
    ) || mime.starts_with("audio/")
}

pub(super) async fn media_file(
    State(api): State<Api>,
    Registered(group): Registered,
    Path((_, date, name)): Path<(String, String, String)>,
) -> Response {
    let safe = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    if !safe(&date) || !safe(&name) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let max = api.settings.media.max_bytes;
    let (home, folder) = (api.home.clone(), group.folder.clone());
    let read = tokio::task::spawn_blocking(move || -> crate::Result<Vec<u8>> {
        let tree = home.group_tree(&folder)?;
        let rel = std::path::Path::new(crate::media::MEDIA_DIR)
            .join(&date)
            .join(&name);
        home.confined(&folder, "a media file", tree.read(&rel, max))
    })
    .await;
    let Ok(Ok(bytes)) = read else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mime = crate::media::sniff(&bytes);
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    if inline(&mime) {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(&mime)
                .unwrap_or(HeaderValue::from_static("application/octet-stream")),
        );
    } else {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        h.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        );
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    resp
}
