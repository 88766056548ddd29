//! Hook cost: the built `g2-agent hook <event>` process, as Claude Code
//! runs it for every hook (process start included), with realistic inputs
//! on stdin and a workspace in a temp dir (`G2_WORKSPACE`), p50/p99 per
//! event type. Each run writes its event file, as in the container.
//!
//! `cargo build --release -p g2-agent && cargo bench -p g2-host --bench hook`
//! (`G2_BENCH_RUNS`, default 1000; `G2_AGENT_BIN` names another binary).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Samples, command, env_or, fmt_dur};

/// `g2-agent` from the same target folder as this bench (`release/` under
/// `cargo bench`), or `$G2_AGENT_BIN`.
fn agent_binary() -> PathBuf {
    let bin = std::env::var_os("G2_AGENT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            // target/release/deps/hook-… → target/release/g2-agent
            exe.parent().unwrap().parent().unwrap().join("g2-agent")
        });
    assert!(
        bin.exists(),
        "{} missing: cargo build --release -p g2-agent",
        bin.display()
    );
    bin
}

/// One run of the hook with `input` on stdin: its wall time.
fn run_once(agent: &Path, ws: &Path, event: &str, input: &[u8]) -> Duration {
    let t = Instant::now();
    let mut child = command(agent)
        .args(["hook", event])
        .env(g2_core::wire::ENV_WORKSPACE, ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let status = child.wait().unwrap();
    let d = t.elapsed();
    assert_eq!(status.code(), Some(0), "{event}");
    d
}

fn inputs(ws: &Path) -> Vec<(&'static str, &'static str, Value)> {
    let transcript = ws.join("s1.jsonl");
    let lines = [
        json!({"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "Plan the quarterly tax filing"}}),
        json!({"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [{"type": "text", "text": "Here is a plan: gather receipts, reconcile accounts, file by the 15th."}]}}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&transcript, body).unwrap();
    let base = |event: &str| {
        json!({
            "session_id": "0f9c2a8e-5a2b-4c4e-9d7e-3b1f6a2c9e10",
            "transcript_path": transcript.to_str().unwrap(),
            "cwd": "/workspace/group",
            "permission_mode": "bypassPermissions",
            "hook_event_name": event,
        })
    };
    let with = |event: &str, extra: Value| {
        let mut v = base(event);
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let file: String = (0..80)
        .map(|i| {
            format!("    {i:>4}  let total = receipts.iter().map(|r| r.amount).sum::<i64>();\n")
        })
        .collect();
    vec![
        (
            "SessionStart",
            "SessionStart",
            with("SessionStart", json!({"source": "startup"})),
        ),
        (
            "UserPromptSubmit",
            "UserPromptSubmit",
            with(
                "UserPromptSubmit",
                json!({"prompt": "<messages>\n<message sender=\"Ann\" time=\"2026-01-01T09:00:00Z\">we need milk, and check the <private>pin 4417</private> budget with token=abc123</message>\n</messages>"}),
            ),
        ),
        (
            "PostToolUse (Bash)",
            "PostToolUse",
            with(
                "PostToolUse",
                json!({
                    "tool_name": "Bash", "tool_use_id": "toolu_01ABC",
                    "tool_input": {"command": "ls -la /workspace/group && git status", "description": "List files"},
                    "tool_response": {"stdout": file, "stderr": "", "interrupted": false, "isImage": false},
                }),
            ),
        ),
        (
            "PostToolUse (Read, 6 KB)",
            "PostToolUse",
            with(
                "PostToolUse",
                json!({
                    "tool_name": "Read", "tool_use_id": "toolu_01ABD",
                    "tool_input": {"file_path": "/workspace/group/src/tax.rs"},
                    "tool_response": {"type": "text", "file": {"filePath": "/workspace/group/src/tax.rs", "content": file, "numLines": 80, "startLine": 1, "totalLines": 80}},
                }),
            ),
        ),
        (
            "Stop",
            "Stop",
            with(
                "Stop",
                json!({"stop_hook_active": false, "last_assistant_message": "Here is a plan: gather receipts, reconcile accounts, file by the 15th."}),
            ),
        ),
        (
            "Stop (reply from transcript)",
            "Stop",
            with("Stop", json!({"stop_hook_active": false})),
        ),
        (
            "SubagentStop",
            "SubagentStop",
            with(
                "SubagentStop",
                json!({"stop_hook_active": false, "agent_id": "a1b2c3", "agent_type": "Explore",
                       "agent_transcript_path": transcript.to_str().unwrap(),
                       "last_assistant_message": "Found 3 files mentioning receipts."}),
            ),
        ),
        (
            "PreCompact (archives)",
            "PreCompact",
            with(
                "PreCompact",
                json!({"trigger": "manual", "custom_instructions": ""}),
            ),
        ),
        (
            "SessionEnd",
            "SessionEnd",
            with("SessionEnd", json!({"reason": "other"})),
        ),
    ]
}

fn main() {
    let runs: usize = env_or("G2_BENCH_RUNS", 1000);
    let agent = agent_binary();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    for d in ["group", "ipc/events"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    println!("g2-agent hook <event>, process start included, {runs} runs each");
    println!(
        "  {:<30} {:>10} {:>10} {:>10}",
        "event", "p50", "p99", "max"
    );
    for (label, event, input) in inputs(ws) {
        let input = input.to_string().into_bytes();
        run_once(&agent, ws, event, &input);
        let s = Samples::of(
            (0..runs)
                .map(|_| run_once(&agent, ws, event, &input))
                .collect(),
        );
        // Every run wrote its event file (PreCompact: its archive notice,
        // and the archive itself).
        let written = std::fs::read_dir(ws.join("ipc/events")).unwrap().count();
        assert_eq!(written, runs + 1, "{label}");
        std::fs::remove_dir_all(ws.join("ipc/events")).unwrap();
        std::fs::create_dir_all(ws.join("ipc/events")).unwrap();
        let _ = std::fs::remove_dir_all(ws.join("group/conversations"));
        println!(
            "  {label:<30} {:>10} {:>10} {:>10}",
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.99)),
            fmt_dur(s.at(1.0))
        );
    }
}
