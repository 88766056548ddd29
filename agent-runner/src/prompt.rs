//! A prompt on its way to Claude Code's stdin, and the turn's reply: the
//! runner captures both (the `prompt` and `stop` events, as the
//! `UserPromptSubmit` and `Stop` hooks would) and adds the group's memory
//! to the prompt, without a hook process. Claude Code starts a
//! process for each hook and waits for it before its model request, about
//! 20 ms of every turn; the runner already holds the prompt and the group's
//! socket, so it asks the host itself.
//!
//! It does not wait for the memory: it asks with a fresh reference, the
//! host starts the recall and says so at once, and the prompt goes out
//! with a placeholder block (`wire::memory_placeholder`) that the group's
//! gateway replaces with the memory in each model request. Claude Code
//! takes about 37 ms from its stdin to its first model request; the
//! recall (mostly the question's vector, about 12 ms) runs meanwhile
//! instead of before. A host that answers with the block itself (an older
//! one) has it sent inline, in the same `<system-reminder>` wrapper.
//!
//! A new session's id is known only from Claude Code's `init` line: its
//! first prompt's capture waits for it (the capture is stamped when the
//! prompt was sent, and written before any tool of the turn can be).

use serde_json::{Value, json};

use g2_core::privacy::{self, Redactor};
use g2_core::trace::Stage;
use g2_core::wire::{self, Captured};

use crate::paths::Paths;
use crate::trace::Turn;

/// What the runner does with prompts for this container's group.
pub struct Prompts {
    paths: Paths,
    captures: bool,
    injects: bool,
    /// The capture of the line being written: (made at, event).
    writing: Option<(String, Captured)>,
    /// A sent prompt's capture waiting for the session's id.
    unsaved: Option<(String, Captured)>,
}

impl Prompts {
    /// From the container's environment: [`wire::ENV_CAPTURE`] and
    /// [`wire::ENV_INJECT`] (`0` turns each off).
    pub fn from_env(paths: &Paths) -> Prompts {
        Prompts::new(
            paths,
            switched_on(wire::ENV_CAPTURE),
            switched_on(wire::ENV_INJECT),
        )
    }

    fn new(paths: &Paths, captures: bool, injects: bool) -> Prompts {
        Prompts {
            paths: paths.clone(),
            captures,
            injects,
            writing: None,
            unsaved: None,
        }
    }

    /// The stream-json line for `text`, with the group's memory when the
    /// host has some for it. Its capture is kept for [`Prompts::sent`].
    pub async fn line(&mut self, text: &str, trace: &mut Option<Turn>) -> String {
        let kept = privacy::prompt::kept(text, &Redactor::default());
        if self.captures {
            let event = Captured::Prompt {
                private: kept.is_none(),
                text: kept.clone().unwrap_or_default(),
            };
            self.writing = Some((crate::hook::now(), event));
        }
        let question = kept.as_deref().and_then(privacy::prompt::question);
        let memory = match question {
            Some(q) if self.injects && !is_command(text) => self.ask(q, trace).await,
            _ => None,
        };
        user_line(text, memory.as_deref())
    }

    /// The line reached Claude Code: its prompt's capture is written now,
    /// or once the session's id is known (a new session's first prompt).
    /// A prompt Claude Code never got is not recorded.
    pub fn sent(&mut self, session: Option<&str>) {
        self.unsaved = self.writing.take();
        if let Some(s) = session {
            self.session(s);
        }
    }

    /// The session's id is known (Claude Code's `init` or `result`): a
    /// prompt captured before it is written now.
    pub fn session(&mut self, session: &str) {
        if let Some((at, event)) = self.unsaved.take() {
            self.write(session, &at, event);
        }
    }

    /// A successful turn's reply, captured as its `Stop` (before the frame
    /// goes out, so the host finds it with the turn's other events).
    pub fn replied(&mut self, session: Option<&str>, reply: &str) {
        let Some(session) = session else { return };
        self.session(session);
        if !self.captures {
            return;
        }
        let input = json!({ "last_assistant_message": reply });
        if let Some(event) = crate::capture::capture(wire::STOP, &input, &Redactor::default(), &[])
        {
            self.write(session, &crate::hook::now(), event);
        }
    }

