//! The built `g2-agent hook <event>` process, as Claude Code runs it: input
//! on stdin, a workspace moved by `G2_WORKSPACE`. Whatever it is given, it
//! exits 0; what it writes is one stripped, redacted event file.

#![allow(clippy::unwrap_used)] // a test crate: helpers panic like tests

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use g2_core::wire::{AgentEvent, Captured};

const CAPTURED: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SubagentStop",
    "SessionEnd",
    "PreCompact",
];

/// Runs the hook with `input` on stdin; its exit code.
fn hook(workspace: &Path, event: &str, input: Vec<u8>) -> i32 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_g2-agent"))
        .args(["hook", event])
        .env("G2_WORKSPACE", workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The hook stops reading at its bound: the rest meets a closed pipe.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let status = child.wait().unwrap();
    writer.join().unwrap();
    status.code().expect("exited, not killed")
}

fn events(workspace: &Path) -> Vec<String> {
    match std::fs::read_dir(workspace.join("ipc/events")) {
        Ok(rd) => rd
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn garbage_and_oversized_input_exit_0_and_write_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let huge = {
        let mut v = br#"{"session_id":"s","prompt":""#.to_vec();
        v.resize(10 << 20, b'a');
        v.extend_from_slice(br#""}"#);
        v
    };
    for event in CAPTURED {
        for input in [
            b"\xff\xfe not json [".to_vec(),
            b"[1,2,3]".to_vec(),
            Vec::new(),
            huge.clone(),
        ] {
            assert_eq!(hook(ws.path(), event, input), 0, "{event}");
        }
    }
    assert_eq!(events(ws.path()), Vec::<String>::new());
}

#[test]
fn an_unwritable_events_folder_still_exits_0() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("ipc")).unwrap();
    // A file where the folder should be: no permission bit stops root.
    std::fs::write(ws.path().join("ipc/events"), "").unwrap();
    let input = br#"{"session_id":"s","prompt":"hello"}"#.to_vec();
    assert_eq!(hook(ws.path(), "UserPromptSubmit", input), 0);
    assert_eq!(
        std::fs::read(ws.path().join("ipc/events")).unwrap(),
        b"",
        "nothing written through it"
    );
}

#[test]
fn one_clean_event_file_per_captured_event() {
    let ws = tempfile::tempdir().unwrap();
    let input = serde_json::json!({
        "session_id": "s1",
        "transcript_path": "/home/node/.claude/projects/p/s1.jsonl",
        "cwd": "/workspace/group",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_input": {"command": "echo <private>my pin is 4417</private> done"},
        "tool_response": {"stdout": "key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n", "stderr": "", "interrupted": false},
    });
    assert_eq!(hook(ws.path(), "PostToolUse", input.to_string().into()), 0);
    let skipped = serde_json::json!({"session_id": "s1", "tool_name": "TodoWrite", "tool_input": {"todos": []}});
    assert_eq!(
        hook(ws.path(), "PostToolUse", skipped.to_string().into()),
        0
    );
    let written = events(ws.path());
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(
        !written[0].contains("4417") && !written[0].contains("AAAAAAAA"),
        "{}",
        written[0]
    );
    let AgentEvent::Capture {
        session_id,
        event:
            Captured::Tool {
                tool,
                input,
                output,
                ok,
                ..
            },
        ..
    } = serde_json::from_str(&written[0]).unwrap()
    else {
        panic!("{}", written[0])
    };
    assert_eq!(session_id.as_deref(), Some("s1"));
    assert_eq!(tool, "Bash");
    assert_eq!(input["command"], "echo  done");
    assert_eq!(output, "key [redacted:anthropic-key]\n");
    assert!(ok);
}
