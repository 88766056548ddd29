//! The offline model: g2's built-in, deterministic stand-in for a real model.
//! It needs no network and no account, and is good enough to drive the real
//! Claude Code CLI through every g2 feature.
//!
//! Its whole behaviour is a function of the request ([`answer`]):
//! - A request its [`Delegate`] takes is answered by it: the host wires in
//!   memory extraction's (`memory::extract::model::answer_offline`), so an
//!   extraction request gets the observations or summary the offline rules
//!   find, as the JSON asked for. The gateway itself knows nothing of
//!   memory.
//! - A compaction request (Claude Code's "create a detailed summary of the
//!   conversation" prompt) gets an `<analysis>`/`<summary>` reply built from
//!   the messages it was sent.
//! - The newest user prompt is read for command lines `g2:<command> <args>`
//!   (the command language, documented in docs/gateway.md). Each command becomes
//!   one or more tool calls, made one per turn, in order. Which step comes
//!   next is worked out from the tool results already in the conversation,
//!   so the model keeps no state between requests.
//! - When all commands are done, the reply is text that contains each
//!   result, and the turn ends.
//! - A prompt without commands gets a short reply quoting it.

use axum::http::{HeaderValue, StatusCode, header};
use bytes::Bytes;
use serde_json::{Value, json};

use futures_util::future::BoxFuture;

use super::provider::{ModelRequest, Provider, Reply};

/// One content block of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

/// A complete assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub blocks: Vec<Block>,
    /// `end_turn` or `tool_use`.
    pub stop_reason: &'static str,
}

impl Answer {
    fn text(s: String) -> Self {
        Answer {
            blocks: vec![Block::Text(s)],
            stop_reason: "end_turn",
        }
    }
}

/// The commands, for `g2:help` and error replies.
pub const COMMANDS: &[(&str, &str)] = &[
    ("g2:help", "this list"),
    (
        "g2:bash <command>",
        "run a shell command with the Bash tool",
    ),
    (
        "g2:remember <text>",
        "append a line to the group's CLAUDE.md (Read, then Write)",
    ),
    (
        "g2:clear <name>",
        "archive this session under <name> and start a fresh one",
    ),
    ("g2:sessions", "list earlier sessions"),
    (
        "g2:resume <history-id> [save-as]",
        "switch back to an earlier session",
    ),
    ("g2:search <query>", "search archived conversations"),
    (
        "g2:context",
        "show the memory g2 injected into this request (<g2-memory> blocks)",
    ),
    ("g2:memory-search <question>", "search the group's memory"),
    (
        "g2:memory-timeline <id|question>",
        "what happened around a memory",
    ),
    ("g2:memory-get <id> [id…]", "full records of memories"),
    (
        "g2:memory-remember <text>",
        "remember something for good (an observation)",
    ),
    ("g2:memory-forget <id>", "forget an observation"),
    ("g2:send <text>", "send a message to the chat right away"),
    (
        "g2:send-to <chat-jid> <text>",
        "send a message to another chat (main group only)",
    ),
    (
        "g2:schedule <cron|interval|once> <value> <prompt>",
        "schedule a task (a fresh session each run)",
    ),
    (
        "g2:schedule-group <cron|interval|once> <value> <prompt>",
        "schedule a task that runs in the group's conversation",
    ),
    (
        "g2:schedule-for <folder> <cron|interval|once> <value> <prompt>",
        "schedule a task for another group (main group only)",
    ),
    ("g2:tasks", "list scheduled tasks"),
    ("g2:pause <task-id>", "pause a scheduled task"),
    ("g2:unpause <task-id>", "resume a paused task"),
    ("g2:cancel <task-id>", "cancel a scheduled task"),
    (
        "g2:register <folder> <name>",
        "register a new group (main group only)",
    ),
];

/// Longest piece of a prompt or tool result repeated back.
const QUOTE_CHARS: usize = 2_000;

/// What Claude Code sends when it compacts a conversation.
const COMPACTION_MARKER: &str = "detailed summary of the conversation";

/// A parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Help,
    /// Shows the `<g2-memory>` blocks the request carries.
    Context,
    MemorySearch(String),
    MemoryTimeline(String),
    MemoryGet(Vec<String>),
    MemoryRemember(String),
    MemoryForget(String),
    Bash(String),
    Remember(String),
    Clear(String),
    Sessions,
    Resume {
        history_id: i64,
        save_as: Option<String>,
    },
    Search(String),
    Send(String),
    SendTo {
        chat_jid: String,
        text: String,
    },
    /// `g2:schedule`, `g2:schedule-group` (`group_context`) and
    /// `g2:schedule-for` (`group_folder`).
    Schedule {
        kind: String,
        value: String,
        prompt: String,
        group_folder: Option<String>,
        group_context: bool,
    },
    Tasks,
    Pause(String),
    Unpause(String),
    Cancel(String),
    Register {
        folder: String,
        name: String,
    },
    /// A line that names no command or misses arguments; the reply says why.
    Invalid {
        line: String,
        why: String,
    },
}

/// Reads the `g2:` command lines of a prompt, in order.
pub fn parse_commands(prompt: &str) -> Vec<Command> {
    prompt
        .lines()
        .filter_map(|l| l.trim().strip_prefix("g2:").map(|rest| (l.trim(), rest)))
        .map(|(line, rest)| parse_command(line, rest))
        .collect()
}

