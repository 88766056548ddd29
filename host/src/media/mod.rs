//! Files that come with messages: voice notes, photos, documents.
//!
//! A channel hands over what it received ([`Incoming`]: the bytes, or why
//! there are none) with the message's text; [`Media::keep`] checks each
//! file (its size against `media.max_bytes`, its real content type from
//! its bytes against what the sender claimed, the group's disk quota),
//! writes it into the group's own folder (`media/{date}/{id}-{name}`,
//! through the confined file access, so only that group's agent sees it),
//! and transcribes sound on this machine ([`speech`]). What comes back
//! ([`Kept`]) is the message's text with each transcript in it
//! (`[voice 0:12] …`: stored, archived, redacted and recalled as typed
//! text is), the attachments the log stores with it (the envelope names
//! them to the agent), and notes for the sender about anything not kept.
//!
//! Invariants: nothing a sender sends is lost silently: a file not kept
//! is named in the message with why; a file is written once under a new
//! name, never over another; transcription runs on its own bounded
//! worker with a timeout, never on a runtime thread.

mod keep;
pub mod retention;
mod sniff;
pub mod speech;

use std::sync::Arc;

use g2_core::media::{Attachment, Kind, clock};

use crate::config::{ContainerSettings, MediaSettings};
use crate::container::disk::Ledger;
use crate::groups::Group;
use crate::home::Home;

pub use keep::MEDIA_DIR;
pub use sniff::sniff;

/// A file as a channel received it.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// Its name as sent, if it had one.
    pub name: Option<String>,
    /// The content type the platform or sender gave, if any.
    pub claimed: Option<String>,
    /// Recorded as a voice message (the platform says so).
    pub voice: bool,
    /// The bytes, or why g2 does not have them.
    pub got: Result<Vec<u8>, Missed>,
}

/// Why a file's bytes did not arrive.
#[derive(Debug, Clone, PartialEq)]
pub enum Missed {
    /// Over `media.max_bytes` (its size as announced or as counted).
    TooLarge(u64),
    /// The download failed; why, in words.
    Failed(String),
}

/// The bytes of a download, or [`Missed::TooLarge`] as soon as they pass
/// `max` (the rest is not read); a chunk that fails is `broke`'s word for
/// it. Every channel's download reads through this.
pub async fn read_capped<S, B, E>(
    mut stream: S,
    max: u64,
    broke: impl Fn(E) -> Missed,
) -> Result<Vec<u8>, Missed>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    use futures_util::StreamExt;
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(&broke)?;
        let chunk = chunk.as_ref();
        let total = (bytes.len() + chunk.len()) as u64;
        if total > max {
            return Err(Missed::TooLarge(total));
        }
        bytes.extend_from_slice(chunk);
    }
    Ok(bytes)
}

/// An HTTP answer's body through [`read_capped`]: one that announces more
/// than `max` bytes is not read at all.
pub async fn read_body(
    resp: reqwest::Response,
    max: u64,
    broke: impl Fn(reqwest::Error) -> Missed,
) -> Result<Vec<u8>, Missed> {
    if let Some(n) = resp.content_length().filter(|n| *n > max) {
        return Err(Missed::TooLarge(n));
    }
    read_capped(resp.bytes_stream(), max, broke).await
}

/// A message's text and files once its files are kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kept {
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// One line per file that was not kept or not transcribed, for the
    /// sender.
    pub notes: Vec<String>,
}

/// The media of every group: where files go and who transcribes.
#[derive(Clone)]
pub struct Media {
    inner: Arc<Inner>,
}

struct Inner {
    home: Home,
    settings: MediaSettings,
    container: ContainerSettings,
    disk: Option<Ledger>,
    speech: speech::Speech,
}

