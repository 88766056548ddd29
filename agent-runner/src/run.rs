//! `g2-agent run`: one container's life. Reads the container input from
//! stdin, starts Claude Code with stream-json in and out, and relays:
//!
//! - each `result` becomes an output frame, followed by the idle frame
//!   (`result: null`) that tells the host the turn is over;
//! - each prompt is captured and given the group's memory on its way to
//!   Claude Code, and each successful reply captured ([`crate::prompt`]);
//! - a new session id is announced at once in a `result: null` frame, so
//!   the host points the group at it before the first turn ends;
//! - messages the host drops into `ipc/input/` are queued and written to
//!   Claude Code's stdin only between turns, never into a running turn;
//! - `_close` lets the current turn and the queue finish, then closes
//!   Claude Code's stdin so it exits cleanly.
//!
//! A resumed session Claude Code cannot find is reported as an error frame
//! whose `error` starts with [`STALE_SESSION`], so the host can clear the
//! pointer and retry once, fresh.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};

use g2_core::wire::{ContainerInput, ContainerOutput, OutputStatus};

use g2_core::trace::Stage;

use crate::inbox::{self, Item};
use crate::paths::Paths;
use crate::prompt::Prompts;
use crate::trace::Turn;

/// Start of the `error` of a frame reporting a session Claude Code could
/// not find.
pub use g2_core::wire::STALE_SESSION;

/// Placeholder for Claude Code's required key. Not a credential: the
/// gateway ignores it and adds the host's own.
const PLACEHOLDER_KEY: &str = "g2-gateway";

/// Largest container input accepted on stdin.
const MAX_INPUT: u64 = 16 << 20;

/// How much of Claude Code's stderr is kept for error reports.
const STDERR_TAIL: usize = 16 << 10;

fn emit(frame: &ContainerOutput) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(frame.frame().as_bytes());
    let _ = out.flush();
}

fn error_frame(error: String, session: Option<String>) -> ContainerOutput {
    ContainerOutput {
        status: OutputStatus::Error,
        result: None,
        new_session_id: session,
        error: Some(error),
        trace: None,
    }
}

/// Runs the container's agent; returns the process exit code.
pub async fn run(paths: Paths) -> i32 {
    let mut raw = String::new();
    if let Err(e) = tokio::io::stdin()
        .take(MAX_INPUT)
        .read_to_string(&mut raw)
        .await
    {
        emit(&error_frame(format!("reading container input: {e}"), None));
        return 1;
    }
    let input: ContainerInput = match serde_json::from_str(&raw) {
        Ok(i) => i,
        Err(e) => {
            emit(&error_frame(
                format!("container input is not valid: {e}"),
                None,
            ));
            return 1;
        }
    };
    match drive(&paths, input).await {
        Ok(code) => code,
        Err(e) => {
            emit(&error_frame(format!("{e:#}"), None));
            1
        }
    }
}