fn parse_command(line: &str, rest: &str) -> Command {
    let (word, args) = match rest.split_once(char::is_whitespace) {
        Some((w, a)) => (w, a.trim()),
        None => (rest.trim(), ""),
    };
    let invalid = |why: &str| Command::Invalid {
        line: line.to_string(),
        why: why.to_string(),
    };
    let need = |c: fn(String) -> Command, what: &str| {
        if args.is_empty() {
            invalid(&format!("needs {what}"))
        } else {
            c(args.to_string())
        }
    };
    match word {
        "help" => Command::Help,
        "context" => Command::Context,
        "memory-search" => need(Command::MemorySearch, "a question"),
        "memory-timeline" => need(Command::MemoryTimeline, "an id or a question"),
        "memory-get" => {
            let ids: Vec<String> = args.split_whitespace().map(str::to_string).collect();
            if ids.is_empty() {
                invalid("needs memory ids (from g2:memory-search)")
            } else {
                Command::MemoryGet(ids)
            }
        }
        "memory-remember" => need(Command::MemoryRemember, "some text"),
        "memory-forget" => one_word(args).map_or_else(
            || invalid("needs an observation id (from g2:memory-search)"),
            Command::MemoryForget,
        ),
        "bash" => need(Command::Bash, "a command"),
        "remember" => need(Command::Remember, "some text"),
        "clear" => need(Command::Clear, "a name"),
        "sessions" => Command::Sessions,
        "search" => need(Command::Search, "a query"),
        "send" => need(Command::Send, "some text"),
        "send-to" => match split_word(args) {
            Some((chat_jid, text)) => Command::SendTo { chat_jid, text },
            None => invalid("needs a chat jid and some text"),
        },
        "tasks" => Command::Tasks,
        "pause" => one_word(args).map_or_else(
            || invalid("needs a task id (from g2:tasks)"),
            Command::Pause,
        ),
        "unpause" => one_word(args).map_or_else(
            || invalid("needs a task id (from g2:tasks)"),
            Command::Unpause,
        ),
        "cancel" => one_word(args).map_or_else(
            || invalid("needs a task id (from g2:tasks)"),
            Command::Cancel,
        ),
        "register" => match split_word(args) {
            Some((folder, name)) => Command::Register { folder, name },
            None => invalid("needs a folder and a name"),
        },
        "resume" => {
            let (id, save_as) = match args.split_once(char::is_whitespace) {
                Some((id, s)) => (id, Some(s.trim().to_string()).filter(|s| !s.is_empty())),
                None => (args, None),
            };
            match id.trim_start_matches('#').parse::<i64>() {
                Ok(history_id) => Command::Resume {
                    history_id,
                    save_as,
                },
                Err(_) => invalid("needs a history id (a number from g2:sessions)"),
            }
        }
        "schedule" => {
            parse_schedule(args, "g2:schedule", None, false).unwrap_or_else(|why| invalid(&why.0))
        }
        "schedule-group" => parse_schedule(args, "g2:schedule-group", None, true)
            .unwrap_or_else(|why| invalid(&why.0)),
        "schedule-for" => match split_word(args) {
            Some((folder, rest)) => {
                parse_schedule(&rest, "g2:schedule-for <folder>", Some(folder), false)
                    .unwrap_or_else(|why| invalid(&why.0))
            }
            None => {
                invalid("usage: g2:schedule-for <folder> <cron|interval|once> <value> <prompt>")
            }
        },
        "" => invalid("names no command"),
        other => invalid(&format!("unknown command {other:?}")),
    }
}

/// The first word of `args` and the (non-empty) rest.
fn split_word(args: &str) -> Option<(String, String)> {
    let (word, rest) = args.split_once(char::is_whitespace)?;
    let rest = rest.trim();
    (!rest.is_empty()).then(|| (word.to_string(), rest.to_string()))
}

/// `args` when it is exactly one word.
fn one_word(args: &str) -> Option<String> {
    (!args.is_empty() && !args.contains(char::is_whitespace)).then(|| args.to_string())
}

/// `<cron|interval|once> <value> <prompt>` after `command`; a cron value is
/// five fields or a quoted string, other values one word or a quoted string.
fn parse_schedule(
    args: &str,
    command: &str,
    group_folder: Option<String>,
    group_context: bool,
) -> Result<Command, Refusal> {
    let usage = format!("usage: {command} <cron|interval|once> <value> <prompt>");
    let usage = usage.as_str();
    let (kind, rest) = args.split_once(char::is_whitespace).ok_or(usage)?;
    let kind = kind.to_ascii_lowercase();
    if !matches!(kind.as_str(), "cron" | "interval" | "once") {
        return Err(Refusal(format!("schedule type {kind:?}: {usage}")));
    }
    let rest = rest.trim_start();
    let (value, prompt) = if let Some(q) = rest.strip_prefix('"') {
        let end = q.find('"').ok_or("unclosed quote in schedule value")?;
        (q[..end].to_string(), q[end + 1..].trim())
    } else {
        let fields = if kind == "cron" { 5 } else { 1 };
        let mut words = rest.splitn(fields + 1, char::is_whitespace);
        let value: Vec<&str> = words.by_ref().take(fields).collect();
        (value.join(" "), words.next().unwrap_or("").trim())
    };
    if value.is_empty() || prompt.is_empty() {
        return Err(usage.into());
    }
    Ok(Command::Schedule {
        kind,
        value,
        prompt: prompt.to_string(),
        group_folder,
        group_context,
    })
}