impl Media {
    /// Media kept under `home`; `disk` counts the groups' files for their
    /// quotas (none: only the host's free space is checked).
    pub fn new(
        home: &Home,
        settings: &MediaSettings,
        container: &ContainerSettings,
        disk: Option<Ledger>,
    ) -> Self {
        Media {
            inner: Arc::new(Inner {
                home: home.clone(),
                settings: settings.clone(),
                container: container.clone(),
                disk,
                speech: speech::Speech::new(home.root(), settings),
            }),
        }
    }

    /// The largest file taken, in bytes (`media.max_bytes`): a channel
    /// stops a download past it.
    pub fn max_bytes(&self) -> u64 {
        self.inner.settings.max_bytes
    }

    /// The transcriber (for `g2 doctor` and the benchmarks).
    pub fn speech(&self) -> &speech::Speech {
        &self.inner.speech
    }

    /// Keeps a message's files in `group`'s folder and puts their
    /// transcripts into its `text` (see the module's doc). `id` names the
    /// files (a platform's message id, or any unique word).
    pub async fn keep(&self, group: &Group, id: &str, text: &str, files: Vec<Incoming>) -> Kept {
        let mut kept = Kept {
            text: text.trim().to_string(),
            ..Kept::default()
        };
        let mut lines = Vec::new();
        for (i, file) in files.into_iter().enumerate() {
            let id = if i == 0 {
                id.to_string()
            } else {
                format!("{id}.{i}")
            };
            let (a, line) = self.keep_one(group, &id, file).await;
            if let Some(n) = &a.note {
                kept.notes.push(format!("{}: {n}", a.name));
            }
            lines.extend(line);
            kept.attachments.push(a);
        }
        if kept.text.is_empty() && lines.is_empty() {
            // A photo without a caption: the text says what came.
            lines.extend(
                kept.attachments
                    .iter()
                    .map(|a| format!("[{}: {}]", a.kind.as_str(), a.name)),
            );
        }
        for l in lines {
            if !kept.text.is_empty() {
                kept.text.push('\n');
            }
            kept.text.push_str(&l);
        }
        kept
    }

    /// One file: kept, and the line it adds to the text (a transcript, or
    /// a placeholder where the text would be empty).
    async fn keep_one(
        &self,
        group: &Group,
        id: &str,
        file: Incoming,
    ) -> (Attachment, Option<String>) {
        let name = keep::file_name(file.name.as_deref(), file.claimed.as_deref());
        let bytes = match file.got {
            Ok(b) => b,
            Err(m) => {
                let (size, note) = match m {
                    Missed::TooLarge(n) => (n, self.too_large(n)),
                    Missed::Failed(why) => (0, format!("not received: {why}")),
                };
                let kind = if file.voice {
                    Kind::Voice
                } else {
                    keep::kind_of(file.claimed.as_deref().unwrap_or(""))
                };
                let a = not_kept(kind, name, file.claimed.unwrap_or_default(), size, note);
                let line = placeholder(&a);
                return (a, Some(line));
            }
        };
        let size = bytes.len() as u64;
        let sniffed = sniff(&bytes);
        let mut kind = keep::kind_of(&sniffed);
        // A recorded voice message in a video container (Slack's clips are
        // WebM or MP4) is still sound.
        if file.voice && matches!(kind, Kind::Audio | Kind::Video) {
            kind = Kind::Voice;
        }
        let refuse = |kind: Kind, note: String| {
            let a = not_kept(kind, name.clone(), sniffed.clone(), size, note);
            let line = placeholder(&a);
            (a, Some(line))
        };
        if size > self.max_bytes() {
            return refuse(kind, self.too_large(size));
        }
        if let Some(why) = keep::mismatch(file.claimed.as_deref(), &sniffed) {
            // Named as what it was sent as: "the photo was not kept".
            return refuse(keep::kind_of(file.claimed.as_deref().unwrap_or("")), why);
        }
        if let Err(why) = self.room_for(group, size).await {
            return refuse(kind, why);
        }
        let path = match keep::write(&self.inner.home, &group.folder, id, &name, &bytes).await {
            Ok(p) => p,
            Err(e) => return refuse(kind, format!("not kept: {e}")),
        };
        let mut a = Attachment {
            kind,
            name,
            path: Some(path),
            content_type: sniffed,
            bytes: size,
            seconds: None,
            note: None,
        };
        if !kind.is_sound() {
            return (a, None);
        }
        if !self.inner.settings.transcribe {
            let line = format!("[{}: {}]", kind.as_str(), a.path.as_deref().unwrap_or(""));
            return (a, Some(line));
        }
        let line = match self.inner.speech.transcribe(bytes).await {
            Ok(heard) => {
                a.seconds = Some(heard.seconds);
                let said = if heard.text.is_empty() {
                    "(nothing heard)"
                } else {
                    heard.text.as_str()
                };
                format!("[{} {}] {said}", kind.as_str(), clock(heard.seconds))
            }
            Err(why) => {
                a.note = Some(format!("not transcribed: {why}"));
                format!(
                    "[{}: not transcribed; the file is {}]",
                    kind.as_str(),
                    a.path.as_deref().unwrap_or("")
                )
            }
        };
        (a, Some(line))
    }