async fn drive(paths: &Paths, input: ContainerInput) -> anyhow::Result<i32> {
    use anyhow::Context;
    let port = crate::proxy::start(paths.model_socket())
        .await
        .context("starting the model proxy")?;
    let (mut inbox, _watcher) =
        inbox::watch(&paths.input(), &paths.errors()).context("watching ipc/input")?;

    let mut cmd = Command::new(&paths.claude);
    cmd.current_dir(paths.group())
        .args([
            "--print",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(["--permission-mode", "bypassPermissions"])
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", PLACEHOLDER_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        // g2 is the group's memory: Claude Code's own would keep a second
        // one in the group's `.claude`, unredacted and never recalled, and
        // read it on every turn.
        .env("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
        // Offer every tool up front: with tool search on, MCP tools are
        // deferred behind ToolSearch and the g2 tools are not in the list.
        .env("ENABLE_TOOL_SEARCH", "false")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(id) = &input.session_id {
        cmd.args(["--resume", id]);
    }
    let mut trace = Turn::start(paths);
    if let Some(t) = &trace {
        cmd.env(g2_core::wire::ENV_HOOK_STAMPS, t.hooks_file());
    }
    // The g2 tools: this same binary as an MCP server.
    if let Ok(exe) = std::env::current_exe() {
        cmd.args(["--mcp-config", &crate::mcp::config_json(&exe)]);
    }
    if !input.is_main
        && let Ok(global) = std::fs::read_to_string(paths.global_memory())
        && !global.trim().is_empty()
    {
        cmd.args(["--append-system-prompt", &global]);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", paths.claude.display()))?;
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take().context("claude stdout")?;
    let stderr = child.stderr.take().context("claude stderr")?;

    // Keep the tail of stderr for error reports, and pass it on.
    let tail = Arc::new(Mutex::new(String::new()));
    let tail_w = tail.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            eprintln!("claude: {l}");
            let mut t = tail_w
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            t.push_str(&l);
            t.push('\n');
            if t.len() > STDERR_TAIL {
                let cut = t.len() - STDERR_TAIL;
                let cut = (cut..t.len())
                    .find(|i| t.is_char_boundary(*i))
                    .unwrap_or(t.len());
                t.drain(..cut);
            }
        }
    });

    let mut session = input.session_id.clone();
    let mut queue: VecDeque<String> = VecDeque::new();
    let mut in_turn = true;
    let mut closing = false;
    let mut prompts = Prompts::from_env(paths);
    send(
        &mut stdin,
        &input.prompt,
        &mut trace,
        &mut prompts,
        session.as_deref(),
    )
    .await;
    let mut lines = BufReader::new(stdout).lines();
    // Between turns with nothing queued, the host closes us when it wants;
    // this only ends an agent whose host died (no `_close` will come).
    let idle_exit = input.idle_exit_secs.map(std::time::Duration::from_secs);
    let mut idle_since = tokio::time::Instant::now();
    loop {
        let idle_deadline =
            idle_since + idle_exit.unwrap_or(std::time::Duration::from_secs(365 * 86_400));
        tokio::select! {
            _ = tokio::time::sleep_until(idle_deadline), if idle_exit.is_some() && !in_turn && queue.is_empty() && stdin.is_some() => {
                eprintln!("g2-agent: no input for {:?} between turns and no close from the host; finishing", idle_exit.unwrap_or_default());
                closing = true;
                stdin = None;
            }
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                match (v["type"].as_str(), v["subtype"].as_str()) {
                    (Some("system"), Some("init")) => {
                        if let Some(id) = v["session_id"].as_str() {
                            prompts.session(id);
                            if session.as_deref() != Some(id) {
                                session = Some(id.to_string());
                                // Tell the host the session at once, so a tool
                                // acting on it (clear_session) works in the first turn.
                                emit(&ContainerOutput { status: OutputStatus::Success, result: None, new_session_id: session.clone(), error: None, trace: None });
                            }
                        }
                        // A g2 tool server that did not connect is worth a line in the logs.
                        for s in v["mcp_servers"].as_array().into_iter().flatten() {
                            if s["status"] != "connected" {
                                eprintln!("g2-agent: MCP server {} is {}", s["name"], s["status"]);
                            }
                        }
                    }
                    (Some("result"), subtype) => {
                        if let Some(id) = v["session_id"].as_str() {
                            session = Some(id.to_string());
                            prompts.session(id);
                        }
                        // Exactly one answer frame per turn (the host pairs
                        // them with its prompts in order): a success always
                        // carries a text, possibly empty.
                        let text = v["result"].as_str().map(str::to_string);
                        let failed = v["is_error"] == true || subtype.is_some_and(|s| s != "success");
                        let mut frame = if failed {
                            let why = text.filter(|t| !t.trim().is_empty()).unwrap_or_else(|| format!("the turn failed ({})", subtype.unwrap_or("error")));
                            error_frame(why, session.clone())
                        } else {
                            let text = text.unwrap_or_default();
                            prompts.replied(session.as_deref(), &text);
                            ContainerOutput { status: OutputStatus::Success, result: Some(text), new_session_id: session.clone(), error: None, trace: None }
                        };
                        if let Some(t) = &mut trace {
                            t.stamp(Stage::Result);
                            frame.trace = Some(t.take());
                        }
                        emit(&frame);
                        emit(&ContainerOutput { status: OutputStatus::Success, result: None, new_session_id: session.clone(), error: None, trace: None });
                        in_turn = false;
                        idle_since = tokio::time::Instant::now();
                        if failed {
                            // The host retries from its cursor: the queued
                            // messages must not be answered here as well.
                            queue.clear();
                            closing = true;
                            stdin = None;
                            continue;
                        }
                        if let Some(next) = queue.pop_front() {
                            send(&mut stdin, &next, &mut trace, &mut prompts, session.as_deref()).await;
                            in_turn = true;
                        } else if closing {
                            stdin = None;
                        }
                    }
                    _ => {}
                }
            }
            item = inbox.recv(), if stdin.is_some() => {
                if let (Some(t), Some(Item::Message(_))) = (&mut trace, &item) {
                    t.stamp(Stage::RunnerRead);
                }
                match item {
                    Some(Item::Message(text)) if in_turn => queue.push_back(text),
                    Some(Item::Message(text)) => {
                        send(&mut stdin, &text, &mut trace, &mut prompts, session.as_deref()).await;
                        in_turn = true;
                    }
                    Some(Item::Close | Item::Replaced) | None => {
                        closing = true;
                        if !in_turn && queue.is_empty() {
                            // Claude Code exits once its stdin ends.
                            stdin = None;
                        }
                    }
                }
            }
        }
    }
    let status = child.wait().await.context("waiting for claude")?;
    // Messages taken from input/ but never sent go back, in order, for
    // whoever runs next (the host's fresh retry of a stale session).
    for text in queue {
        let msg =
            serde_json::to_vec(&g2_core::wire::InputMessage::Message { text }).unwrap_or_default();
        if let Err(e) =
            crate::paths::write_atomic(&paths.input(), &g2_core::ipc::timestamped_name(), &msg)
        {
            eprintln!("g2-agent: could not put an unsent message back: {e}");
        }
    }
    // Let the stderr task catch up with the last lines.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let tail = tail
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if tail.contains("No conversation found with session ID") {
        emit(&error_frame(
            format!("{STALE_SESSION}: {}", tail.trim()),
            None,
        ));
        return Ok(3);
    }
    if !status.success() || in_turn {
        emit(&error_frame(
            format!(
                "{} ({status}) {}: {}",
                g2_core::wire::AGENT_DIED,
                if in_turn { "during a turn" } else { "" },
                tail.trim()
            ),
            session,
        ));
        return Ok(1);
    }
    Ok(0)
}

/// Writes `text` to Claude Code as the next prompt (captured, with its
/// memory: [`Prompts::line`]).
async fn send(
    stdin: &mut Option<ChildStdin>,
    text: &str,
    trace: &mut Option<Turn>,
    prompts: &mut Prompts,
    session: Option<&str>,
) {
    let Some(s) = stdin.as_mut() else { return };
    let line = prompts.line(text, trace).await;
    if s.write_all(line.as_bytes()).await.is_err() || s.flush().await.is_err() {
        *stdin = None;
        return;
    }
    prompts.sent(session);
    if let Some(t) = trace {
        t.stamp(Stage::StdinWritten);
    }
    // For the follow-up latency benchmark: when each message reached claude.
    if std::env::var_os(g2_core::wire::ENV_AGENT_TRACE).is_some() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        eprintln!(
            "g2-agent trace: stdin {} {}",
            t.as_nanos(),
            text.chars().take(40).collect::<String>()
        );
    }
}