/// A tool call the model wants, or the line it reports for a finished command.
enum Next {
    Call { name: String, input: Value },
    Done(String),
}

/// Result of one earlier tool call, as found in the conversation.
#[derive(Debug, Clone)]
struct Outcome {
    text: String,
    is_error: bool,
}

/// Decides a command's next step from the results of its steps so far.
fn next_step(cmd: &Command, done: &[Outcome], cwd: &str) -> Next {
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

fn label(cmd: &Command) -> String {
    match cmd {
        Command::Bash(c) => format!("g2:bash {c}"),
        Command::Clear(n) => format!("g2:clear {n}"),
        Command::Sessions => "g2:sessions".into(),
        Command::Resume { history_id, .. } => format!("g2:resume {history_id}"),
        Command::Search(q) => format!("g2:search {q}"),
        Command::Send(_) => "g2:send".into(),
        Command::SendTo { chat_jid, .. } => format!("g2:send-to {chat_jid}"),
        Command::Schedule {
            kind,
            value,
            group_folder: Some(f),
            ..
        } => format!("g2:schedule-for {f} {kind} {value}"),
        Command::Schedule {
            kind,
            value,
            group_context: true,
            ..
        } => format!("g2:schedule-group {kind} {value}"),
        Command::Schedule { kind, value, .. } => format!("g2:schedule {kind} {value}"),
        Command::Tasks => "g2:tasks".into(),
        Command::Pause(id) => format!("g2:pause {id}"),
        Command::Unpause(id) => format!("g2:unpause {id}"),
        Command::Cancel(id) => format!("g2:cancel {id}"),
        Command::Register { folder, .. } => format!("g2:register {folder}"),
        Command::Remember(_) => "g2:remember".into(),
        Command::Help => "g2:help".into(),
        Command::Context => "g2:context".into(),
        Command::MemorySearch(q) => format!("g2:memory-search {q}"),
        Command::MemoryTimeline(q) => format!("g2:memory-timeline {q}"),
        Command::MemoryGet(ids) => format!("g2:memory-get {}", ids.join(" ")),
        Command::MemoryRemember(_) => "g2:memory-remember".into(),
        Command::MemoryForget(id) => format!("g2:memory-forget {id}"),
        Command::Invalid { line, .. } => line.clone(),
    }
}

fn help_text() -> String {
    let mut s = String::from("Offline model commands (one per line):");
    for (c, what) in COMMANDS {
        s.push_str(&format!("\n- {c}: {what}"));
    }
    s
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

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Text of a message content (a string or blocks), text blocks only.
fn texts(content: &Value) -> Vec<&str> {
    match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        _ => Vec::new(),
    }
}

/// The user's own words in a message: the last text block that is not a
/// wrapper Claude Code adds (`<system-reminder>`, `<local-command-…>`).
fn prompt_of(msg: &Value) -> Option<&str> {
    texts(&msg["content"])
        .into_iter()
        .rev()
        .find(|t| !t.trim_start().starts_with("<system-reminder>"))
}

fn tool_results(msg: &Value) -> Vec<(&str, Outcome)> {
    let Some(blocks) = msg["content"].as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                c => texts(c).join("\n"),
            };
            let id = b["tool_use_id"].as_str().unwrap_or("");
            (
                id,
                Outcome {
                    text,
                    is_error: b["is_error"].as_bool().unwrap_or(false),
                },
            )
        })
        .collect()
}

fn is_prompt(msg: &Value) -> bool {
    msg["role"] == "user" && tool_results(msg).is_empty()
}

/// Working directory from Claude Code's environment section (`Primary
/// working directory: /path`), found in the system prompt or, in 2.1.x, in a
/// `role: "system"` entry of `messages`.
fn working_directory(req: &Value) -> String {
    let mut sources: Vec<&str> = texts(&req["system"]);
    if let Some(messages) = req["messages"].as_array() {
        for m in messages.iter().filter(|m| m["role"] == "system") {
            sources.extend(texts(&m["content"]));
        }
    }
    for block in sources {
        for line in block.lines() {
            let l = line.trim().trim_start_matches("- ");
            if let Some(i) = l.to_ascii_lowercase().find("working directory:") {
                let path = l[i + "working directory:".len()..].trim();
                if path.starts_with('/') {
                    return path.to_string();
                }
            }
        }
    }
    g2_core::wire::GROUP_DIR.into()
}

/// The texts of the chat messages in a routed prompt, one per line and
/// unescaped; any other prompt (a note before the envelope included) as it
/// is.
fn unwrap_messages(prompt: &str) -> std::borrow::Cow<'_, str> {
    match g2_core::envelope::read(prompt) {
        Some(env) if env.preface.is_empty() => env.texts().into(),
        _ => prompt.into(),
    }
}

/// Every `<g2-memory>…</g2-memory>` block anywhere in the request (system
/// prompt, system entries, messages), in order, or a line saying there is
/// none: what g2 injected, shown as it reached the model.
fn injected_memory(req: &Value) -> String {
    const OPEN: &str = "<g2-memory>";
    const CLOSE: &str = "</g2-memory>";
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => {
                let mut rest = s.as_str();
                while let Some(i) = rest.find(OPEN) {
                    let after = &rest[i..];
                    let end = after.find(CLOSE).map_or(after.len(), |j| j + CLOSE.len());
                    let block = after[..end].to_string();
                    if !out.contains(&block) {
                        out.push(block);
                    }
                    rest = &after[end..];
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut blocks = Vec::new();
    walk(req, &mut blocks);
    if blocks.is_empty() {
        "g2:context: no memory was injected into this request".into()
    } else {
        format!("g2:context:\n{}", blocks.join("\n"))
    }
}

/// Why the offline model cannot take a request (a 400 answer) or a command
/// (answered in words); the text says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Refusal(why.to_string())
    }
}

