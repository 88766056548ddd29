//! `g2 chat <folder>`: talk to a group from a terminal. A client of a
//! running `g2 serve`: each line typed is posted to the group's chat
//! (`POST …/messages`), and the chat's new messages — the assistant's
//! replies, and other people's messages — are printed as they arrive from
//! the SSE stream (`GET …/stream`).
//!
//! The stream starts after the chat's latest message when the chat began
//! (`GET /api/groups/{folder}`'s `last_seq`), so nothing can slip past.
//! When it ends — the host restarting, or a listener that fell behind —
//! it is reopened with `Last-Event-ID` (the last `seq` seen), with a
//! back-off of up to a second while the host is away: what was stored
//! meanwhile is shown. A line typed while the host is away is kept and
//! sent once it answers. What others wrote is printed inert
//! ([`crate::terminal`]): escape sequences and bidi controls are shown,
//! not obeyed.

mod link;
mod screen;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::groups::Group;
use crate::messages::Message;
use crate::terminal::{inert, inert_name};
use crate::{Error, Result};
use link::{Failure, Link};
use screen::Screen;

pub struct ChatOptions {
    /// `http://127.0.0.1:4170`.
    pub url: String,
    pub folder: String,
    pub sender: String,
    pub token: Option<String>,
}

/// Shortest and longest wait between tries while the host is away.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Runs until `/quit` or the end of input (then waits briefly for replies
/// still due).
pub async fn run(o: ChatOptions) -> Result<()> {
    g2_core::validate::group_folder(&o.folder)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let link = Arc::new(Link::new(&o.url, &o.folder, o.token.clone()));
    let info = link.group().await.map_err(|f| match f {
        Failure::Down => Error::Invalid(link.not_running()),
        Failure::Refused(why) => Error::Invalid(why),
    })?;
    let trigger = Trigger::of(&info.group);
    let (screen, mut lines) = screen::open()?;
    screen.note(&banner(&info.group, trigger.as_ref()));
    let (replies_tx, mut replies) = mpsc::unbounded_channel::<()>();
    let follower = tokio::spawn(follow(
        link.clone(),
        screen.clone(),
        info.last_seq,
        o.sender.clone(),
        replies_tx,
    ));
    let mut sent = 0usize;
    while let Some(line) = lines.recv().await {
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if screen::is_quit(text) {
            break;
        }
        if let Some(t) = &trigger
            && !t.pattern.is_match(text)
        {
            screen.note(&format!(
                "(in the chat, but not to the agent: this group answers {})",
                t.shown
            ));
        }
        if send(&link, &screen, &o.sender, text).await {
            sent += 1;
        }
    }
    // The end of input (a pipe): give replies still due a moment.
    if sent > 0 {
        let _ = tokio::time::timeout(Duration::from_secs(2), replies.recv()).await;
    }
    follower.abort();
    Ok(())
}

