//! Folding and stemming as the snippet builder compares words: lower case,
//! common Latin diacritics removed (`fold_char`, `fold_into`), then
//! Porter's first step (`stem`).
//!
//! A loose approximation of the index's tokenizer (`porter unicode61
//! remove_diacritics 2`), enough to find the words FTS5 matched; it never
//! decides what matches, only what a snippet marks.

use std::borrow::Cow;

/// Latin-1 lower-case letters U+00E0..=U+00FF without their diacritics.
const LATIN1_BASE: &str = "aaaaaaæceeeeiiiiðnooooo÷ouuuuyþy";
/// Latin Extended-A U+0100..=U+017F without diacritics (`.`: kept as is,
/// such as `ĳ`, `ŋ`, `œ`).
const LATIN_EXT_A_BASE: &str = concat!(
    "aaaaaa",
    "cccccccc",
    "dddd",
    "eeeeeeeeee",
    "gggggggg",
    "hhhh",
    "iiiiiiiiii",
    "..",
    "jj",
    "kkk",
    "llllllllll",
    "nnnnnnn",
    "..",
    "oooooo",
    "..",
    "rrrrrr",
    "ssssssss",
    "tttttt",
    "uuuuuuuuuuuu",
    "ww",
    "yyy",
    "zzzzzz",
    "s",
);

/// Lower case, with the diacritics of common Latin letters removed.
pub(super) fn fold_char(c: char) -> char {
    let c = if c.is_ascii() {
        c.to_ascii_lowercase()
    } else {
        c.to_lowercase().next().unwrap_or(c)
    };
    match c as u32 {
        0xe0..=0xff => LATIN1_BASE.chars().nth(c as usize - 0xe0).unwrap_or(c),
        0x100..=0x17f => match LATIN_EXT_A_BASE.as_bytes()[c as usize - 0x100] {
            b'.' => c,
            b => b as char,
        },
        _ => c,
    }
}

/// `word` folded character by character into `out` (cleared first).
pub(super) fn fold_into(word: &str, out: &mut String) {
    out.clear();
    out.extend(word.chars().map(fold_char));
}

/// Porter's step 1 (1a plurals, 1b `-ed` / `-ing`, 1c `-y`) on a folded
/// word; words with non-ASCII letters are left alone.
pub(crate) fn stem(w: &str) -> Cow<'_, str> {
    if w.len() < 3 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return Cow::Borrowed(w);
    }
    let mut s = w.to_string();
    // 1a
    if s.ends_with("sses") || s.ends_with("ies") {
        s.truncate(s.len() - 2);
    } else if s.ends_with('s') && !s.ends_with("ss") {
        s.pop();
    }
    // 1b
    if s.ends_with("eed") {
        if measure(&s[..s.len() - 3]) > 0 {
            s.pop();
        }
    } else if let Some(base) = s.strip_suffix("ed").or_else(|| s.strip_suffix("ing"))
        && has_vowel(base)
    {
        s.truncate(base.len());
        let b = s.as_bytes();
        let n = b.len();
        if s.ends_with("at") || s.ends_with("bl") || s.ends_with("iz") {
            s.push('e');
        } else if n >= 2
            && b[n - 1] == b[n - 2]
            && consonant(b, n - 1)
            && !matches!(b[n - 1], b'l' | b's' | b'z')
        {
            s.pop();
        } else if measure(&s) == 1 && cvc(s.as_bytes()) {
            s.push('e');
        }
    }
    // 1c
    if s.len() > 1 && s.ends_with('y') && has_vowel(&s[..s.len() - 1]) {
        s.pop();
        s.push('i');
    }
    Cow::Owned(s)
}

/// Porter's consonant test for `b[i]` (`y` after a consonant is a vowel).
fn consonant(b: &[u8], i: usize) -> bool {
    match b[i] {
        b'a' | b'e' | b'i' | b'o' | b'u' => false,
        b'y' => i == 0 || !consonant(b, i - 1),
        _ => true,
    }
}

fn has_vowel(s: &str) -> bool {
    (0..s.len()).any(|i| !consonant(s.as_bytes(), i))
}

/// Porter's m: the number of vowel-consonant sequences.
fn measure(s: &str) -> usize {
    let b = s.as_bytes();
    let mut m = 0;
    let mut vowel = false;
    for i in 0..b.len() {
        let c = consonant(b, i);
        if c && vowel {
            m += 1;
        }
        vowel = !c;
    }
    m
}

/// Ends consonant-vowel-consonant, the last not `w`, `x` or `y`.
fn cvc(b: &[u8]) -> bool {
    let n = b.len();
    n >= 3
        && consonant(b, n - 1)
        && !consonant(b, n - 2)
        && consonant(b, n - 3)
        && !matches!(b[n - 1], b'w' | b'x' | b'y')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porter_step_one() {
        for (word, stemmed) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("caress", "caress"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agree"),
            ("plastered", "plaster"),
            ("bled", "bled"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflate"),
            ("troubled", "trouble"),
            ("sized", "size"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("hissing", "hiss"),
            ("failing", "fail"),
            ("filing", "file"),
            ("happy", "happi"),
            ("sky", "sky"),
            ("is", "is"),
            ("naïve", "naïve"),
        ] {
            assert_eq!(stem(word), stemmed, "{word}");
        }
    }

    #[test]
    fn diacritic_tables_line_up() {
        assert_eq!(LATIN1_BASE.chars().count(), 0x100 - 0xe0);
        assert_eq!(LATIN_EXT_A_BASE.len(), 0x180 - 0x100);
        for (c, base) in [
            ('à', 'a'),
            ('ç', 'c'),
            ('ñ', 'n'),
            ('ø', 'o'),
            ('ÿ', 'y'),
            ('Ā', 'a'),
            ('č', 'c'),
        ] {
            assert_eq!(fold_char(c), base, "{c}");
        }
        for (c, base) in [
            ('ď', 'd'),
            ('ě', 'e'),
            ('ğ', 'g'),
            ('ı', 'i'),
            ('ł', 'l'),
            ('ő', 'o'),
            ('ř', 'r'),
        ] {
            assert_eq!(fold_char(c), base, "{c}");
        }
        for (c, base) in [
            ('š', 's'),
            ('ţ', 't'),
            ('ů', 'u'),
            ('ŵ', 'w'),
            ('ŷ', 'y'),
            ('ž', 'z'),
            ('ſ', 's'),
        ] {
            assert_eq!(fold_char(c), base, "{c}");
        }
        assert_eq!(fold_char('œ'), 'œ');
        assert_eq!(fold_char('Ж'), 'ж');
    }
}
