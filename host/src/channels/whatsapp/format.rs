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
use crate::channels::split::{self, Limit};

/// The most characters the Cloud API takes in one text message.
pub const MAX_CHARS: usize = 4096;

/// A part's limit: characters, formatted or as written.
const LIMIT: Limit = Limit::new(MAX_CHARS, split::chars, text);

/// The markdown split into the parts it is sent as ([`Limit::split`]).
pub fn split(markdown: &str) -> Vec<String> {
    LIMIT.split(markdown)
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
        markdown::assert_renders(
            text,
            &[
                (
                    "# Plan\n\n**Bold**, *it*, ~~gone~~ and `x`.\n\n- one\n- two\n\n1. a\n2. b",
                    "*Plan*\n\n*Bold*, _it_, ~gone~ and `x`.\n\n- one\n- two\n\n1. a\n2. b",
                ),
                (
                    "see [the docs](https://example.org/d) or https://example.org",
                    "see the docs (https://example.org/d) or https://example.org",
                ),
                ("```rust\nfn main() {}\n```", "```\nfn main() {}\n```"),
                ("> said\n> twice", "> said\n> twice"),
                ("<b>raw</b> & co", "<b>raw</b> & co"),
            ],
        );
    }

    #[test]
    fn long_texts_split_within_the_limit_in_order() {
        let para = "word ".repeat(300);
        split::assert_splits_whole(&LIMIT, &[para.trim(); 6].join("\n\n"));
    }
}
