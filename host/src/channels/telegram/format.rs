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

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// The most characters Telegram takes in one message (it counts UTF-16
/// code units).
pub const MAX_CHARS: usize = 4096;

use crate::channels::split::options;

/// Length as Telegram counts it.
fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Whether a piece of markdown fits in one message, formatted or plain.
fn fits(markdown: &str) -> bool {
    units(markdown) <= MAX_CHARS && units(&html(markdown)) <= MAX_CHARS
}

/// The markdown split into the parts it is sent as, in order; the same
/// text always gives the same parts.
pub fn split(markdown: &str) -> Vec<String> {
    crate::channels::split::split(markdown, MAX_CHARS, &fits)
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
    let mut out = String::new();
    // Per open list: the next number (None: bullets).
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut links: Vec<bool> = Vec::new();
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { .. } => out.push_str("<b>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(CodeBlockKind::Fenced(lang)) if !lang.trim().is_empty() => {
                    let lang: String = lang
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .chars()
                        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
                        .collect();
                    out.push_str(&format!("<pre><code class=\"language-{lang}\">"));
                }
                Tag::CodeBlock(_) => out.push_str("<pre><code>"),
                Tag::List(first) => {
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(first);
                }
                Tag::Item => {
                    let depth = lists.len().saturating_sub(1);
                    out.push_str(&"  ".repeat(depth));
                    match lists.last_mut() {
                        Some(Some(n)) => {
                            out.push_str(&format!("{n}. "));
                            *n += 1;
                        }
                        _ => out.push_str("• "),
                    }
                }
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strong => out.push_str("<b>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::Link { dest_url, .. } => {
                    let ok = linkable(&dest_url);
                    if ok {
                        out.push_str(&format!("<a href=\"{}\">", escape(&dest_url)));
                    }
                    links.push(ok);
                }
                Tag::TableCell
                    if !out.ends_with('\n') && !out.is_empty() && !out.ends_with("| ") =>
                {
                    out.push_str(" | ");
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str("\n\n"),
                TagEnd::Heading(_) => out.push_str("</b>\n\n"),
                TagEnd::BlockQuote(_) => {
                    trim_end(&mut out);
                    out.push_str("</blockquote>\n\n");
                }
                TagEnd::CodeBlock => {
                    if out.ends_with('\n') {
                        out.pop();
                    }
                    out.push_str("</code></pre>\n\n");
                }
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        trim_end(&mut out);
                        out.push_str("\n\n");
                    }
                }
                TagEnd::Item => {
                    trim_end(&mut out);
                    out.push('\n');
                }
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::Link if links.pop() == Some(true) => out.push_str("</a>"),
                TagEnd::TableHead | TagEnd::TableRow => out.push('\n'),
                TagEnd::Table => out.push('\n'),
                _ => {}
            },
            // An image's alt text comes as text.
            Event::Text(t) => out.push_str(&escape(&t)),
            Event::Code(t) => out.push_str(&format!("<code>{}</code>", escape(&t))),
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&escape(&t)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("——————\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(t) => out.push_str(&format!("[{}]", escape(&t))),
            Event::InlineMath(t) | Event::DisplayMath(t) => out.push_str(&escape(&t)),
        }
    }
    trim_end(&mut out);
    out
}

fn trim_end(s: &mut String) {
    let n = s.trim_end().len();
    s.truncate(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_telegram_html_with_escaping() {
        assert_eq!(
            html("**bold** and _it_ & <b>x</b>"),
            "<b>bold</b> and <i>it</i> &amp; &lt;b&gt;x&lt;/b&gt;"
        );
        assert_eq!(html("# Title\n\ntext"), "<b>Title</b>\n\ntext");
        assert_eq!(
            html("```rust\nlet a = 1 < 2;\n```"),
            "<pre><code class=\"language-rust\">let a = 1 &lt; 2;</code></pre>"
        );
        assert_eq!(html("`a<b`"), "<code>a&lt;b</code>");
        assert_eq!(
            html("- one\n- two\n\n1. a\n2. b"),
            "• one\n• two\n\n1. a\n2. b"
        );
        assert_eq!(
            html("[site](https://x.y/?a=1&b=\"2\") [bad](javascript:alert(1))"),
            "<a href=\"https://x.y/?a=1&amp;b=&quot;2&quot;\">site</a> bad"
        );
        assert_eq!(
            html("> quoted\n> more"),
            "<blockquote>quoted\nmore</blockquote>"
        );
        assert_eq!(html("~~gone~~"), "<s>gone</s>");
        assert_eq!(html("![a cat](https://x/c.png)"), "a cat");
    }

    #[test]
    fn long_texts_split_on_paragraphs_in_order_and_within_the_limit() {
        let paras: Vec<String> = (0..50)
            .map(|i| format!("Paragraph {i}: {}", "word ".repeat(20).trim_end()))
            .collect();
        let text = paras.join("\n\n");
        assert!(text.len() > 5000);
        let parts = split(&text);
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert!(parts.iter().all(|p| fits(p)));
        // Whole paragraphs, in order, nothing lost.
        assert_eq!(parts.join("\n\n"), text.trim());
        assert!(parts[1].starts_with("Paragraph "));
        assert_eq!(split("short"), ["short"]);
        assert_eq!(split(&text), parts, "the same text splits the same way");
    }

    #[test]
    fn oversized_blocks_are_cut_and_code_keeps_its_fences() {
        let code = format!("```\n{}```", "let x = 1;\n".repeat(800));
        let parts = split(&code);
        assert!(parts.len() >= 2);
        for p in &parts {
            assert!(fits(p), "{} units", units(p));
            assert!(p.starts_with("```\n") && p.ends_with("\n```"), "{p:.40}");
        }
        let word = "x".repeat(10_000);
        let parts = split(&word);
        assert!(parts.iter().all(|p| fits(p)));
        assert_eq!(parts.concat(), word);
        // Escaping counts: a text of '<' is three times longer as HTML.
        let angles = "<".repeat(5000);
        assert!(split(&angles).iter().all(|p| fits(p)));
        // Hostile shapes end, and lose nothing but the fences.
        let long_fence = format!("```{}\ncode\n```", "a".repeat(5000));
        let parts = split(&long_fence);
        assert!(!parts.is_empty() && parts.iter().all(|p| fits(p)));
        assert!(parts.concat().contains("code"));
        let inline = format!("```ls``` is {}", "word ".repeat(1200));
        let parts = split(&inline);
        assert!(parts.len() >= 2 && parts.iter().all(|p| fits(p)));
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
