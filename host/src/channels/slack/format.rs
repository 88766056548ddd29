//! The agent's markdown as Slack messages: split into parts within
//! [`MAX_CHARS`] (Slack recommends at most 4,000 characters per message
//! and truncates far longer ones), each written in Slack's mrkdwn
//! (`*bold*`, `_italic_`, `~strike~`, `` `code` ``, fenced ```` ``` ````
//! blocks, `> ` quotes, `<url|text>` links).
//!
//! Slack reads `&`, `<` and `>` as the start of an entity, a link or a
//! mention, so every one the agent wrote is escaped (`&amp;`, `&lt;`,
//! `&gt;`), in code too: the agent cannot ping `@channel` or forge a
//! link. Headings are bold lines, lists `•`/`1.` lines, tables rows of
//! cells, raw HTML is shown as text.

use std::borrow::Cow;

use crate::channels::markdown::{self, Marks};
use crate::channels::split::{self, Limit};

/// The most characters one part has, formatted or as written: under
/// Slack's 4,000, for the entities escaping adds.
pub const MAX_CHARS: usize = 3900;

/// A part's limit: characters, formatted or as written.
const LIMIT: Limit = Limit::new(MAX_CHARS, split::chars, text);

/// The markdown split into the parts it is sent as ([`Limit::split`]).
pub fn split(markdown: &str) -> Vec<String> {
    LIMIT.split(markdown)
}

/// Escapes what Slack would read as markup of its own.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A piece of markdown in Slack's mrkdwn.
pub fn text(markdown: &str) -> String {
    markdown::render(markdown, &Mrkdwn)
}

/// Slack's marks.
struct Mrkdwn;

impl Marks for Mrkdwn {
    fn escape<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Owned(escape(text))
    }

    fn indent(&self) -> &'static str {
        "    "
    }

    /// Images are links too.
    fn link(&self, out: &mut String, start: usize, url: &str, _image: bool) {
        link(out, url, start);
    }
}

/// Turns the link text written since `start` into `<url|text>` (`<url>`
/// when the text is the address). An address Slack would not link (no
/// scheme, or one with spaces) stays as text beside it.
fn link(out: &mut String, url: &str, start: usize) {
    let label = out.split_off(start);
    let linkable =
        (url.starts_with("http://") || url.starts_with("https://") || url.starts_with("mailto:"))
            && !url.contains(char::is_whitespace);
    if !linkable {
        out.push_str(&label);
        if !url.is_empty() && label != escape(url) {
            out.push_str(&format!(" ({})", escape(url)));
        }
        return;
    }
    let url = escape(url).replace('|', "%7C");
    // `|` and `>` end a link's text.
    let label = label.replace('|', "¦");
    if label.is_empty() || label == url {
        out.push_str(&format!("<{url}>"));
    } else {
        out.push_str(&format!("<{url}|{label}>"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn() {
        markdown::assert_renders(
            text,
            &[
                (
                    "# Plan\n\n**Bold**, *it*, ~~gone~~ and `x`.\n\n- one\n- two\n\n1. a\n2. b",
                    "*Plan*\n\n*Bold*, _it_, ~gone~ and `x`.\n\n• one\n• two\n\n1. a\n2. b",
                ),
                (
                    "see [the docs](https://example.org/d?a=1&b=2) or <https://example.org>",
                    "see <https://example.org/d?a=1&amp;b=2|the docs> or <https://example.org>",
                ),
                (
                    "[a|b](https://x.org/p|q) [rel](./local)",
                    "<https://x.org/p%7Cq|a¦b> rel (./local)",
                ),
                (
                    "```rust\nif a < b && c > d {}\n```",
                    "```\nif a &lt; b &amp;&amp; c &gt; d {}\n```",
                ),
                ("> said\n> twice", "> said\n> twice"),
            ],
        );
    }

    #[test]
    fn nothing_the_agent_writes_becomes_slack_markup() {
        // Mentions, broadcasts and forged links stay text.
        markdown::assert_renders(
            text,
            &[
                (
                    "<!channel> hi <@U123> <https://evil.example|bank>",
                    "&lt;!channel&gt; hi &lt;@U123&gt; &lt;https://evil.example|bank&gt;",
                ),
                ("`<!here>` & co", "`&lt;!here&gt;` &amp; co"),
                ("<b>raw</b>", "&lt;b&gt;raw&lt;/b&gt;"),
                ("&amp; already", "&amp; already"),
            ],
        );
    }

    #[test]
    fn long_texts_split_within_the_limit_in_order() {
        let para = "word & ".repeat(200);
        split::assert_splits_whole(&LIMIT, &[para.trim(); 8].join("\n\n"));
        // One word longer than a message, of characters escaping triples.
        let word = "<".repeat(5000);
        let parts = split(&word);
        assert!(parts.iter().all(|p| text(p).chars().count() <= MAX_CHARS));
        assert_eq!(parts.concat(), word);
    }
}