/// Posts a line, trying again while the host is away; whether it was
/// stored.
async fn send(link: &Link, screen: &Screen, sender: &str, text: &str) -> bool {
    let key = uuid::Uuid::new_v4().to_string();
    let (mut told, mut pause) = (false, RETRY_MIN);
    loop {
        match link.post(sender, text, &key).await {
            Ok(()) => return true,
            Err(Failure::Refused(why)) => {
                screen.note(&format!("not sent: {why}"));
                return false;
            }
            Err(Failure::Down) => {
                if !told {
                    screen.note("(the host is away: the line is kept and sent once it is back)");
                    told = true;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        }
    }
}

/// Prints the chat's messages after `last` as they arrive, reopening the
/// stream whenever it ends; runs until aborted.
async fn follow(
    link: Arc<Link>,
    screen: Screen,
    mut last: i64,
    me: String,
    replies: mpsc::UnboundedSender<()>,
) {
    let (mut away, mut refused, mut pause) = (false, None::<String>, RETRY_MIN);
    loop {
        match link.stream(last).await {
            Ok(resp) => {
                if away {
                    screen.note("reconnected");
                }
                (away, refused, pause) = (false, None, RETRY_MIN);
                let mut messages = std::pin::pin!(message_stream(resp));
                while let Some(m) = messages.next().await {
                    last = last.max(m.seq);
                    show(&screen, &m, &me);
                    if m.from_bot {
                        let _ = replies.send(());
                    }
                }
                // Ended: the host went away, or the server closed a
                // listener that fell behind; the next try tells which.
            }
            Err(Failure::Down) => {
                if !away {
                    screen.note("host went away; reconnecting…");
                    away = true;
                }
            }
            Err(Failure::Refused(why)) => {
                if refused.as_ref() != Some(&why) {
                    screen.note(&format!("error: {why}"));
                    refused = Some(why);
                }
            }
        }
        tokio::time::sleep(pause).await;
        if away || refused.is_some() {
            pause = (pause * 2).min(RETRY_MAX);
        }
    }
}

/// A message as `name: text`; our own lines are on screen already.
fn show(screen: &Screen, m: &Message, me: &str) {
    if m.sender == me && !m.from_bot {
        return;
    }
    let who = m.sender_name.as_deref().unwrap_or(&m.sender);
    screen.message(&format!("{}: {}", inert_name(who), inert(&m.text)));
}

/// What the chat starts with: the group, whom the agent answers, how to
/// leave.
fn banner(g: &Group, trigger: Option<&Trigger>) -> String {
    let answers = match trigger {
        Some(t) => format!("the agent answers {}", t.shown),
        None => "the agent answers every message".into(),
    };
    format!(
        "chat with {} (groups/{}/): {answers}; /quit or Ctrl-D leaves",
        inert_name(&g.name),
        g.folder
    )
}

/// A group's trigger, when its agent answers only messages matching it.
struct Trigger {
    pattern: regex::Regex,
    /// For people: `messages starting with @G2`.
    shown: String,
}

impl Trigger {
    fn of(g: &Group) -> Option<Trigger> {
        if g.is_main || !g.requires_trigger {
            return None;
        }
        let source = g.trigger_pattern.as_deref()?;
        let pattern = crate::groups::trigger_regex(source).ok()?;
        let shown = match leading_word(source) {
            Some(word) => format!("messages starting with {word}"),
            None => format!("messages matching {}", inert_name(source)),
        };
        Some(Trigger { pattern, shown })
    }
}

/// The literal a trigger like `(?i)^@G2\b` asks a message to start with;
/// `None` for any other pattern.
fn leading_word(pattern: &str) -> Option<String> {
    let p = pattern.strip_prefix("(?i)").unwrap_or(pattern);
    let p = p.strip_prefix('^')?;
    let p = p.strip_suffix(r"\b").unwrap_or(p);
    let mut word = String::new();
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) if !n.is_alphanumeric() => word.push(n),
                _ => return None,
            },
            c if r".+*?()|[]{}^$".contains(c) => return None,
            c => word.push(c),
        }
    }
    (!word.is_empty()).then_some(word)
}

/// The messages of a `GET …/stream` response, as they arrive. Events are
/// split on bytes, so a character cut between two chunks stays whole;
/// events that are not messages (keep-alives) are skipped.
pub fn message_stream(resp: reqwest::Response) -> impl futures_util::Stream<Item = Message> {
    futures_util::stream::unfold(
        (resp.bytes_stream(), Vec::<u8>::new()),
        |(mut body, mut buf)| async move {
            loop {
                if let Some(end) = memchr::memmem::find(&buf, b"\n\n") {
                    let event: Vec<u8> = buf.drain(..end + 2).collect();
                    let event = String::from_utf8_lossy(&event);
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if let Ok(m) = serde_json::from_str::<Message>(&data.join("\n")) {
                        return Some((m, (body, buf)));
                    }
                    continue;
                }
                match body.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    _ => return None,
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::leading_word;

    #[test]
    fn triggers_read_as_the_word_they_want() {
        let default = crate::groups::default_trigger("G2");
        assert_eq!(leading_word(&default).as_deref(), Some("@G2"));
        assert_eq!(
            leading_word(&crate::groups::default_trigger("Andy B.")).as_deref(),
            Some("@Andy B.")
        );
        assert_eq!(leading_word("^hey"), Some("hey".into()));
        for other in ["hello", "^(a|b)", r"^\w+", "^"] {
            assert_eq!(leading_word(other), None, "{other}");
        }
    }
}