    fn write(&self, session: &str, at: &str, event: Captured) {
        if let Err(e) = crate::hook::write_capture(&self.paths, Some(session), at, event) {
            eprintln!("g2-agent: the prompt's capture was not written: {e:#}");
        }
    }

    /// The memory text block for `question`: a placeholder the gateway
    /// fills, or the block when the host answers with it, within the
    /// hooks' deadline.
    async fn ask(&self, question: String, trace: &mut Option<Turn>) -> Option<String> {
        if let Some(t) = trace.as_mut() {
            t.stamp(Stage::MemoryAsked);
        }
        let socket = self.paths.model_socket();
        let reference = uuid::Uuid::new_v4().simple().to_string();
        let request = json!({
            "event": wire::USER_PROMPT_SUBMIT,
            "source": Value::Null,
            "prompt": question,
            "ref": reference,
        });
        let answer = tokio::task::spawn_blocking(move || {
            crate::inject::exchange(&socket, &request, crate::inject::wait())
        })
        .await
        .ok()
        .flatten();
        if let Some(t) = trace.as_mut() {
            t.stamp(Stage::MemoryReceived);
        }
        let answer = answer?;
        if answer["attached"] == true {
            return Some(wire::memory_placeholder(&reference));
        }
        crate::inject::context(&answer).map(|block| wire::memory_reminder(&block))
    }
}

/// Whether `text` is one of Claude Code's commands (`/compact`, …): it
/// reads one only from a message that is the command alone, so such a
/// prompt goes as it is, without memory.
fn is_command(text: &str) -> bool {
    text.trim_start().starts_with('/')
}

/// Whether the container's switch `var` is on (anything but `0`).
pub fn switched_on(var: &str) -> bool {
    !std::env::var(var).is_ok_and(|v| v == "0")
}

