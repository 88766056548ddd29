//! `g2-agent hook <event>`: Claude Code's hooks, registered by the host in
//! the group's `.claude/settings.json`. A hook must never hurt the agent: it
//! reads its input with a bound, does a few milliseconds of work, never
//! spawns anything, reports problems on stderr and always exits 0.
//!
//! - `SessionStart`, `PostToolUse`, `PostToolUseFailure`, `SubagentStop`
//!   and `SessionEnd` write one `capture` event ([`crate::capture`]:
//!   stripped, redacted, bounded) into `ipc/events/`; a skipped tool writes
//!   nothing. `SessionStart` also asks the host for the group's memory.
//! - A prompt and a turn's reply are captured by the runner
//!   ([`crate::prompt`]), which also adds the memory for the prompt: no hook
//!   process on a turn's path. `UserPromptSubmit` and `Stop` are still
//!   handled here when Claude Code runs them (settings an older host wrote).
//! - `PreCompact` archives the transcript about to be compacted into
//!   `/workspace/group/conversations/` with the archiver the host uses and
//!   writes an `archive` event so the host indexes it and lists it.
//! - Input that is not a JSON object writes nothing.

use std::io::Read;
use std::path::Path;

use g2_core::archive::{self, ArchiveOptions};
use g2_core::confined::Dir;
use g2_core::privacy::Redactor;
use g2_core::transcript;
use g2_core::wire::{self, AgentEvent, Captured, HookInput};

use crate::capture;
use crate::paths::{Paths, event_name, write_atomic};

/// Largest hook input read; a longer one is cut, fails to parse and
/// writes nothing.
const MAX_INPUT: u64 = 4 << 20;

pub fn run(paths: &Paths, event: &str) -> i32 {
    let traced = crate::trace::Hook::start();
    let mut raw = Vec::new();
    let _ = std::io::stdin().take(MAX_INPUT).read_to_end(&mut raw);
    if let Err(e) = handle(paths, event, &raw) {
        eprintln!("g2-agent hook {event}: {e:#}");
    }
    if let Some(t) = traced {
        t.done(event);
    }
    0
}

fn handle(paths: &Paths, event: &str, raw: &[u8]) -> anyhow::Result<()> {
    let input: serde_json::Value = serde_json::from_slice(raw)?;
    anyhow::ensure!(input.is_object(), "hook input is not a JSON object");
    if event == wire::PRE_COMPACT {
        return pre_compact(paths, HookInput::parse(event, raw));
    }
    let skip = capture::skipped_tools(std::env::var(wire::ENV_SKIP_TOOLS).ok());
    let captured = capture::capture(event, &input, &Redactor::default(), &skip);
    if matches!(event, wire::SESSION_START | wire::USER_PROMPT_SUBMIT) {
        inject(paths, event, &input, captured.as_ref());
    }
    // The group's capture is off: nothing is recorded.
    let Some(captured) = captured.filter(|_| crate::prompt::switched_on(wire::ENV_CAPTURE)) else {
        return Ok(());
    };
    write_capture(paths, input["session_id"].as_str(), &now(), captured)
}

/// Asks the host for the group's memory (within `inject::wait()`) and
/// prints it for Claude Code; nothing when there is none. The prompt sent
/// is what capture kept (private spans and secrets already out), a routed
/// one as the people's texts without their names, which would only dilute
/// the question.
fn inject(paths: &Paths, event: &str, input: &serde_json::Value, captured: Option<&Captured>) {
    let said = match captured {
        Some(Captured::Prompt { text, .. }) if !text.is_empty() => {
            Some(match g2_core::envelope::read(text) {
                Some(env) => env.texts(),
                None => text.clone(),
            })
        }
        _ => None,
    };
    let prompt = said.as_deref();
    let request = serde_json::json!({
        "event": event,
        "source": input["source"].as_str(),
        "prompt": prompt,
    });
    if event == wire::USER_PROMPT_SUBMIT && prompt.is_none_or(str::is_empty) {
        return;
    }
    let asked = crate::trace::hook_traced().then(g2_core::trace::now_us);
    let answer = crate::inject::ask(&paths.model_socket(), &request, crate::inject::wait());
    if let Some(asked) = asked {
        crate::trace::memory(asked, g2_core::trace::now_us());
    }
    if let Some(context) = answer {
        println!("{}", crate::inject::output(event, &context));
    }
}

fn pre_compact(paths: &Paths, input: HookInput) -> anyhow::Result<()> {
    let Some(t) = &input.transcript_path else {
        anyhow::bail!("PreCompact without a transcript_path: nothing to archive");
    };
    archive_transcript(
        paths,
        Path::new(t),
        input.session_id.as_deref(),
        input.trigger.as_deref(),
    )
}

fn archive_transcript(
    paths: &Paths,
    transcript_path: &Path,
    session: Option<&str>,
    trigger: Option<&str>,
) -> anyhow::Result<()> {
    let parsed = transcript::parse_file(transcript_path)?;
    // Dated in the group's timezone, as the host dates what it archives.
    let tz: chrono_tz::Tz = std::env::var(wire::ENV_TIMEZONE)
        .ok()
        .and_then(|z| z.parse().ok())
        .unwrap_or(chrono_tz::Tz::UTC);
    let now = chrono::Utc::now().with_timezone(&tz);
    let opts = ArchiveOptions {
        assistant_name: std::env::var(wire::ENV_ASSISTANT_NAME)
            .unwrap_or_else(|_| wire::DEFAULT_ASSISTANT_NAME.into()),
        ..ArchiveOptions::default()
    };
    let title = archive::title(None, &parsed, &now);
    let body = archive::render(&title, &parsed, &now, &opts);
    let dir = paths.group().join(wire::CONVERSATIONS_DIR);
    let stem = archive::stem(&title, &now);
    std::fs::create_dir_all(&dir)?;
    let name = archive::write_new(
        &Dir::open(&dir)?,
        &now.format("%Y-%m-%d").to_string(),
        &stem,
        &body,
        &|_| false,
    )?;
    let notice = AgentEvent::Archive {
        // Relative to the group folder; the host resolves and checks it.
        path: format!("{}/{name}", wire::CONVERSATIONS_DIR),
        title,
        session_id: session.map(str::to_string),
        compact_trigger: trigger.map(str::to_string),
    };
    write_event(paths, &notice)
}

/// Now, as a capture's `at`.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Writes one capture event that happened `at`.
pub fn write_capture(
    paths: &Paths,
    session_id: Option<&str>,
    at: &str,
    event: Captured,
) -> anyhow::Result<()> {
    let record = AgentEvent::Capture {
        session_id: session_id.map(|s| archive::truncate(s, wire::MAX_CAPTURE_NAME).into_owned()),
        at: at.to_string(),
        event,
    };
    write_event(paths, &record)
}

/// Drops one event file into `events/` (written atomically, never half-read).
fn write_event(paths: &Paths, event: &AgentEvent) -> anyhow::Result<()> {
    write_atomic(
        &paths.events(),
        &event_name(),
        serde_json::to_string(event)?.as_bytes(),
    )?;
    Ok(())
}