/// Answers one Messages API request by the offline model's own rules (a
/// [`Delegate`] is asked first, by [`Offline`]).
pub fn answer(req: &Value) -> Result<Answer, Refusal> {
    let messages = req["messages"]
        .as_array()
        .ok_or("messages: an array is required")?;
    // Claude Code puts `role: "system"` entries between the turns.
    let turns: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .collect();
    let last_user = turns
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .ok_or("messages: no user message")?;
    if texts(&last_user["content"])
        .iter()
        .any(|t| t.contains(COMPACTION_MARKER))
    {
        return Ok(Answer::text(summarize(&turns)));
    }
    let Some(start) = turns.iter().rposition(|m| is_prompt(m)) else {
        return Ok(Answer::text(
            "Offline model: there is no prompt to answer.".into(),
        ));
    };
    let prompt = unwrap_messages(prompt_of(turns[start]).unwrap_or("").trim());
    let prompt = prompt.trim();
    let commands = parse_commands(prompt);
    if commands.is_empty() {
        return Ok(Answer::text(format!(
            "Offline model (g2) received: \"{}\"",
            clip(prompt)
        )));
    }

    // Results of the calls made since the prompt, in call order.
    let mut outcomes = Vec::new();
    for m in &turns[start + 1..] {
        outcomes.extend(tool_results(m).into_iter().map(|(_, o)| o));
    }
    let offered: Vec<&str> = req["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    tracing::trace!(tools = ?offered, "offline model: tools offered");
    let cwd = working_directory(req);
    let mut used = 0;
    let mut lines = Vec::new();
    for cmd in &commands {
        if *cmd == Command::Context {
            lines.push(injected_memory(req));
            continue;
        }
        let first = used;
        loop {
            match next_step(cmd, &outcomes[first..used], &cwd) {
                Next::Done(line) => {
                    lines.push(line);
                    break;
                }
                Next::Call { name, .. } if !offered.contains(&name.as_str()) => {
                    lines.push(format!(
                        "{}: the tool {name} is not available here",
                        label(cmd)
                    ));
                    break;
                }
                Next::Call { .. } if used < outcomes.len() => used += 1,
                Next::Call { name, input } => {
                    let id = format!("toolu_g2{}", uuid::Uuid::new_v4().simple());
                    return Ok(Answer {
                        blocks: vec![Block::ToolUse { id, name, input }],
                        stop_reason: "tool_use",
                    });
                }
            }
        }
    }
    Ok(Answer::text(lines.join("\n")))
}

/// A compaction summary in the shape Claude Code asks for, built from the
/// conversation: requests, tool calls with results, replies, current state.
fn summarize(turns: &[&Value]) -> String {
    const KEEP: usize = 20;
    const ITEM: usize = 300;
    let short = |s: &str| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        match s.char_indices().nth(ITEM) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    };
    let body = &turns[..turns.len().saturating_sub(1)];
    let (mut requests, mut calls, mut replies) = (Vec::new(), Vec::new(), Vec::new());
    let mut pending: Vec<(String, String)> = Vec::new();
    for m in body {
        if m["role"] == "user" {
            for (id, o) in tool_results(m) {
                if let Some(i) = pending.iter().position(|(pid, _)| pid == id) {
                    let (_, call) = pending.remove(i);
                    let status = if o.is_error { "failed" } else { "returned" };
                    calls.push(format!("{call} {status}: {}", short(&o.text)));
                }
            }
            if is_prompt(m)
                && let Some(p) = prompt_of(m)
                && !p.trim().is_empty()
            {
                requests.push(short(p));
            }
        } else if let Some(blocks) = m["content"].as_array() {
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => replies.push(short(b["text"].as_str().unwrap_or(""))),
                    Some("tool_use") => pending.push((
                        b["id"].as_str().unwrap_or("").to_string(),
                        format!(
                            "{}({})",
                            b["name"].as_str().unwrap_or("?"),
                            short(&b["input"].to_string())
                        ),
                    )),
                    _ => {}
                }
            }
        } else if let Some(t) = m["content"].as_str() {
            replies.push(short(t));
        }
    }
    let list = |items: &[String]| -> String {
        if items.is_empty() {
            return "   - (none)\n".into();
        }
        let skip = items.len().saturating_sub(KEEP);
        let mut s = String::new();
        if skip > 0 {
            s.push_str(&format!("   - ({skip} earlier items omitted)\n"));
        }
        for i in &items[skip..] {
            s.push_str(&format!("   - {i}\n"));
        }
        s
    };
    let last = requests.last().cloned().unwrap_or_else(|| "(none)".into());
    format!(
        "<analysis>\nThe conversation has {} user requests, {} tool calls and {} assistant replies. \
         This summary was written by g2's offline model.\n</analysis>\n\n<summary>\n\
         1. Primary Request and Intent:\n{}\
         2. Tool Calls and Results:\n{}\
         3. Assistant Replies:\n{}\
         4. Current State:\n   The most recent request was: {}\n</summary>",
        requests.len(),
        calls.len(),
        replies.len(),
        list(&requests),
        list(&calls),
        list(&replies),
        last
    )
}