    fn too_large(&self, size: u64) -> String {
        format!(
            "not kept: {} is over the {} limit for a file",
            keep::size_words(size),
            keep::size_words(self.max_bytes())
        )
    }

    /// Whether the group's disk quota (and the host's reserve) has room
    /// for `size` more bytes, by the latest count.
    async fn room_for(&self, group: &Group, size: u64) -> Result<(), String> {
        let Some(disk) = &self.inner.disk else {
            return Ok(());
        };
        let quotas =
            crate::container::disk::Quotas::of(&self.inner.home, &self.inner.container, group);
        let count = disk
            .trusted(&group.folder)
            .await
            .map_err(|e| format!("not kept: {e}"))?;
        let usage =
            crate::container::disk::usage(&count, &quotas).map_err(|e| format!("not kept: {e}"))?;
        if usage.used_bytes.saturating_add(size) > usage.quota_bytes {
            return Err(format!(
                "not kept: the group's files would be over its disk quota of {}",
                keep::size_words(usage.quota_bytes)
            ));
        }
        if usage.host_free_bytes < usage.host_reserve_bytes.saturating_add(size) {
            return Err("not kept: the host is short of disk space".into());
        }
        disk.want(&group.folder);
        Ok(())
    }
}

fn not_kept(
    kind: Kind,
    name: String,
    content_type: String,
    bytes: u64,
    note: String,
) -> Attachment {
    Attachment {
        kind,
        name,
        path: None,
        content_type: if content_type.is_empty() {
            "application/octet-stream".into()
        } else {
            content_type
        },
        bytes,
        seconds: None,
        note: Some(note),
    }
}

/// The line a file not kept leaves in the text, so the message says what
/// came with it.
fn placeholder(a: &Attachment) -> String {
    format!(
        "[{}: {} — {}]",
        a.kind.as_str(),
        a.name,
        a.note.as_deref().unwrap_or("not kept")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_download_is_cut_past_the_limit() {
        let chunks = |n: usize| {
            futures_util::stream::iter(
                (0..n).map(|_| Ok::<_, std::convert::Infallible>(vec![7u8; 10])),
            )
        };
        let never = |_| Missed::Failed("never".into());
        assert_eq!(read_capped(chunks(3), 30, never).await.unwrap().len(), 30);
        assert_eq!(
            read_capped(chunks(100), 25, never).await,
            Err(Missed::TooLarge(30))
        );
        let broken = futures_util::stream::iter([Ok(vec![1u8]), Err("reset")]);
        assert_eq!(
            read_capped(broken, 10, |e| Missed::Failed(format!("broke off: {e}"))).await,
            Err(Missed::Failed("broke off: reset".into()))
        );
    }
}
