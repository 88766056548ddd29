//! The stages of one turn, for the per-stage trace (`docs/development.md`,
//! "Tracing a turn"): one home for their names, which the host logs under
//! [`TARGET`] and the runner reports in its reply frame
//! ([`crate::wire::ContainerOutput::trace`]).
//!
//! Every stamp is the wall clock in unix microseconds: the host and its
//! containers share the kernel's clock, so their stamps compare directly.

use serde::{Deserialize, Serialize};

/// The `tracing` target of the stage events (`G2_LOG=warn,g2::turn=debug`).
pub const TARGET: &str = "g2::turn";

/// Where the hooks append their stamps for the runner, relative to the IPC
/// folder; nothing of the host's reads or watches it.
pub const HOOK_STAMPS: &str = "trace/hooks";

/// At most this many stamps are taken from one frame.
pub const MAX_STAMPS: usize = 64;

/// One stage of a turn, in the order a warm turn passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Host: the message committed by the log's sequencer.
    Stored,
    /// Host: the queue's wake starts for the group.
    Woken,
    /// Host: the batch marked in flight.
    HandedOver,
    /// Host: the input file renamed into `ipc/{group}/input/`.
    InputWritten,
    /// Runner: its inbox took the file.
    RunnerRead,
    /// Runner (for a prompt) or hook (`SessionStart`): the memory request
    /// sent.
    MemoryAsked,
    /// Host: the memory request received.
    MemoryContext,
    /// Host: the memory block made (`late` when past the deadline); for a
    /// prompt, while Claude Code works on it.
    MemoryAnswered,
    /// Runner or hook: the memory answer read (a prompt's says the block
    /// is being made, for the gateway to put in).
    MemoryReceived,
    /// Runner: the stream-json line flushed to Claude Code.
    StdinWritten,
    /// Host: the gateway got a model request for the group.
    ModelRequest,
    /// Host: the prompt's memory put into the model request in its
    /// placeholder's place (`late`: not ready by its deadline, none).
    MemoryAttached,
    /// Host: the model's answer streamed to its end.
    ModelAnswered,
    /// Hook process started (with the hook's event): a tool's, in a warm
    /// turn.
    HookStart,
    /// Hook process done (with the hook's event).
    HookEnd,
    /// Runner: Claude Code's `result` line seen.
    Result,
    /// Host: the reply frame read from the container.
    ReplyFrame,
    /// Host: the reply committed.
    ReplyStored,
    /// Host: the reply broadcast to the stream's listeners.
    Published,
    /// Host: a capture event file (the runner's or a hook's) taken into
    /// memory (with the write's duration); overlaps the turn.
    EventsTaken,
}

impl Stage {
    pub const ALL: [Stage; 20] = [
        Stage::Stored,
        Stage::Woken,
        Stage::HandedOver,
        Stage::InputWritten,
        Stage::RunnerRead,
        Stage::MemoryAsked,
        Stage::MemoryContext,
        Stage::MemoryAnswered,
        Stage::MemoryReceived,
        Stage::StdinWritten,
        Stage::ModelRequest,
        Stage::MemoryAttached,
        Stage::ModelAnswered,
        Stage::HookStart,
        Stage::HookEnd,
        Stage::Result,
        Stage::ReplyFrame,
        Stage::ReplyStored,
        Stage::Published,
        Stage::EventsTaken,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Stored => "stored",
            Stage::Woken => "woken",
            Stage::HandedOver => "handed_over",
            Stage::InputWritten => "input_written",
            Stage::RunnerRead => "runner_read",
            Stage::StdinWritten => "stdin_written",
            Stage::HookStart => "hook_start",
            Stage::MemoryAsked => "memory_asked",
            Stage::MemoryContext => "memory_context",
            Stage::MemoryAnswered => "memory_answered",
            Stage::MemoryReceived => "memory_received",
            Stage::HookEnd => "hook_end",
            Stage::ModelRequest => "model_request",
            Stage::MemoryAttached => "memory_attached",
            Stage::ModelAnswered => "model_answered",
            Stage::Result => "result",
            Stage::ReplyFrame => "reply_frame",
            Stage::ReplyStored => "reply_stored",
            Stage::Published => "published",
            Stage::EventsTaken => "events_taken",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Stamped inside the container (runner or hook): the only stages a
    /// frame may report.
    pub fn in_container(self) -> bool {
        matches!(
            self,
            Stage::RunnerRead
                | Stage::StdinWritten
                | Stage::HookStart
                | Stage::MemoryAsked
                | Stage::MemoryReceived
                | Stage::HookEnd
                | Stage::Result
        )
    }
}

/// Now, in unix microseconds.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One stamp taken in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stamp {
    pub stage: &'static str,
    pub at_us: u64,
    /// The hook's event, for the hook stages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
}

impl Stamp {
    pub fn new(stage: Stage, at_us: u64) -> Self {
        Stamp {
            stage: stage.as_str(),
            at_us,
            hook: None,
        }
    }

    /// The stamp's stage, if it is one a container may report.
    pub fn stage(&self) -> Option<Stage> {
        Stage::parse(self.stage).filter(|s| s.in_container())
    }
}

