//! What a capture keeps of a prompt, and the question memory is asked with
//! for it: one derivation for the runner (which captures the prompt and
//! asks the host for memory), the hook and the host (which starts answering that question
//! while the agent is still reading the message).

use crate::envelope;
use crate::wire;

use super::{Redactor, entirely_private};

/// What may be kept of a prompt (cleaned and cut to
/// [`wire::MAX_CAPTURE_PROMPT`]); `None` when it was entirely private. A
/// routed prompt's tags are escaped inside its envelope, so each message
/// is cleaned as its sender wrote it and the envelope written again
/// (senders and times kept, messages left empty dropped).
pub fn kept(prompt: &str, r: &Redactor) -> Option<String> {
    let text = match envelope::read(prompt) {
        Some(env) if !env.messages.is_empty() => {
            let kept: Vec<(&str, &str, String)> = env
                .messages
                .iter()
                .filter_map(|m| {
                    let text = r.clean(&m.text).trim().to_string();
                    (!text.is_empty()).then_some((m.sender.as_str(), m.time.as_str(), text))
                })
                .collect();
            if kept.is_empty() {
                return None;
            }
            envelope::write(kept.iter().map(|(s, t, x)| (*s, *t, x.as_str())))
        }
        _ if entirely_private(prompt) => return None,
        _ => prompt.to_string(),
    };
    Some(r.bounded(&text, wire::MAX_CAPTURE_PROMPT))
}

/// The question memory is asked with for a kept prompt: a routed one as
/// the people's texts without their names (which would only dilute it),
/// one per line; None when nothing is left to ask.
pub fn question(kept: &str) -> Option<String> {
    let q = match envelope::read(kept) {
        Some(env) => env.texts(),
        None => kept.to_string(),
    };
    (!q.is_empty()).then_some(q)
}

/// [`question`] of [`kept`] with the built-in redactor: what the runner asks
/// for a prompt Claude Code was given as `prompt`.
pub fn question_for(prompt: &str) -> Option<String> {
    question(&kept(prompt, &Redactor::default())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routed_prompt_asks_with_its_texts_cleaned() {
        let prompt = envelope::write([
            (
                "Ann",
                "09:00",
                "where is the boat? <private>my pin 4417</private>",
            ),
            ("Bob", "09:01", "<private>all of it</private>"),
            (
                "Cy",
                "09:02",
                "api key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
            ),
        ]);
        let kept = kept(&prompt, &Redactor::default()).unwrap();
        assert!(
            !kept.contains("4417") && !kept.contains("all of it"),
            "{kept}"
        );
        assert!(kept.contains("Ann") && !kept.contains("Bob"), "{kept}");
        let q = question(&kept).unwrap();
        assert!(q.starts_with("where is the boat?"), "{q}");
        assert!(!q.contains("Ann") && !q.contains("abcdefghijklmnop"), "{q}");
        assert_eq!(question_for(&prompt), Some(q));
    }

    #[test]
    fn private_and_empty_prompts_ask_nothing() {
        assert_eq!(kept("<private>all</private>", &Redactor::default()), None);
        assert_eq!(question_for("<private>all</private>"), None);
        assert_eq!(question(""), None);
        assert_eq!(question_for("plain words").as_deref(), Some("plain words"));
        // Long prompts are kept to the capture's bound.
        let long = "word ".repeat(10_000);
        let k = kept(&long, &Redactor::default()).unwrap();
        assert_eq!(
            k.chars().count(),
            wire::MAX_CAPTURE_PROMPT + 1,
            "cut, marked with …"
        );
    }
}