/// Rough token count of a text (4 bytes a token), never 0.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4).max(1)
}

/// The answer as a non-streaming Messages API response.
pub fn to_message(a: &Answer, id: &str, model: &str, input_tokens: u64) -> Value {
    let content: Vec<Value> = a.blocks.iter().map(block_json).collect();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": a.stop_reason,
        "stop_sequence": null,
        "usage": { "input_tokens": input_tokens, "output_tokens": output_tokens(a) },
    })
}

fn block_json(b: &Block) -> Value {
    match b {
        Block::Text(t) => json!({ "type": "text", "text": t }),
        Block::ToolUse { id, name, input } => {
            json!({ "type": "tool_use", "id": id, "name": name, "input": input })
        }
    }
}

pub fn output_tokens(a: &Answer) -> u64 {
    estimate_tokens(
        a.blocks
            .iter()
            .map(|b| block_json(b).to_string().len())
            .sum(),
    )
}

/// The answer as Server-Sent Events, one string per event, in the order the
/// Messages API streams them. Text is sent in a few deltas, tool input as
/// one `input_json_delta`.
pub fn to_events(a: &Answer, id: &str, model: &str, input_tokens: u64) -> Vec<String> {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut out = vec![ev(
        "message_start",
        json!({ "type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": input_tokens, "output_tokens": 1 } } }),
    )];
    for (index, b) in a.blocks.iter().enumerate() {
        match b {
            Block::Text(t) => {
                out.push(ev(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index,
                    "content_block": { "type": "text", "text": "" } }),
                ));
                for piece in chunks(t, 3) {
                    out.push(ev(
                        "content_block_delta",
                        json!({ "type": "content_block_delta", "index": index,
                        "delta": { "type": "text_delta", "text": piece } }),
                    ));
                }
            }
            Block::ToolUse { id, name, input } => {
                out.push(ev(
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index,
                    "content_block": { "type": "tool_use", "id": id, "name": name, "input": {} } }),
                ));
                out.push(ev(
                    "content_block_delta",
                    json!({ "type": "content_block_delta", "index": index,
                    "delta": { "type": "input_json_delta", "partial_json": input.to_string() } }),
                ));
            }
        }
        out.push(ev(
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": index }),
        ));
    }
    out.push(ev(
        "message_delta",
        json!({ "type": "message_delta",
        "delta": { "stop_reason": a.stop_reason, "stop_sequence": null },
        "usage": { "output_tokens": output_tokens(a) } }),
    ));
    out.push(ev("message_stop", json!({ "type": "message_stop" })));
    out
}

/// Splits text into at most `n` pieces on character boundaries.
fn chunks(s: &str, n: usize) -> Vec<&str> {
    let count = s.chars().count();
    if count == 0 {
        return vec![""];
    }
    let per = count.div_ceil(n);
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .nth(per)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

/// Answers the requests another part of the host makes of the offline
/// model (its text, or None when the request is not one of them); given
/// when the host is wired.
pub type Delegate = fn(&Value) -> Option<String>;

/// The offline provider.
pub struct Offline {
    model: Option<String>,
    delegate: Option<Delegate>,
}

impl Offline {
    pub fn new(model: Option<String>) -> Self {
        Offline {
            model,
            delegate: None,
        }
    }

    /// Asks `delegate` first, before the offline rules.
    #[must_use]
    pub fn with_delegate(mut self, delegate: Delegate) -> Self {
        self.delegate = Some(delegate);
        self
    }

    /// [`answer`], after the delegate.
    fn answer(&self, req: &Value) -> Result<Answer, Refusal> {
        match self.delegate.and_then(|d| d(req)) {
            Some(text) => Ok(Answer::text(text)),
            None => answer(req),
        }
    }

    fn reply(&self, req: &ModelRequest, count_only: bool) -> Reply {
        let value: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                return Reply::error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    format!("body: {e}"),
                );
            }
        };
        let input_tokens = estimate_tokens(req.body.len());
        if count_only {
            return Reply::full(
                StatusCode::OK,
                "application/json",
                serde_json::json!({ "input_tokens": input_tokens }).to_string(),
            );
        }
        let answer = match self.answer(&value) {
            Ok(a) => a,
            Err(Refusal(msg)) => {
                return Reply::error(StatusCode::BAD_REQUEST, "invalid_request_error", msg);
            }
        };
        let model = self.model.clone().unwrap_or_else(|| req.model.clone());
        let id = format!("msg_g2{}", uuid::Uuid::new_v4().simple());
        if req.stream {
            let events = to_events(&answer, &id, &model, input_tokens);
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            let body = futures_util::stream::iter(events.into_iter().map(|e| Ok(Bytes::from(e))));
            Reply {
                status: StatusCode::OK,
                headers,
                body: Box::pin(body),
            }
        } else {
            let msg = to_message(&answer, &id, &model, input_tokens);
            Reply::full(StatusCode::OK, "application/json", msg.to_string())
        }
    }
}

