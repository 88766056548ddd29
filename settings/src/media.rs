//! `[media]`: files that come with messages (voice notes, photos,
//! documents) and the local transcription of voice.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MediaSettings {
    /// The largest file g2 takes, in bytes (default 20 MB, what Telegram's
    /// bots may download): a larger one is not kept, and its sender is told.
    pub max_bytes: u64,
    /// Voice notes and sound files are transcribed on this machine into
    /// the message's text; `false` keeps the file and says so in the text.
    pub transcribe: bool,
    /// The speech model's folder. Default: `tools/models/whisper-tiny-en`
    /// as `scripts/setup.sh` makes it (under the home, or beside the `g2`
    /// binary's project).
    pub speech_model: Option<PathBuf>,
    /// The longest sound transcribed, in seconds; a longer one is kept
    /// with a note.
    pub max_seconds: u32,
    /// How long one transcription may take before the message goes on
    /// with a note instead.
    pub transcribe_timeout_secs: u64,
    /// Media files older than this are deleted (the message keeps its
    /// text and transcript); unset: kept as long as the group.
    pub retention_days: Option<u32>,
}

impl Default for MediaSettings {
    fn default() -> Self {
        MediaSettings {
            max_bytes: 20 * 1024 * 1024,
            transcribe: true,
            speech_model: None,
            max_seconds: 600,
            transcribe_timeout_secs: 120,
            retention_days: None,
        }
    }
}
