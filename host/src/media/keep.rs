//! Checking a file and writing it into its group's folder.

use g2_core::media::Kind;
use g2_core::validate::GroupFolder;

use crate::home::Home;

/// The folder, in the group's, that media are kept in.
pub const MEDIA_DIR: &str = "media";

/// The longest name kept (bytes), the id before it aside.
const MAX_NAME: usize = 80;

/// A name safe for a file: its last path part, letters, digits and
/// `.-_` only (others become `_`), no leading dot, at most [`MAX_NAME`]
/// bytes with its extension kept; one from the type when it has none.
pub fn file_name(sent: Option<&str>, claimed: Option<&str>) -> String {
    let last = sent.unwrap_or("").rsplit(['/', '\\']).next().unwrap_or("");
    let mut safe: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    safe = safe.trim_start_matches('.').to_string();
    if safe.is_empty() || safe.chars().all(|c| c == '_' || c == '.') {
        let kind = kind_of(claimed.unwrap_or(""));
        safe = format!("{}{}", kind.as_str(), extension(claimed.unwrap_or("")));
    }
    if safe.len() > MAX_NAME {
        let ext = safe
            .rfind('.')
            .map(|i| safe[i..].to_string())
            .filter(|e| e.len() <= 10)
            .unwrap_or_default();
        safe = format!("{}{ext}", &safe[..MAX_NAME - ext.len()]);
    }
    safe
}

/// The extension for a content type (`.ogg` for `audio/ogg`), or none.
fn extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or("").trim() {
        "audio/ogg" | "audio/opus" => ".ogg",
        "audio/mpeg" => ".mp3",
        "audio/mp4" | "audio/m4a" | "audio/aac" => ".m4a",
        "audio/wav" | "audio/x-wav" => ".wav",
        "image/jpeg" => ".jpg",
        "image/png" => ".png",
        "image/webp" => ".webp",
        "image/gif" => ".gif",
        "video/mp4" => ".mp4",
        "application/pdf" => ".pdf",
        _ => "",
    }
}

/// The kind of file a content type names.
pub fn kind_of(mime: &str) -> Kind {
    let mime = mime.trim().to_ascii_lowercase();
    if mime.starts_with("audio/") {
        Kind::Audio
    } else if mime.starts_with("image/") {
        Kind::Image
    } else if mime.starts_with("video/") {
        Kind::Video
    } else {
        Kind::File
    }
}

/// Why a file is refused for what its bytes are: a program, or bytes of
/// another kind than the sender claimed (a "photo" that is not an image).
/// An Ogg file claimed as video (Telegram's round videos are MP4, but
/// some clients label voice as `video/ogg`) counts as sound.
pub fn mismatch(claimed: Option<&str>, sniffed: &str) -> Option<String> {
    if sniffed.starts_with("application/x-executable")
        || sniffed == "application/vnd.microsoft.portable-executable"
        || sniffed == "application/x-mach-binary"
    {
        return Some(format!("not kept: it is a program ({sniffed})"));
    }
    let claimed = claimed?.split(';').next()?.trim().to_ascii_lowercase();
    let (want, got) = (kind_of(&claimed), kind_of(sniffed));
    let media = |k: Kind| matches!(k, Kind::Audio | Kind::Image | Kind::Video);
    let ogg = sniffed == "audio/ogg" && claimed.ends_with("/ogg");
    // A webm or mp4 holds sound or pictures: its type says which poorly.
    let either =
        (want == Kind::Audio && got == Kind::Video) || (want == Kind::Video && got == Kind::Audio);
    if media(want) && want != got && !ogg && !either {
        return Some(format!(
            "not kept: it was sent as {claimed} but its bytes are {sniffed}"
        ));
    }
    None
}

/// A size in words (`2.5 MB`, `800 KB`).
pub fn size_words(bytes: u64) -> String {
    const MB: u64 = 1024 * 1024;
    if bytes >= MB {
        let tenths = bytes * 10 / MB;
        if tenths.is_multiple_of(10) {
            format!("{} MB", tenths / 10)
        } else {
            format!("{}.{} MB", tenths / 10, tenths % 10)
        }
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}

/// Writes `bytes` as a new file `media/{UTC date}/{id}-{name}` in the
/// group's folder (another name when that is taken; never over a file,
/// never through a link); its path relative to the group's folder.
pub async fn write(
    home: &Home,
    folder: &GroupFolder,
    id: &str,
    name: &str,
    bytes: &[u8],
) -> crate::Result<String> {
    let (home, folder, bytes) = (home.clone(), folder.clone(), bytes.to_vec());
    let id: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .take(40)
        .collect();
    let id = if id.is_empty() {
        uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
    } else {
        id
    };
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        let date = chrono::Utc::now().format("%Y-%m-%d").to_string();
        let group = home.group_tree(&folder)?;
        let media = home.ensure_sub(&folder, &group, MEDIA_DIR)?;
        let day = home.ensure_sub(&folder, &media, &date)?;
        let names = std::iter::once(format!("{id}-{name}"))
            .chain((2..100).map(|n| format!("{id}-{n}-{name}")));
        let written = home.confined(
            &folder,
            "a media file",
            day.write_new(names, &bytes, &|_| false),
        )?;
        Ok(format!("{MEDIA_DIR}/{date}/{written}"))
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe() {
        assert_eq!(file_name(Some("cat.png"), None), "cat.png");
        assert_eq!(file_name(Some("../../etc/passwd"), None), "passwd");
        assert_eq!(file_name(Some("a b/ü.jpg"), None), "_.jpg");
        assert_eq!(file_name(Some(".bashrc"), None), "bashrc");
        assert_eq!(file_name(None, Some("audio/ogg; codecs=opus")), "audio.ogg");
        assert_eq!(file_name(Some("..."), Some("image/jpeg")), "image.jpg");
        let long = format!("{}.jpeg", "x".repeat(300));
        let n = file_name(Some(&long), None);
        assert!(n.len() <= MAX_NAME && n.ends_with(".jpeg"), "{n}");
    }

    #[test]
    fn a_claim_the_bytes_deny_is_refused() {
        assert!(mismatch(Some("image/jpeg"), "image/png").is_none());
        assert!(mismatch(Some("audio/ogg; codecs=opus"), "audio/ogg").is_none());
        assert!(mismatch(Some("video/ogg"), "audio/ogg").is_none());
        assert!(mismatch(Some("audio/mp4"), "video/mp4").is_none());
        assert!(mismatch(None, "image/png").is_none());
        assert!(mismatch(Some("application/pdf"), "text/plain").is_none());
        let why = mismatch(Some("image/png"), "text/plain").unwrap();
        assert!(
            why.contains("sent as image/png") && why.contains("text/plain"),
            "{why}"
        );
        assert!(mismatch(Some("audio/ogg"), "image/jpeg").is_some());
        assert!(
            mismatch(None, "application/x-executable")
                .unwrap()
                .contains("program")
        );
    }

    #[test]
    fn sizes_read_as_words() {
        assert_eq!(size_words(20 * 1024 * 1024), "20 MB");
        assert_eq!(size_words(25 * 1024 * 1024 / 10), "2.5 MB");
        assert_eq!(size_words(1000), "1 KB");
    }
}
