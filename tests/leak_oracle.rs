//! Whether a secret can be read back from a text in any shape: an oracle
//! of its own, by decoding, not by the redactor's forms. Shared by the
//! redactor's unit tests (`core/src/privacy/tests.rs`) and the
//! integration tests' search of a home (`tests/integration/secrets.rs`),
//! both including this file by path.

/// Whether any 16-byte piece of `secret` can be read back from `text` in
/// any of the shapes: an oracle of its own, by decoding, not by the
/// redactor's forms.
pub fn leaks(text: &str, secret: &str) -> bool {
    let pieces: Vec<&[u8]> = secret.as_bytes().windows(16.min(secret.len())).collect();
    let holds = |hay: &[u8]| pieces.iter().any(|p| hay.windows(p.len()).any(|w| w == *p));
    let squeezed: Vec<u8> = text
        .replace("\\n", "")
        .replace('\u{200b}', "")
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if holds(&squeezed) || holds(&percent_decode(&squeezed)) {
        return true;
    }
    // Hex, either case.
    let hexes: Vec<u8> = squeezed
        .iter()
        .copied()
        .filter(u8::is_ascii_hexdigit)
        .collect();
    let lower = hexes.to_ascii_lowercase();
    for shift in 0..2 {
        let bytes: Vec<u8> = lower
            .get(shift..)
            .unwrap_or_default()
            .chunks_exact(2)
            .filter_map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
            .collect();
        if holds(&bytes) {
            return true;
        }
    }
    // Base64 of either alphabet, at each of the 4 character offsets.
    use base64::Engine as _;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let std_b64: Vec<u8> = squeezed
        .iter()
        .map(|&b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => b,
        })
        .collect();
    for run in std_b64.split(|b| !(b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')) {
        for shift in 0..4 {
            let Some(r) = run.get(shift..) else { continue };
            let r = &r[..r.len() - r.len() % 4];
            if let Ok(bytes) = engine.decode(r)
                && holds(&bytes)
            {
                return true;
            }
        }
    }
    false
}

fn percent_decode(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}
