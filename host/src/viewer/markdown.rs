//! Archives as pages: markdown rendered with pulldown-cmark, where nothing
//! a group member or the agent wrote can become markup of the page.
//!
//! - Raw HTML (blocks and inline) is shown as text, escaped.
//! - A link keeps its target only for `http:`, `https:` and `mailto:` (and
//!   a `#fragment` within the page), opens with `rel="noopener noreferrer"`;
//!   any other target (`javascript:`, `data:`, relative paths) leaves the
//!   link's text alone.
//! - An image is never fetched: it is shown as its text, `[image: alt]`.
//! - Headings get ids (`h-1`, `h-2`, …) so a table of contents can link
//!   to them.

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};

/// A heading of the rendered document: its level, text and anchor id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub level: u8,
    pub text: String,
    pub id: String,
}

/// The HTML of `markdown`, and its headings in order.
pub fn render(markdown: &str) -> (String, Vec<Heading>) {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    let mut headings = Vec::new();
    let mut in_heading: Option<(u8, String)> = None;
    // Links whose target was refused: their end tag is dropped too.
    let mut refused_links = Vec::new();
    let mut image_depth = 0usize;
    let mut events = Vec::new();
    for ev in Parser::new_ext(markdown, opts) {
        if image_depth > 0 {
            // Inside an image: its alt text only.
            match ev {
                Event::Start(Tag::Image { .. }) => image_depth += 1,
                Event::End(TagEnd::Image) => {
                    image_depth -= 1;
                    if image_depth == 0 {
                        events.push(Event::Text(CowStr::from("]")));
                    }
                }
                Event::Text(t) | Event::Code(t) => events.push(Event::Text(t)),
                _ => {}
            }
            continue;
        }
        match ev {
            Event::Html(raw) | Event::InlineHtml(raw) => events.push(Event::Text(raw)),
            Event::Start(Tag::Image { .. }) => {
                image_depth = 1;
                events.push(Event::Text(CowStr::from("[image: ")));
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                if allowed(&dest_url) {
                    refused_links.push(false);
                    events.push(Event::Html(CowStr::from(format!(
                        "<a href=\"{}\" rel=\"noopener noreferrer\">",
                        escape(&dest_url)
                    ))));
                } else {
                    refused_links.push(true);
                }
            }
            Event::End(TagEnd::Link) => {
                if refused_links.pop() == Some(false) {
                    events.push(Event::Html(CowStr::from("</a>")));
                }
            }
            Event::Start(Tag::Heading { level, .. }) => {
                let n = heading_level(level);
                in_heading = Some((n, String::new()));
                let id = format!("h-{}", headings.len() + 1);
                events.push(Event::Html(CowStr::from(format!("<h{n} id=\"{id}\">"))));
            }
            Event::End(TagEnd::Heading(level)) => {
                let n = heading_level(level);
                if let Some((l, text)) = in_heading.take() {
                    headings.push(Heading {
                        level: l,
                        text: text.trim().to_string(),
                        id: format!("h-{}", headings.len() + 1),
                    });
                }
                events.push(Event::Html(CowStr::from(format!("</h{n}>"))));
            }
            Event::Text(t) => {
                if let Some((_, text)) = in_heading.as_mut() {
                    text.push_str(&t);
                }
                events.push(Event::Text(t));
            }
            Event::Code(t) => {
                if let Some((_, text)) = in_heading.as_mut() {
                    text.push_str(&t);
                }
                events.push(Event::Code(t));
            }
            other => events.push(other),
        }
    }
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, events.into_iter());
    (out, headings)
}

fn heading_level(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Whether a link may keep its target.
fn allowed(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
        || (lower.starts_with('#') && !lower.contains(':'))
}

/// A snippet of markdown as the plain text a reader sees: emphasis,
/// code marks, headings' `#`, quotes' `>` and escapes gone, line breaks
/// and block ends as spaces. The snippet's match marks (`[` `]`) are kept:
/// they are set aside while parsing, so they never read as a link.
pub fn plain(snippet: &str) -> String {
    const OPEN: char = '\u{E000}';
    const CLOSE: char = '\u{E001}';
    let hidden: String = snippet
        .chars()
        .filter(|c| *c != OPEN && *c != CLOSE)
        .map(|c| match c {
            '[' => OPEN,
            ']' => CLOSE,
            c => c,
        })
        .collect();
    let mut out = String::with_capacity(snippet.len());
    for event in Parser::new_ext(&hidden, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                out.push_str(&t);
            }
            Event::SoftBreak
            | Event::HardBreak
            | Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::BlockQuote(_)
                | TagEnd::CodeBlock,
            ) if !out.ends_with(' ') => out.push(' '),
            _ => {}
        }
    }
    out.trim()
        .chars()
        .map(|c| match c {
            OPEN => '[',
            CLOSE => ']',
            c => c,
        })
        .collect()
}

/// Escapes text for HTML content and quoted attributes: the same five
/// characters as the chat envelope's XML (`&apos;` is HTML5 too).
pub use g2_core::envelope::escape;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_read_as_plain_text_with_their_marks() {
        assert_eq!(
            plain("**Ann**: the [boat] is at `pier 7`\n\\*\\*G2**: ok"),
            "Ann: the [boat] is at pier 7 **G2**: ok"
        );
        assert_eq!(plain("[boat]: moored"), "[boat]: moored");
        assert_eq!(
            plain("# [Tax] notes\n> quoted _word_"),
            "[Tax] notes quoted word"
        );
        assert_eq!(plain("<b>raw</b>"), "<b>raw</b>");
    }

    #[test]
    fn markup_someone_wrote_stays_text() {
        let md = "# Tax research\n\nArchived: today\n\n**Ann**: <img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>\n\n<div onclick=\"x()\">block</div>\n\n[ok](https://example.org/a?b=\"c\") [bad](javascript:alert(1)) [rel](../../etc/passwd) [mail](mailto:a@b.c)\n\n![a cat](http://x/cat.png)\n\n## Second\n";
        let (html, heads) = render(md);
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<div"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.org/a?b=&quot;c&quot;\" rel=\"noopener noreferrer\">ok</a>"),
            "{html}"
        );
        assert!(!html.contains("javascript:alert(1)\""), "{html}");
        assert!(html.contains(" bad "), "{html}");
        assert!(!html.contains("etc/passwd\""), "{html}");
        assert!(html.contains("href=\"mailto:a@b.c\""), "{html}");
        assert!(html.contains("[image: a cat]"), "{html}");
        assert!(!html.contains("cat.png"), "{html}");
        assert!(html.contains("<h1 id=\"h-1\">Tax research</h1>"), "{html}");
        assert!(html.contains("<strong>Ann</strong>"), "{html}");
        assert_eq!(
            heads,
            vec![
                Heading {
                    level: 1,
                    text: "Tax research".into(),
                    id: "h-1".into()
                },
                Heading {
                    level: 2,
                    text: "Second".into(),
                    id: "h-2".into()
                },
            ]
        );
    }
}