impl Provider for Offline {
    fn name(&self) -> &'static str {
        "offline"
    }

    fn messages(&self, req: ModelRequest) -> BoxFuture<'_, Reply> {
        let r = self.reply(&req, false);
        Box::pin(async move { r })
    }

    fn count_tokens(&self, req: ModelRequest) -> BoxFuture<'_, Reply> {
        let r = self.reply(&req, true);
        Box::pin(async move { r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Value {
        json!(
            [
                "Bash",
                "Read",
                "Write",
                "Edit",
                "mcp__g2__clear_session",
                "mcp__g2__list_sessions",
                "mcp__g2__resume_session",
                "mcp__g2__search_sessions",
                "mcp__g2__send_message",
                "mcp__g2__schedule_task",
                "mcp__g2__list_tasks",
                "mcp__g2__pause_task",
                "mcp__g2__resume_task",
                "mcp__g2__cancel_task",
                "mcp__g2__register_group",
                "mcp__g2__refresh_groups"
            ]
            .iter()
            .map(|n| json!({ "name": n, "input_schema": {} }))
            .collect::<Vec<_>>()
        )
    }

    fn req(messages: Value) -> Value {
        let mut messages = messages;
        if let Some(m) = messages.as_array_mut() {
            m.insert(0, json!({ "role": "system", "content": [{ "type": "text",
                "text": "# Environment\n - Primary working directory: /work/g\n - Platform: linux" }] }));
        }
        json!({ "model": "m", "max_tokens": 100, "tools": tools(), "messages": messages,
                "system": [{ "type": "text", "text": "You are Claude Code." }] })
    }

    fn text(a: &Answer) -> &str {
        match &a.blocks[..] {
            [Block::Text(t)] => t,
            other => panic!("not a text answer: {other:?}"),
        }
    }

    fn call(a: &Answer) -> (&str, &str, &Value) {
        match &a.blocks[..] {
            [Block::ToolUse { id, name, input }] => (id, name, input),
            other => panic!("not a tool call: {other:?}"),
        }
    }

    #[test]
    fn quotes_a_plain_prompt_skipping_wrappers_and_system_entries() {
        let r = req(json!([
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>ctx</system-reminder>" },
                { "type": "text", "text": "hello there" } ] },
            { "role": "system", "content": "" }
        ]));
        let a = answer(&r).unwrap();
        assert_eq!(a.stop_reason, "end_turn");
        assert_eq!(text(&a), "Offline model (g2) received: \"hello there\"");
        let routed = "<messages>\n<message sender=\"Ann\" time=\"t\">hi &amp; &lt;b&gt;</message>\n<message sender=\"Bo\" time=\"t\">g2:sessions</message>\n</messages>";
        assert_eq!(unwrap_messages(routed), "hi & <b>\ng2:sessions");
        assert_eq!(
            parse_commands(&unwrap_messages(routed)),
            vec![Command::Sessions]
        );
        assert_eq!(unwrap_messages("plain"), "plain");
    }

    #[test]
    fn bash_calls_the_tool_then_reports_the_result() {
        let r = req(json!([{ "role": "user", "content": "g2:bash echo hi" }]));
        let a = answer(&r).unwrap();
        let (id, name, input) = call(&a);
        assert_eq!((name, input["command"].as_str()), ("Bash", Some("echo hi")));
        assert_eq!(a.stop_reason, "tool_use");
        let r = req(json!([
            { "role": "user", "content": "g2:bash echo hi" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Bash", "input": input }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id, "content": "hi", "is_error": false }] }
        ]));
        let a = answer(&r).unwrap();
        assert_eq!(text(&a), "g2:bash echo hi: hi");
    }

    #[test]
    fn several_commands_run_in_order_one_call_per_turn() {
        let prompt = "please\ng2:sessions\ng2:search tax return\ng2:nope\ng2:resume 7 before-tax";
        let mut msgs = vec![json!({ "role": "user", "content": prompt })];
        let mut names = Vec::new();
        loop {
            let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
            if a.stop_reason == "end_turn" {
                let t = text(&a);
                assert!(
                    t.contains("g2:sessions: result of mcp__g2__list_sessions"),
                    "{t}"
                );
                assert!(t.contains("unknown command \"nope\""), "{t}");
                assert!(
                    t.contains("g2:resume 7: result of mcp__g2__resume_session"),
                    "{t}"
                );
                break;
            }
            let (id, name, input) = call(&a);
            if name == "mcp__g2__resume_session" {
                assert_eq!(
                    input,
                    &json!({ "history_id": 7, "save_current_as": "before-tax" })
                );
            }
            names.push(name.to_string());
            msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": name, "input": input }] }));
            msgs.push(
                json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id,
                "content": [{ "type": "text", "text": format!("result of {name}") }] }] }),
            );
            assert!(names.len() < 10, "loops: {names:?}");
        }
        assert_eq!(
            names,
            [
                "mcp__g2__list_sessions",
                "mcp__g2__search_sessions",
                "mcp__g2__resume_session"
            ]
        );
    }

    #[test]
    fn remember_reads_then_writes_the_whole_file() {
        let mut msgs = vec![json!({ "role": "user", "content": "g2:remember Likes tea" })];
        let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
        let (id, name, input) = call(&a);
        assert_eq!(name, "Read");
        assert_eq!(input["file_path"], "/work/g/CLAUDE.md");
        msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Read", "input": input }] }));
        msgs.push(json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id,
            "content": "     1\t# Main\n     2→\n     3\tRules\n<system-reminder>x</system-reminder>" }] }));
        let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
        let (id, name, input) = call(&a);
        assert_eq!(name, "Write");
        assert_eq!(input["content"], "# Main\n\nRules\nLikes tea\n");
        msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Write", "input": input }] }));
        msgs.push(json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id, "content": "ok" }] }));
        let a = answer(&req(Value::Array(msgs))).unwrap();
        assert!(text(&a).contains("added to /work/g/CLAUDE.md"));
    }

    #[test]
    fn missing_tools_and_bad_arguments_are_explained() {
        let mut r = req(
            json!([{ "role": "user", "content": "g2:clear\ng2:send hi\ng2:schedule cron 0 9 * *" }]),
        );
        r["tools"] = json!([{ "name": "Bash" }]);
        let a = answer(&r).unwrap();
        let t = text(&a);
        assert!(t.contains("`g2:clear` needs a name"), "{t}");
        assert!(t.contains("mcp__g2__send_message is not available"), "{t}");
        assert!(t.contains("usage: g2:schedule"), "{t}");
    }

    fn schedule(kind: &str, value: &str, prompt: &str) -> Command {
        schedule_in(None, false, kind, value, prompt)
    }

    fn schedule_in(
        folder: Option<&str>,
        group_context: bool,
        kind: &str,
        value: &str,
        prompt: &str,
    ) -> Command {
        Command::Schedule {
            kind: kind.into(),
            value: value.into(),
            prompt: prompt.into(),
            group_folder: folder.map(String::from),
            group_context,
        }
    }

    #[test]
    fn schedule_values() {
        assert_eq!(
            parse_commands("g2:schedule cron 0 9 * * 1-5 Morning brief")[0],
            schedule("cron", "0 9 * * 1-5", "Morning brief")
        );
        assert_eq!(
            parse_commands("g2:schedule once \"2026-12-01T09:00:00Z\" Pay rent")[0],
            schedule("once", "2026-12-01T09:00:00Z", "Pay rent")
        );
        assert_eq!(
            parse_commands("  g2:schedule interval 3600000 Check mail")[0],
            schedule("interval", "3600000", "Check mail")
        );
    }

    #[test]
    fn task_message_and_group_commands_parse() {
        let cmds = parse_commands(
            "g2:send-to tg:-100123 Dinner at 7\n\
             g2:schedule-group interval 60000 Summarize the chat\n\
             g2:schedule-for family cron 0 8 * * * Good morning\n\
             g2:schedule-for family once \"2026-12-01T09:00:00\" Pay rent\n\
             g2:tasks\n\
             g2:pause task-1\n\
             g2:unpause task-1\n\
             g2:cancel task-1\n\
             g2:register family The Family Chat",
        );
        assert_eq!(
            cmds,
            [
                Command::SendTo {
                    chat_jid: "tg:-100123".into(),
                    text: "Dinner at 7".into()
                },
                schedule_in(None, true, "interval", "60000", "Summarize the chat"),
                schedule_in(Some("family"), false, "cron", "0 8 * * *", "Good morning"),
                schedule_in(
                    Some("family"),
                    false,
                    "once",
                    "2026-12-01T09:00:00",
                    "Pay rent"
                ),
                Command::Tasks,
                Command::Pause("task-1".into()),
                Command::Unpause("task-1".into()),
                Command::Cancel("task-1".into()),
                Command::Register {
                    folder: "family".into(),
                    name: "The Family Chat".into()
                },
            ]
        );
        let why = |line: &str| match &parse_commands(line)[0] {
            Command::Invalid { why, .. } => why.clone(),
            other => panic!("{line} parsed as {other:?}"),
        };
        assert_eq!(why("g2:send-to tg:1"), "needs a chat jid and some text");
        assert_eq!(why("g2:pause"), "needs a task id (from g2:tasks)");
        assert_eq!(why("g2:cancel a b"), "needs a task id (from g2:tasks)");
        assert_eq!(why("g2:register family"), "needs a folder and a name");
        assert!(why("g2:schedule-for family").starts_with("usage: g2:schedule-for <folder>"));
        assert!(
            why("g2:schedule-for family hourly 1 x")
                .contains("usage: g2:schedule-for <folder> <cron")
        );
        assert!(why("g2:schedule-group cron 0 9 * *").starts_with("usage: g2:schedule-group"));
        let help = help_text();
        for c in [
            "send-to",
            "schedule-group",
            "schedule-for",
            "tasks",
            "pause",
            "unpause",
            "cancel",
            "register",
        ] {
            assert!(help.contains(&format!("- g2:{c}")), "{c} missing from help");
        }
    }

    /// Runs a prompt to the end, answering each tool call with
    /// `result of {name}`; returns the calls and the final text.
    fn run(prompt: &str) -> (Vec<(String, Value)>, String) {
        let mut msgs = vec![json!({ "role": "user", "content": prompt })];
        let mut calls = Vec::new();
        loop {
            let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
            if a.stop_reason == "end_turn" {
                return (calls, text(&a).to_string());
            }
            let (id, name, input) = call(&a);
            calls.push((name.to_string(), input.clone()));
            msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": name, "input": input }] }));
            msgs.push(
                json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id,
                "content": [{ "type": "text", "text": format!("result of {name}") }] }] }),
            );
            assert!(calls.len() < 20, "loops: {calls:?}");
        }
    }

    #[test]
    fn task_message_and_group_commands_call_the_g2_tools() {
        let (calls, t) = run("g2:send-to tg:-100123 Dinner at 7\n\
             g2:schedule cron 0 9 * * 1-5 Morning brief\n\
             g2:schedule-group interval 60000 Summarize the chat\n\
             g2:schedule-for family once 2026-12-01T09:00:00 Pay rent\n\
             g2:tasks\ng2:pause t1\ng2:unpause t1\ng2:cancel t1\n\
             g2:register family The Family Chat");
        let expected = [
            (
                "mcp__g2__send_message",
                json!({ "text": "Dinner at 7", "chat_jid": "tg:-100123" }),
            ),
            (
                "mcp__g2__schedule_task",
                json!({ "schedule_type": "cron", "schedule_value": "0 9 * * 1-5", "prompt": "Morning brief" }),
            ),
            (
                "mcp__g2__schedule_task",
                json!({ "schedule_type": "interval", "schedule_value": "60000",
                "prompt": "Summarize the chat", "context_mode": "group" }),
            ),
            (
                "mcp__g2__schedule_task",
                json!({ "schedule_type": "once", "schedule_value": "2026-12-01T09:00:00",
                "prompt": "Pay rent", "group_folder": "family" }),
            ),
            ("mcp__g2__list_tasks", json!({})),
            ("mcp__g2__pause_task", json!({ "task_id": "t1" })),
            ("mcp__g2__resume_task", json!({ "task_id": "t1" })),
            ("mcp__g2__cancel_task", json!({ "task_id": "t1" })),
            (
                "mcp__g2__register_group",
                json!({ "folder": "family", "name": "The Family Chat" }),
            ),
        ];
        let got: Vec<(&str, &Value)> = calls.iter().map(|(n, i)| (n.as_str(), i)).collect();
        let want: Vec<(&str, &Value)> = expected.iter().map(|(n, i)| (*n, i)).collect();
        assert_eq!(got, want);
        assert_eq!(
            t.lines().collect::<Vec<_>>(),
            [
                "g2:send-to tg:-100123: result of mcp__g2__send_message",
                "g2:schedule cron 0 9 * * 1-5: result of mcp__g2__schedule_task",
                "g2:schedule-group interval 60000: result of mcp__g2__schedule_task",
                "g2:schedule-for family once 2026-12-01T09:00:00: result of mcp__g2__schedule_task",
                "g2:tasks: result of mcp__g2__list_tasks",
                "g2:pause t1: result of mcp__g2__pause_task",
                "g2:unpause t1: result of mcp__g2__resume_task",
                "g2:cancel t1: result of mcp__g2__cancel_task",
                "g2:register family: result of mcp__g2__register_group",
            ]
        );
    }

    #[test]
    fn compaction_gets_a_summary_of_the_conversation() {
        let r = req(json!([
            { "role": "user", "content": "Plan the tax return" },
            { "role": "assistant", "content": [{ "type": "text", "text": "Gather the forms first." },
                { "type": "tool_use", "id": "t1", "name": "Bash", "input": { "command": "ls forms" } }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t1", "content": "w2.pdf" }] },
            { "role": "user", "content": "CRITICAL: Respond with TEXT ONLY. Your task is to create a detailed summary of the conversation so far" }
        ]));
        let t = answer(&r).unwrap();
        let t = text(&t).to_string();
        assert!(
            t.starts_with("<analysis>") && t.contains("<summary>") && t.ends_with("</summary>"),
            "{t}"
        );
        assert!(t.contains("Plan the tax return"));
        assert!(
            t.contains("Bash({\"command\":\"ls forms\"}) returned: w2.pdf"),
            "{t}"
        );
        assert!(t.contains("Gather the forms first."));
    }

    #[test]
    fn events_form_a_valid_stream() {
        let a = Answer {
            blocks: vec![
                Block::Text("héllo wörld".into()),
                Block::ToolUse {
                    id: "t".into(),
                    name: "Bash".into(),
                    input: json!({"command": "x"}),
                },
            ],
            stop_reason: "tool_use",
        };
        let ev = to_events(&a, "msg_1", "m", 10);
        assert!(ev[0].starts_with("event: message_start\n"));
        assert!(ev.last().unwrap().starts_with("event: message_stop\n"));
        let mut text = String::new();
        for e in &ev {
            let data: Value =
                serde_json::from_str(e.lines().nth(1).unwrap().strip_prefix("data: ").unwrap())
                    .unwrap();
            if data["delta"]["type"] == "text_delta" {
                text.push_str(data["delta"]["text"].as_str().unwrap());
            }
        }
        assert_eq!(text, "héllo wörld");
        assert!(answer(&json!({ "messages": "x" })).is_err());
        assert!(answer(&json!({ "messages": [] })).is_err());
    }

    #[test]
    fn context_shows_the_injected_memory_blocks() {
        let req = json!({
            "system": [{ "type": "text", "text": "You are Claude Code." }],
            "messages": [
                { "role": "user", "content": [
                    { "type": "text", "text": "<system-reminder>SessionStart hook additional context: <g2-memory>\nRemembered:\n- [fact #1] the boat is moored at pier 7 (Ann)\n</g2-memory></system-reminder>" },
                    { "type": "text", "text": "g2:context" }
                ] }
            ]
        });
        let a = answer(&req).unwrap();
        let shown = text(&a);
        assert!(shown.starts_with("g2:context:\n<g2-memory>"), "{shown}");
        assert!(shown.contains("pier 7 (Ann)\n</g2-memory>"), "{shown}");
        let none = json!({ "messages": [{ "role": "user", "content": "g2:context" }] });
        assert_eq!(
            text(&answer(&none).unwrap()),
            "g2:context: no memory was injected into this request"
        );
    }
}