/// One stream-json user message: the prompt, then its memory (a reminder
/// block or its placeholder) as a text block of its own (so the prompt
/// stays the message's first text, and transcripts and the offline model
/// read it as they read a hook's context).
pub fn user_line(text: &str, memory: Option<&str>) -> String {
    let content = match memory {
        None => json!(text),
        Some(m) => json!([
            { "type": "text", "text": text },
            { "type": "text", "text": m },
        ]),
    };
    let mut s =
        json!({ "type": "user", "message": { "role": "user", "content": content } }).to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(dir: &std::path::Path) -> Paths {
        Paths {
            workspace: dir.into(),
            claude: "claude".into(),
        }
    }

    fn captures(dir: &std::path::Path) -> Vec<(Option<String>, String, Captured)> {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("ipc/events"))
            .map(|rd| rd.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .map(
                |f| match serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap() {
                    wire::AgentEvent::Capture {
                        session_id,
                        at,
                        event,
                    } => (session_id, at, event),
                    other => panic!("not a capture: {other:?}"),
                },
            )
            .collect()
    }

    #[tokio::test]
    async fn a_prompt_is_captured_cleaned_and_a_new_sessions_waits_for_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Prompts::new(&paths(dir.path()), true, true);
        // No socket: nothing to inject, and the line is the plain prompt.
        let line = p
            .line(
                "the boat <private>pin 4321</private> is at pier 7",
                &mut None,
            )
            .await;
        p.sent(None);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v["message"]["content"],
            "the boat <private>pin 4321</private> is at pier 7"
        );
        assert!(captures(dir.path()).is_empty(), "waits for the session id");
        p.session("s-1");
        p.session("s-1");
        p.line("<private>all of it</private>", &mut None).await;
        p.sent(Some("s-1"));
        // A line that never reached Claude Code is not recorded.
        p.line("lost", &mut None).await;
        p.session("s-1");
        let got = captures(dir.path());
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0.as_deref(), Some("s-1"));
        let Captured::Prompt { text, private } = &got[0].2 else {
            panic!("{got:?}");
        };
        assert!(
            !private && text.contains("pier 7") && !text.contains("4321"),
            "{text}"
        );
        assert!(got[0].1 <= got[1].1, "stamped when sent");
        assert!(matches!(&got[1].2, Captured::Prompt { text, private: true } if text.is_empty()));
    }

    #[tokio::test]
    async fn with_capture_off_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Prompts::new(&paths(dir.path()), false, false);
        p.line("hello", &mut None).await;
        p.sent(Some("s-1"));
        p.line("hello", &mut None).await;
        p.sent(None);
        p.session("s-1");
        assert!(captures(dir.path()).is_empty());
    }

    #[tokio::test]
    async fn a_turns_reply_is_its_stop_capture_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Prompts::new(&paths(dir.path()), true, false);
        let key = format!("sk-ant-api03-{}", "x".repeat(90));
        p.line("hi", &mut None).await;
        p.sent(None);
        p.replied(
            Some("s-2"),
            &format!("done <private>the pin is 4321</private> with {key}"),
        );
        let got = captures(dir.path());
        assert_eq!(got.len(), 2, "the prompt first, then its reply: {got:?}");
        assert!(matches!(&got[0].2, Captured::Prompt { text, .. } if text == "hi"));
        assert_eq!(got[1].0.as_deref(), Some("s-2"));
        let Captured::Stop { reply: Some(reply) } = &got[1].2 else {
            panic!("not a stop: {got:?}");
        };
        assert!(reply.starts_with("done"), "{reply}");
        assert!(!reply.contains("4321") && !reply.contains(&key), "{reply}");
        assert!(reply.contains("[redacted:"), "{reply}");
    }

    /// Prompts with injection on, and a host that answers one memory
    /// request with "being made".
    fn attaching() -> (tempfile::TempDir, Prompts) {
        let dir = tempfile::tempdir().unwrap();
        let paths = paths(dir.path());
        std::fs::create_dir_all(paths.ipc()).unwrap();
        crate::inject::tests::serve_once_at(
            &paths.model_socket(),
            "HTTP/1.1 200 OK\r\n\r\n{\"context\":\"\",\"attached\":true}",
            std::time::Duration::ZERO,
        );
        let p = Prompts::new(&paths, false, true);
        (dir, p)
    }

    #[tokio::test]
    async fn a_host_making_the_memory_gets_a_placeholder_for_it_at_once() {
        let (_dir, mut p) = attaching();
        let line = p.line("where is the boat?", &mut None).await;
        let v: Value = serde_json::from_str(&line).unwrap();
        let content = v["message"]["content"].as_array().unwrap();
        assert_eq!(content[0]["text"], "where is the boat?");
        let r = wire::memory_placeholder_ref(content[1]["text"].as_str().unwrap())
            .expect("a placeholder block");
        assert_eq!(r.len(), 32, "a fresh uuid: {r}");
    }

    #[tokio::test]
    async fn a_claude_code_command_goes_alone() {
        let (_dir, mut p) = attaching();
        let line = p.line("/compact", &mut None).await;
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["message"]["content"], "/compact");
        // The host was not asked: a prompt that is no command still is.
        let line = p.line("where is the boat?", &mut None).await;
        let v: Value = serde_json::from_str(&line).unwrap();
        assert!(v["message"]["content"].is_array(), "{line}");
    }

    #[test]
    fn memory_rides_after_the_prompt_in_a_reminder_block() {
        let line = user_line(
            "where is the boat?",
            Some(&wire::memory_reminder("<g2-memory>\npier 7\n</g2-memory>")),
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        let content = v["message"]["content"].as_array().unwrap();
        assert_eq!(content[0]["text"], "where is the boat?");
        let block = content[1]["text"].as_str().unwrap();
        assert!(
            block.starts_with("<system-reminder>\n<g2-memory>"),
            "{block}"
        );
        assert!(
            block.ends_with("</g2-memory>\n</system-reminder>"),
            "{block}"
        );
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
    }
}
