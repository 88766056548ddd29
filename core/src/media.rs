//! A file that came with a message (a voice note, a photo, a document):
//! what the host stores beside the message's text and what the envelope
//! names for the agent. The file itself is in the group's own folder, at
//! [`Attachment::path`] (relative to it); the agent sees that folder at
//! [`crate::wire::GROUP_DIR`].

use serde::{Deserialize, Serialize};

/// What kind of file it is, from its bytes (and, for a voice note, the
/// platform's word that it was recorded as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Recorded as a voice message; transcribed into the message's text.
    Voice,
    /// Any other sound file; transcribed too.
    Audio,
    Image,
    Video,
    /// A document or anything else kept as it is.
    File,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Voice => "voice",
            Kind::Audio => "audio",
            Kind::Image => "image",
            Kind::Video => "video",
            Kind::File => "file",
        }
    }

    /// Sound: transcribed.
    pub fn is_sound(self) -> bool {
        matches!(self, Kind::Voice | Kind::Audio)
    }
}

/// One file of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: Kind,
    /// Its name as sent, made safe for a file name (or one g2 gave it).
    pub name: String,
    /// Where it is kept, relative to the group's folder
    /// (`media/2026-11-28/…`); `None` when it was not kept ([`note`](Self::note)
    /// says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The content type its bytes show (not what the sender claimed).
    #[serde(rename = "type")]
    pub content_type: String,
    pub bytes: u64,
    /// A sound's length in whole seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u32>,
    /// Why it was not kept or not transcribed (g2's words, shown to the
    /// sender and the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Attachment {
    /// Its path as the agent sees it, inside the container.
    pub fn container_path(&self) -> Option<String> {
        self.path
            .as_ref()
            .map(|p| format!("{}/{p}", crate::wire::GROUP_DIR))
    }
}

/// `m:ss` (or `h:mm:ss`) for a sound's length, as a transcript's mark shows it.
pub fn clock(seconds: u32) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_reads_like_a_player() {
        assert_eq!(clock(0), "0:00");
        assert_eq!(clock(12), "0:12");
        assert_eq!(clock(75), "1:15");
        assert_eq!(clock(3725), "1:02:05");
    }

    #[test]
    fn json_names_the_type_and_leaves_out_what_is_unknown() {
        let a = Attachment {
            kind: Kind::Image,
            name: "cat.png".into(),
            path: Some("media/2026-11-28/1-cat.png".into()),
            content_type: "image/png".into(),
            bytes: 10,
            seconds: None,
            note: None,
        };
        let j = serde_json::to_value(&a).unwrap();
        assert_eq!(j["type"], "image/png");
        assert_eq!(j["kind"], "image");
        assert!(j.get("note").is_none() && j.get("seconds").is_none());
        assert_eq!(serde_json::from_value::<Attachment>(j).unwrap(), a);
        assert_eq!(
            a.container_path().unwrap(),
            format!("{}/media/2026-11-28/1-cat.png", crate::wire::GROUP_DIR)
        );
    }
}
