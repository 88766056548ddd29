//! A file's content type from its bytes, not from what it was called.

/// The content type `bytes` show: a known signature (`infer`), else
/// `text/plain` for UTF-8 text, else `application/octet-stream`.
pub fn sniff(bytes: &[u8]) -> String {
    if let Some(t) = infer::get(bytes) {
        return normal(t.mime_type()).to_string();
    }
    if std::str::from_utf8(bytes).is_ok_and(|s| !s.contains('\0')) {
        return "text/plain".into();
    }
    "application/octet-stream".into()
}

/// One name per type where `infer` and the platforms differ.
fn normal(mime: &str) -> &str {
    match mime {
        "audio/x-wav" | "audio/wave" => "audio/wav",
        "audio/x-flac" => "audio/flac",
        "audio/m4a" | "audio/x-m4a" => "audio/mp4",
        // Opus in an Ogg file: the file's type is Ogg, as the apps send it.
        "audio/opus" => "audio/ogg",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_decide_not_names() {
        let png = [
            0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
        ];
        assert_eq!(sniff(&png), "image/png");
        assert_eq!(sniff(b"OggS\0\x02\0\0\0\0\0\0\0\0"), "audio/ogg");
        assert_eq!(sniff(b"\xff\xd8\xff\xe0\0\x10JFIF\0"), "image/jpeg");
        assert_eq!(sniff(b"just words"), "text/plain");
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        assert_eq!(sniff(&elf), "application/x-executable");
        assert_eq!(sniff(&[0, 159, 146, 150]), "application/octet-stream");
    }
}
