//! The agent's markdown as Telegram messages: split into parts within
//! Telegram's length limit, each rendered in Telegram's HTML formatting
//! (`parse_mode = HTML`, the subset the Bot API documents: `b`, `i`, `s`,
//! `code`, `pre`, `a`, `blockquote`).
//!
//! HTML rather than MarkdownV2 because its escaping is three characters
//! (`&`, `<`, `>`) in text and one more (`"`) in attributes, where
//! MarkdownV2 reserves eighteen that differ inside code and links. What
//! the subset lacks is written out: headings in bold, list items with
//! bullets or numbers, tables as rows of cells, images as their alt text.
//! Raw HTML in the markdown is shown as text, never passed through.
//!
//! Splitting (`channels::split`) keeps markdown blocks whole while a part
//! stays within [`MAX_CHARS`] both as HTML and as the plain source (the
//! fallback when Telegram rejects the formatting).

use std::borrow::Cow;

use pulldown_cmark::CodeBlockKind;

use crate::channels::markdown::{self, Marks, Quote, Style};
use crate::channels::split::Limit;

/// The most characters Telegram takes in one message (it counts UTF-16
/// code units).
pub const MAX_CHARS: usize = 4096;

/// Length as Telegram counts it.
fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// A part's limit: UTF-16 code units, as HTML or as the plain source
/// (the fallback when Telegram rejects the formatting).
const LIMIT: Limit = Limit::new(MAX_CHARS, units, html);

/// The markdown split into the parts it is sent as ([`Limit::split`]).
pub fn split(markdown: &str) -> Vec<String> {
    LIMIT.split(markdown)
}

// Telegram's HTML knows only the four named entities `quote::escape`
// writes (`&apos;`, which `g2_core::envelope::escape` writes, it rejects).
use g2_core::quote::escape;

/// Links Telegram opens, and that are safe to offer.
fn linkable(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://", "mailto:", "tg://"]
        .iter()
        .any(|s| lower.starts_with(s))
}

/// A piece of markdown as Telegram HTML.
pub fn html(markdown: &str) -> String {
    markdown::render(markdown, &Html)
}

/// Telegram's HTML subset.
struct Html;

impl Marks for Html {
    fn escape<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Owned(escape(text))
    }

    fn style(&self, style: Style) -> (&'static str, &'static str) {
        match style {
            Style::Heading | Style::Strong => ("<b>", "</b>"),
            Style::Emphasis => ("<i>", "</i>"),
            Style::Strikethrough => ("<s>", "</s>"),
            Style::Code => ("<code>", "</code>"),
        }
    }

    fn quote(&self) -> Quote {
        Quote::Tags("<blockquote>", "</blockquote>")
    }

    /// `pre` with the language as the class Telegram reads, kept to the
    /// characters a language name has.
    fn code_block(&self, kind: &CodeBlockKind) -> String {
        match kind {
            CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                let lang: String = lang
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
                    .collect();
                format!("<pre><code class=\"language-{lang}\">")
            }
            _ => "<pre><code>".into(),
        }
    }

    fn end_code_block(&self, out: &mut String) {
        if out.ends_with('\n') {
            out.pop();
        }
        out.push_str("</code></pre>\n\n");
    }

    /// A link Telegram opens becomes `<a>`; another stays its text, and
    /// an image its alt text.
    fn link(&self, out: &mut String, start: usize, url: &str, image: bool) {
        if image || !linkable(url) {
            return;
        }
        let label = out.split_off(start);
        out.push_str(&format!("<a href=\"{}\">{label}</a>", escape(url)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_telegram_html_with_escaping() {
        markdown::assert_renders(
            html,
            &[
                (
                    "**bold** and _it_ & <b>x</b>",
                    "<b>bold</b> and <i>it</i> &amp; &lt;b&gt;x&lt;/b&gt;",
                ),
                ("# Title\n\ntext", "<b>Title</b>\n\ntext"),
                (
                    "```rust\nlet a = 1 < 2;\n```",
                    "<pre><code class=\"language-rust\">let a = 1 &lt; 2;</code></pre>",
                ),
                ("`a<b`", "<code>a&lt;b</code>"),
                ("- one\n- two\n\n1. a\n2. b", "• one\n• two\n\n1. a\n2. b"),
                (
                    "[site](https://x.y/?a=1&b=\"2\") [bad](javascript:alert(1))",
                    "<a href=\"https://x.y/?a=1&amp;b=&quot;2&quot;\">site</a> bad",
                ),
                ("> quoted\n> more", "<blockquote>quoted\nmore</blockquote>"),
                ("~~gone~~", "<s>gone</s>"),
                ("![a cat](https://x/c.png)", "a cat"),
            ],
        );
    }

    #[test]
    fn long_texts_split_on_paragraphs_in_order_and_within_the_limit() {
        let paras: Vec<String> = (0..50)
            .map(|i| format!("Paragraph {i}: {}", "word ".repeat(20).trim_end()))
            .collect();
        let text = paras.join("\n\n");
        assert!(text.len() > 5000);
        // Whole paragraphs, in order, nothing lost.
        let parts = crate::channels::split::assert_splits_whole(&LIMIT, &text);
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert!(parts[1].starts_with("Paragraph "));
    }

    #[test]
    fn oversized_blocks_are_cut_and_code_keeps_its_fences() {
        let code = format!("```\n{}```", "let x = 1;\n".repeat(800));
        let parts = split(&code);
        assert!(parts.len() >= 2);
        for p in &parts {
            assert!(LIMIT.fits(p), "{} units", units(p));
            assert!(p.starts_with("```\n") && p.ends_with("\n```"), "{p:.40}");
        }
        let word = "x".repeat(10_000);
        let parts = split(&word);
        assert!(parts.iter().all(|p| LIMIT.fits(p)));
        assert_eq!(parts.concat(), word);
        // Escaping counts: a text of '<' is three times longer as HTML.
        let angles = "<".repeat(5000);
        assert!(split(&angles).iter().all(|p| LIMIT.fits(p)));
        // Hostile shapes end, and lose nothing but the fences.
        let long_fence = format!("```{}\ncode\n```", "a".repeat(5000));
        let parts = split(&long_fence);
        assert!(!parts.is_empty() && parts.iter().all(|p| LIMIT.fits(p)));
        assert!(parts.concat().contains("code"));
        let inline = format!("```ls``` is {}", "word ".repeat(1200));
        let parts = split(&inline);
        assert!(parts.len() >= 2 && parts.iter().all(|p| LIMIT.fits(p)));
        assert!(
            parts[0].starts_with("```ls``` is"),
            "kept, not taken for a fence"
        );
        let wide = "😀".repeat(3000);
        assert_eq!(split(&wide).concat(), wide);
        let four = format!("````\n{}````", "x\n".repeat(3000));
        assert!(
            split(&four)
                .iter()
                .all(|p| p.starts_with("````\n") && p.ends_with("\n````"))
        );
    }
}
