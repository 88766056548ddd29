//! The agent's markdown as WhatsApp messages: split into parts within the
//! Cloud API's 4,096-character text limit, each written in WhatsApp's own
//! formatting (`*bold*`, `_italic_`, `~strike~`, `` `code` ``, fenced
//! ```` ``` ```` blocks, `> ` quotes, `- ` and `1. ` lists).
//!
//! WhatsApp has no escape character and no links with text: a link is
//! its text followed by the address, headings are bold lines, tables rows
//! of cells, images their alt text. Raw HTML is shown as text.

use std::borrow::Cow;

use crate::channels::markdown::{self, Marks};
use crate::channels::split;

/// The most characters the Cloud API takes in one text message.
pub const MAX_CHARS: usize = 4096;

/// Whether a piece of markdown fits in one message, formatted or plain.
fn fits(markdown: &str) -> bool {
    markdown.chars().count() <= MAX_CHARS && text(markdown).chars().count() <= MAX_CHARS
}

/// The markdown split into the parts it is sent as, in order; the same
/// text always gives the same parts.
pub fn split(markdown: &str) -> Vec<String> {
    split::split(markdown, MAX_CHARS, &fits)
}

/// A piece of markdown in WhatsApp's formatting.
pub fn text(markdown: &str) -> String {
    markdown::render(markdown, &WhatsApp)
}

/// WhatsApp's marks.
struct WhatsApp;

impl Marks for WhatsApp {
    /// WhatsApp has no escape character: text is shown as written.
    fn escape<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(text)
    }

    fn bullet(&self) -> &'static str {
        "- "
    }

    /// A link is its text followed by the address (unless the text is
    /// the address); an image is its alt text.
    fn link(&self, out: &mut String, _start: usize, url: &str, image: bool) {
        if !image && !out.ends_with(url) {
            out.push_str(&format!(" ({url})"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_whatsapp_formatting() {
        assert_eq!(
            text("# Plan\n\n**Bold**, *it*, ~~gone~~ and `x`.\n\n- one\n- two\n\n1. a\n2. b"),
            "*Plan*\n\n*Bold*, _it_, ~gone~ and `x`.\n\n- one\n- two\n\n1. a\n2. b"
        );
        assert_eq!(
            text("see [the docs](https://example.org/d) or https://example.org"),
            "see the docs (https://example.org/d) or https://example.org"
        );
        assert_eq!(text("```rust\nfn main() {}\n```"), "```\nfn main() {}\n```");
        assert_eq!(text("> said\n> twice"), "> said\n> twice");
        assert_eq!(text("<b>raw</b> & co"), "<b>raw</b> & co");
    }

    #[test]
    fn long_texts_split_within_the_limit_in_order() {
        let para = "word ".repeat(300);
        let long = [para.trim(); 6].join("\n\n");
        let parts = split(&long);
        assert!(parts.len() > 1, "{}", parts.len());
        for p in &parts {
            assert!(text(p).chars().count() <= MAX_CHARS);
        }
        assert_eq!(parts.join("\n\n"), long);
        assert_eq!(split(&long), parts);
        assert_eq!(split("short"), vec!["short".to_string()]);
    }
}
