//! The agent's markdown in a platform's own formatting: one walk over
//! pulldown-cmark's events, for every platform that formats text
//! (Telegram's HTML, WhatsApp's marks, Slack's mrkdwn; Discord renders
//! markdown itself). A platform says only what differs, through
//! [`Marks`]: its escaping, the marks around bold, italic, struck text,
//! code and headings, its bullets, its quotes, its code blocks and its
//! links.
//!
//! What every platform shares is written here once: paragraphs and
//! headings end with a blank line, lists are bullet or number lines
//! indented per level, tables are rows of cells joined by ` | `, a rule is
//! a line, task items show a box, images their alt text, and raw HTML is
//! text (escaped like any other).

use std::borrow::Cow;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

use super::split::options;

/// An inline or heading style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Heading,
    Strong,
    Emphasis,
    Strikethrough,
    /// Inline code.
    Code,
}

/// How a platform shows a block quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quote {
    /// This prefix once per level at the start of each quoted line.
    Prefix(&'static str),
    /// The quote between an opening and a closing tag.
    Tags(&'static str, &'static str),
}

/// What a platform's formatting says differently; the defaults are the
/// plain-text apps' (WhatsApp's and Slack's marks).
pub trait Marks {
    /// The text as the platform shows it literally.
    fn escape<'a>(&self, text: &'a str) -> Cow<'a, str>;
    /// The marks before and after a styled span; by default the marks
    /// the plain-text apps share (`*bold*`, `_italic_`, `~struck~`,
    /// `` `code` ``, headings in bold).
    fn style(&self, style: Style) -> (&'static str, &'static str) {
        match style {
            Style::Heading | Style::Strong => ("*", "*"),
            Style::Emphasis => ("_", "_"),
            Style::Strikethrough => ("~", "~"),
            Style::Code => ("`", "`"),
        }
    }
    /// An unordered list item's marker.
    fn bullet(&self) -> &'static str {
        "• "
    }
    /// One level of list indentation.
    fn indent(&self) -> &'static str {
        "  "
    }
    /// How a block quote is shown.
    fn quote(&self) -> Quote {
        Quote::Prefix("> ")
    }
    /// What opens a code block.
    fn code_block(&self, _kind: &CodeBlockKind) -> String {
        "```\n".into()
    }
    /// Closes a code block whose text ends `out`.
    fn end_code_block(&self, out: &mut String) {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("```\n\n");
    }
    /// Makes the link (or image, whose text is its alt text) whose text
    /// was written at `out[start..]` point at `url`.
    fn link(&self, out: &mut String, start: usize, url: &str, image: bool);
}

/// A piece of markdown in the platform's formatting.
pub fn render(markdown: &str, marks: &impl Marks) -> String {
    let mut out = String::new();
    // Ordered lists' next numbers (None: a bullet list), innermost last.
    let mut lists: Vec<Option<u64>> = Vec::new();
    // Each open link or image: its address and where its text starts.
    let mut links: Vec<(String, usize)> = Vec::new();
    let mut quote = 0usize;
    let prefix = |quote: usize| match marks.quote() {
        Quote::Prefix(p) if quote > 0 => p.repeat(quote),
        _ => String::new(),
    };
    let mark = |style, open: bool| {
        let (o, c) = marks.style(style);
        if open { o } else { c }
    };
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => out.push_str(&prefix(quote)),
                Tag::Heading { .. } => out.push_str(mark(Style::Heading, true)),
                Tag::BlockQuote(_) => {
                    quote += 1;
                    if let Quote::Tags(open, _) = marks.quote() {
                        out.push_str(open);
                    }
                }
                Tag::CodeBlock(kind) => out.push_str(&marks.code_block(&kind)),
                Tag::List(first) => {
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(first);
                }
                Tag::Item => {
                    out.push_str(&marks.indent().repeat(lists.len().saturating_sub(1)));
                    match lists.last_mut() {
                        Some(Some(n)) => {
                            out.push_str(&format!("{n}. "));
                            *n += 1;
                        }
                        _ => out.push_str(marks.bullet()),
                    }
                }
                Tag::Emphasis => out.push_str(mark(Style::Emphasis, true)),
                Tag::Strong => out.push_str(mark(Style::Strong, true)),
                Tag::Strikethrough => out.push_str(mark(Style::Strikethrough, true)),
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                    links.push((dest_url.to_string(), out.len()));
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
                TagEnd::Heading(_) => {
                    out.push_str(mark(Style::Heading, false));
                    out.push_str("\n\n");
                }
                TagEnd::BlockQuote(_) => {
                    quote = quote.saturating_sub(1);
                    if let Quote::Tags(_, close) = marks.quote() {
                        trim_end(&mut out);
                        out.push_str(close);
                        out.push_str("\n\n");
                    }
                }
                TagEnd::CodeBlock => marks.end_code_block(&mut out),
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
                TagEnd::Emphasis => out.push_str(mark(Style::Emphasis, false)),
                TagEnd::Strong => out.push_str(mark(Style::Strong, false)),
                TagEnd::Strikethrough => out.push_str(mark(Style::Strikethrough, false)),
                end @ (TagEnd::Link | TagEnd::Image) => {
                    if let Some((url, start)) = links.pop() {
                        marks.link(&mut out, start, &url, end == TagEnd::Image);
                    }
                }
                TagEnd::TableHead | TagEnd::TableRow | TagEnd::Table => out.push('\n'),
                _ => {}
            },
            // An image's alt text comes as text.
            Event::Text(t) => out.push_str(&marks.escape(&t)),
            Event::Code(t) => {
                let (open, close) = marks.style(Style::Code);
                out.push_str(open);
                out.push_str(&marks.escape(&t));
                out.push_str(close);
            }
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&marks.escape(&t)),
            Event::SoftBreak | Event::HardBreak => {
                out.push('\n');
                out.push_str(&prefix(quote));
            }
            Event::Rule => out.push_str("——————\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(t) => out.push_str(&format!("[{}]", marks.escape(&t))),
            Event::InlineMath(t) | Event::DisplayMath(t) => out.push_str(&marks.escape(&t)),
        }
    }
    trim_end(&mut out);
    out
}

/// Drops trailing white space in place.
pub fn trim_end(s: &mut String) {
    let n = s.trim_end().len();
    s.truncate(n);
}

/// Checks a platform's formatting: each markdown in `cases` becomes the
/// text beside it.
#[cfg(test)]
pub(crate) fn assert_renders(render: fn(&str) -> String, cases: &[(&str, &str)]) {
    for (markdown, want) in cases {
        assert_eq!(render(markdown), *want, "{markdown:?}");
    }
}
