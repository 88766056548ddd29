//! A message as `multipart/form-data`: the fields `sender`,
//! `sender_name` and `text`, and `file` parts. A file is read up to the
//! size limit; past it, the rest is counted, not kept, so the message
//! still says what was sent.

use axum::extract::Multipart;

use crate::Error;
use crate::media::{Incoming, Missed};
use crate::messages::Inbound;

/// Forms read at once: each may hold up to its body limit (4 × the file
/// limit) in memory, so the host's memory for uploads stays bounded; more
/// wait their turn.
static READING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// The most `file` parts in one message.
const MAX_FILES: usize = 10;
/// The most bytes of a text field.
const MAX_FIELD: usize = 64 * 1024;

/// The message's fields and its files, read from the form.
pub(super) async fn read(
    mut form: Multipart,
    max_file: u64,
) -> Result<(Inbound, Vec<Incoming>), Error> {
    let _turn = READING
        .acquire()
        .await
        .map_err(|_| Error::Busy("uploads are closed".into()))?;
    let bad = |e: axum::extract::multipart::MultipartError| {
        Error::Invalid(format!("a multipart body: {}", e.body_text()))
    };
    let mut m = Inbound::default();
    let mut files = Vec::new();
    while let Some(mut field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or("").to_string();
        match name.as_str() {
            "sender" | "sender_name" | "text" => {
                let mut value = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    value.extend_from_slice(&chunk);
                    if value.len() > MAX_FIELD {
                        return Err(Error::Invalid(format!("{name}: at most {MAX_FIELD} bytes")));
                    }
                }
                let value = String::from_utf8(value)
                    .map_err(|_| Error::Invalid(format!("{name}: not UTF-8")))?;
                match name.as_str() {
                    "sender" => m.sender = value,
                    "sender_name" => m.sender_name = Some(value).filter(|n| !n.trim().is_empty()),
                    _ => m.text = value,
                }
            }
            "file" => {
                if files.len() == MAX_FILES {
                    return Err(Error::Invalid(format!(
                        "at most {MAX_FILES} files in one message"
                    )));
                }
                let file_name = field.file_name().map(str::to_string);
                let claimed = field.content_type().map(str::to_string);
                let mut bytes = Vec::new();
                let mut seen: u64 = 0;
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    seen += chunk.len() as u64;
                    if seen <= max_file {
                        bytes.extend_from_slice(&chunk);
                    } else {
                        bytes = Vec::new();
                    }
                }
                let got = if seen > max_file {
                    Err(Missed::TooLarge(seen))
                } else {
                    Ok(bytes)
                };
                files.push(Incoming {
                    name: file_name,
                    claimed,
                    // A form says nothing of how a sound was recorded.
                    voice: false,
                    got,
                });
            }
            other => {
                return Err(Error::Invalid(format!(
                    "unknown form field {:?}: sender, sender_name, text and file are known",
                    other.chars().take(40).collect::<String>()
                )));
            }
        }
    }
    Ok((m, files))
}
