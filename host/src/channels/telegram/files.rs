//! The file of a Telegram message (a voice note, an audio file, the
//! largest size of a photo, a document, a round video), fetched the Bot
//! API's way: `getFile` for its path, then `{api}/file/bot{token}/{path}`,
//! read up to the size limit. Telegram's cloud Bot API serves bots files
//! of up to 20 MB; one it says is larger is not asked for.

use teloxide_core::net::Download;
use teloxide_core::requests::Requester;
use teloxide_core::types::{FileId, Message};

use crate::media::{Incoming, Missed};

/// A file a message carries, before it is fetched.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TgFile {
    id: String,
    /// As Telegram announced it (0: not told).
    size: u64,
    name: Option<String>,
    mime: Option<String>,
    voice: bool,
}

/// The file `msg` carries, if any.
pub(super) fn file_of(msg: &Message) -> Option<TgFile> {
    let f =
        |id: &FileId, size: u32, name: Option<&String>, mime: Option<String>, voice: bool| TgFile {
            id: id.0.clone(),
            size: u64::from(size),
            name: name.cloned(),
            mime,
            voice,
        };
    if let Some(v) = msg.voice() {
        return Some(f(
            &v.file.id,
            v.file.size,
            None,
            v.mime_type.as_ref().map(ToString::to_string),
            true,
        ));
    }
    if let Some(a) = msg.audio() {
        return Some(f(
            &a.file.id,
            a.file.size,
            a.file_name.as_ref(),
            a.mime_type.as_ref().map(ToString::to_string),
            false,
        ));
    }
    if let Some(sizes) = msg.photo() {
        // The largest size; Telegram sends photos as JPEG.
        let p = sizes
            .iter()
            .max_by_key(|p| u64::from(p.width) * u64::from(p.height))?;
        return Some(f(
            &p.file.id,
            p.file.size,
            None,
            Some("image/jpeg".into()),
            false,
        ));
    }
    if let Some(d) = msg.document() {
        return Some(f(
            &d.file.id,
            d.file.size,
            d.file_name.as_ref(),
            d.mime_type.as_ref().map(ToString::to_string),
            false,
        ));
    }
    if let Some(v) = msg.video_note() {
        return Some(f(
            &v.file.id,
            v.file.size,
            None,
            Some("video/mp4".into()),
            false,
        ));
    }
    None
}

/// Fetches a file, at most `max` bytes of it: what it is, or why not.
/// Errors never name the file's URL (it holds the bot's token).
pub(super) async fn fetch(bot: &teloxide_core::Bot, f: &TgFile, max: u64) -> Incoming {
    let got = if f.size > max {
        Err(Missed::TooLarge(f.size))
    } else {
        download(bot, f, max).await
    };
    Incoming {
        name: f.name.clone(),
        claimed: f.mime.clone(),
        voice: f.voice,
        got,
    }
}

async fn download(bot: &teloxide_core::Bot, f: &TgFile, max: u64) -> Result<Vec<u8>, Missed> {
    let file = bot.get_file(FileId(f.id.clone())).await.map_err(|e| {
        Missed::Failed(format!(
            "Telegram's getFile failed: {}",
            super::describe(&e, bot.token())
        ))
    })?;
    crate::media::read_capped(bot.download_file_stream(&file.path), max, |e| {
        Missed::Failed(match e.status() {
            Some(s) => format!("Telegram answered the download with HTTP {}", s.as_u16()),
            None => "the download from Telegram broke off".into(),
        })
    })
    .await
}