/// The container's stamps of one turn. Read leniently: the container is
/// not trusted, and a malformed trace must never cost the reply it rides
/// with, so what is not a known stage with a time (or a known hook) is
/// dropped, and at most [`MAX_STAMPS`] are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Trace(pub Vec<Stamp>);

impl<'de> Deserialize<'de> for Trace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let stamps = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let stage = Stage::parse(s["stage"].as_str()?).filter(|s| s.in_container())?;
                let hook = match s["hook"].as_str() {
                    Some(h) => Some(crate::wire::HANDLED_HOOKS.iter().find(|e| **e == h)?),
                    None => None,
                };
                Some(Stamp {
                    stage: stage.as_str(),
                    at_us: s["atUs"].as_u64()?,
                    hook: hook.map(ToString::to_string),
                })
            })
            .take(MAX_STAMPS)
            .collect();
        Ok(Trace(stamps))
    }
}

/// A hook's line in [`HOOK_STAMPS`]: `hook <event> <start_us> <end_us>`,
/// then `<memory_asked_us> <memory_received_us>` for a memory request.
pub fn hook_line(event: &str, start_us: u64, end_us: u64, memory: Option<(u64, u64)>) -> String {
    match memory {
        Some((asked, got)) => format!("hook {event} {start_us} {end_us} {asked} {got}\n"),
        None => format!("hook {event} {start_us} {end_us}\n"),
    }
}

/// The stamps in a [`HOOK_STAMPS`] file's text; lines that do not parse
/// are skipped.
pub fn parse_hook_lines(text: &str) -> Vec<Stamp> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        if w.next() != Some("hook") {
            continue;
        }
        let Some(event) = w
            .next()
            .and_then(|e| crate::wire::HANDLED_HOOKS.iter().find(|h| **h == e))
        else {
            continue;
        };
        let times: Vec<u64> = w.filter_map(|t| t.parse().ok()).collect();
        let stages: &[Stage] = match times.len() {
            2 => &[Stage::HookStart, Stage::HookEnd],
            4 => &[
                Stage::HookStart,
                Stage::HookEnd,
                Stage::MemoryAsked,
                Stage::MemoryReceived,
            ],
            _ => continue,
        };
        for (stage, at) in stages.iter().zip(times) {
            out.push(Stamp {
                stage: stage.as_str(),
                at_us: at,
                hook: Some((*event).to_string()),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ContainerOutput, OutputStatus};

    #[test]
    fn every_stage_has_one_name() {
        for s in Stage::ALL {
            assert_eq!(Stage::parse(s.as_str()), Some(s));
        }
        let mut names: Vec<_> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        names.dedup();
        assert_eq!(names.len(), Stage::ALL.len());
    }

    #[test]
    fn a_frames_trace_round_trips_and_is_absent_when_off() {
        let mut frame = ContainerOutput {
            status: OutputStatus::Success,
            result: Some("hi".into()),
            new_session_id: None,
            error: None,
            trace: None,
        };
        let off = serde_json::to_string(&frame).unwrap();
        assert!(!off.contains("trace"), "{off}");
        let mut stamps = vec![
            Stamp::new(Stage::RunnerRead, 1),
            Stamp::new(Stage::Result, 9),
        ];
        stamps.extend(parse_hook_lines(&hook_line("Stop", 3, 4, None)));
        frame.trace = Some(Trace(stamps));
        let on = serde_json::to_string(&frame).unwrap();
        assert_eq!(serde_json::from_str::<ContainerOutput>(&on).unwrap(), frame);
    }

    #[test]
    fn a_bad_trace_is_dropped_and_the_reply_kept() {
        let raw = r#"{"status":"success","result":"kept","trace":[
            {"stage":"stored","atUs":1},
            {"stage":"result","atUs":"x"},
            {"stage":"hook_start","atUs":2,"hook":"Evil\n"},
            {"stage":"result","atUs":5}]}"#;
        let f: ContainerOutput = serde_json::from_str(raw).unwrap();
        assert_eq!(f.result.as_deref(), Some("kept"));
        assert_eq!(f.trace, Some(Trace(vec![Stamp::new(Stage::Result, 5)])));
        let f: ContainerOutput =
            serde_json::from_str(r#"{"status":"success","result":"kept","trace":7}"#).unwrap();
        assert_eq!(f.trace, Some(Trace::default()));
    }

    #[test]
    fn hook_lines_parse_with_and_without_memory() {
        let text = format!(
            "{}{}garbage\nhook Nope 1 2\nhook Stop 1\n",
            hook_line("UserPromptSubmit", 10, 40, Some((20, 30))),
            hook_line("Stop", 50, 60, None)
        );
        let got: Vec<_> = parse_hook_lines(&text)
            .into_iter()
            .map(|s| (s.stage, s.at_us, s.hook.unwrap()))
            .collect();
        let ups = || "UserPromptSubmit".to_string();
        assert_eq!(
            got,
            vec![
                ("hook_start", 10, ups()),
                ("hook_end", 40, ups()),
                ("memory_asked", 20, ups()),
                ("memory_received", 30, ups()),
                ("hook_start", 50, "Stop".into()),
                ("hook_end", 60, "Stop".into()),
            ]
        );
    }
}
