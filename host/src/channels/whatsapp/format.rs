//! The agent's markdown as WhatsApp messages: split into parts within the
//! Cloud API's 4,096-character text limit, each written in WhatsApp's own
//! formatting (`*bold*`, `_italic_`, `~strike~`, `` `code` ``, fenced
//! ```` ``` ```` blocks, `> ` quotes, `- ` and `1. ` lists).
//!
//! WhatsApp has no escape character and no links with text: a link is
//! its text followed by the address, headings are bold lines, tables rows
//! of cells, images their alt text. Raw HTML is shown as text.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use crate::channels::split::{self, options};

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
    let mut out = String::new();
    // Ordered lists' next numbers (None: a bullet list), innermost last.
    let mut lists: Vec<Option<u64>> = Vec::new();
    // Each open link's address, shown after its text.
    let mut links: Vec<String> = Vec::new();
    let mut quote = 0usize;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Heading { .. } => out.push('*'),
                Tag::BlockQuote(_) => quote += 1,
                Tag::CodeBlock(_) => out.push_str("```\n"),
                Tag::List(first) => {
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(first);
                }
                Tag::Item => {
                    out.push_str(&"  ".repeat(lists.len().saturating_sub(1)));
                    match lists.last_mut() {
                        Some(Some(n)) => {
                            out.push_str(&format!("{n}. "));
                            *n += 1;
                        }
                        _ => out.push_str("- "),
                    }
                }
                Tag::Emphasis => out.push('_'),
                Tag::Strong => out.push('*'),
                Tag::Strikethrough => out.push('~'),
                Tag::Link { dest_url, .. } => links.push(dest_url.to_string()),
                Tag::Paragraph if quote > 0 => out.push_str(&"> ".repeat(quote)),
                Tag::TableCell
                    if !out.ends_with('\n') && !out.is_empty() && !out.ends_with("| ") =>
                {
                    out.push_str(" | ");
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str("\n\n"),
                TagEnd::Heading(_) => out.push_str("*\n\n"),
                TagEnd::BlockQuote(_) => quote = quote.saturating_sub(1),
                TagEnd::CodeBlock => {
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                    out.push_str("```\n\n");
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
                TagEnd::Emphasis => out.push('_'),
                TagEnd::Strong => out.push('*'),
                TagEnd::Strikethrough => out.push('~'),
                TagEnd::Link => {
                    if let Some(url) = links.pop()
                        && !out.ends_with(url.as_str())
                    {
                        out.push_str(&format!(" ({url})"));
                    }
                }
                TagEnd::TableHead | TagEnd::TableRow | TagEnd::Table => out.push('\n'),
                _ => {}
            },
            // An image's alt text comes as text.
            Event::Text(t) => out.push_str(&t),
            Event::Code(t) => out.push_str(&format!("`{t}`")),
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&t),
            Event::SoftBreak | Event::HardBreak => {
                out.push('\n');
                if quote > 0 {
                    out.push_str(&"> ".repeat(quote));
                }
            }
            Event::Rule => out.push_str("——————\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(t) => out.push_str(&format!("[{t}]")),
            Event::InlineMath(t) | Event::DisplayMath(t) => out.push_str(&t),
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
