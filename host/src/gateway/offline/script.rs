//! A command's script: which tool call comes next, worked out from the
//! results of the calls already in the conversation ([`next_step`]), so
//! the offline model keeps no state between requests. Most commands are
//! one call and a report; `g2:remember` is a Read, then a Write.

use serde_json::{Value, json};

use super::clip;
use super::commands::{Command, help_text, label};
use super::request::Outcome;

/// A tool call the model wants, or the line it reports for a finished command.
pub(super) enum Next {
    Call { name: String, input: Value },
    Done(String),
}

/// `p` as one word for a POSIX shell.
fn shell_quote(p: &str) -> String {
    format!("'{}'", p.replace('\'', "'\\''"))
}

/// Decides a command's next step from the results of its steps so far.
pub(super) fn next_step(cmd: &Command, done: &[Outcome], cwd: &str) -> Next {
    let mcp = |tool: &str, input: Value| Next::Call {
        name: format!("mcp__g2__{tool}"),
        input,
    };
    let report = |label: String| match done.last() {
        Some(o) if o.is_error => Next::Done(format!("{label} failed: {}", clip(&o.text))),
        Some(o) => Next::Done(format!("{label}: {}", clip(&o.text))),
        None => Next::Done(format!("{label}: no result")),
    };
    match cmd {
        Command::Help => Next::Done(help_text()),
        // Answered from the request itself (`answer`).
        Command::Context => Next::Done(String::new()),
        Command::Invalid { line, why } => {
            Next::Done(format!("`{line}` {why}. Send g2:help for the commands."))
        }
        _ if !done.is_empty() && !matches!(cmd, Command::Remember(_)) => report(label(cmd)),
        Command::Bash(c) => Next::Call {
            name: "Bash".into(),
            input: json!({ "command": c, "description": "Run a command for g2:bash" }),
        },
        Command::Attachments(paths) if paths.is_empty() => {
            Next::Done("g2:attachments: no files came with these messages".into())
        }
        Command::Attachments(paths) => Next::Call {
            name: "Bash".into(),
            input: json!({
                "command": format!("ls -l -- {}", paths.iter().map(|p| shell_quote(p)).collect::<Vec<_>>().join(" ")),
                "description": "List the files that came with the messages",
            }),
        },
        Command::Clear(name) => mcp("clear_session", json!({ "name": name })),
        Command::Sessions => mcp("list_sessions", json!({})),
        Command::MemorySearch(q) => mcp("memory_search", json!({ "query": q })),
        Command::MemoryTimeline(x) => {
            // An id (o12, p34, s3) or a question.
            let is_id = x.len() > 1
                && x.starts_with(['o', 'p', 's'])
                && x[1..].chars().all(|c| c.is_ascii_digit());
            if is_id {
                mcp("memory_timeline", json!({ "id": x }))
            } else {
                mcp("memory_timeline", json!({ "query": x }))
            }
        }
        Command::MemoryGet(ids) => mcp("memory_get", json!({ "ids": ids })),
        Command::MemoryRemember(t) => mcp("remember", json!({ "text": t })),
        Command::MemoryForget(id) => mcp("forget", json!({ "id": id })),
        Command::Resume {
            history_id,
            save_as,
        } => {
            let mut input = json!({ "history_id": history_id });
            if let Some(s) = save_as {
                input["save_current_as"] = json!(s);
            }
            mcp("resume_session", input)
        }
        Command::Search(q) => mcp("search_sessions", json!({ "query": q })),
        Command::Send(t) => mcp("send_message", json!({ "text": t })),
        Command::SendTo { chat_jid, text } => mcp(
            "send_message",
            json!({ "text": text, "chat_jid": chat_jid }),
        ),
        Command::Schedule {
            kind,
            value,
            prompt,
            group_folder,
            group_context,
        } => {
            let mut input =
                json!({ "schedule_type": kind, "schedule_value": value, "prompt": prompt });
            if let Some(f) = group_folder {
                input["group_folder"] = json!(f);
            }
            if *group_context {
                input["context_mode"] = json!("group");
            }
            mcp("schedule_task", input)
        }
        Command::Tasks => mcp("list_tasks", json!({})),
        Command::Pause(id) => mcp("pause_task", json!({ "task_id": id })),
        Command::Unpause(id) => mcp("resume_task", json!({ "task_id": id })),
        Command::Cancel(id) => mcp("cancel_task", json!({ "task_id": id })),
        Command::Register { folder, name } => {
            mcp("register_group", json!({ "folder": folder, "name": name }))
        }
        Command::Tool { name, input } => Next::Call {
            name: name.clone(),
            input: input.clone(),
        },
        Command::Remember(text) => {
            let path = format!("{}/CLAUDE.md", cwd.trim_end_matches('/'));
            match done {
                // Claude Code lets Write replace a file only after a Read.
                [] => Next::Call {
                    name: "Read".into(),
                    input: json!({ "file_path": path }),
                },
                [read] => {
                    let old = if read.is_error {
                        String::new()
                    } else {
                        strip_read_output(&read.text)
                    };
                    let mut content = old.trim_end().to_string();
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(text.trim());
                    content.push('\n');
                    Next::Call {
                        name: "Write".into(),
                        input: json!({ "file_path": path, "content": content }),
                    }
                }
                [.., last] if last.is_error => {
                    Next::Done(format!("g2:remember failed: {}", clip(&last.text)))
                }
                _ => Next::Done(format!("g2:remember: added to {path}: {}", text.trim())),
            }
        }
    }
}

/// Claude Code's Read output numbers lines (`     1\t…` or `     1→…`) and
/// may add `<system-reminder>` blocks; returns the file's text.
fn strip_read_output(out: &str) -> String {
    let mut lines = Vec::new();
    for l in out.lines() {
        let t = l.trim_start();
        let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            continue;
        }
        let after = &t[digits..];
        if let Some(rest) = after.strip_prefix('\t').or_else(|| after.strip_prefix('→')) {
            lines.push(rest);
        }
    }
    lines.join("\n")
}
