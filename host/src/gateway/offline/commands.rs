//! The offline model's command language: the `g2:<command> <args>` lines
//! of a prompt ([`parse_commands`]), the list `g2:help` shows
//! ([`COMMANDS`]) and the label each command's result is reported under.
//! Parsing never fails: a line that names no command or misses arguments
//! becomes [`Command::Invalid`], and the reply says why.

use serde_json::Value;

use super::Refusal;

/// The commands, for `g2:help` and error replies.
pub const COMMANDS: &[(&str, &str)] = &[
    ("g2:help", "this list"),
    (
        "g2:attachments",
        "list the files that came with the messages (ls -l where the envelope says they are)",
    ),
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
    (
        "g2:tool <tool-name> [<json-object>]",
        "call any tool by name with that input (e.g. an MCP server's, mcp__<server>__<tool>)",
    ),
];

/// A parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Help,
    /// The files of the prompt's messages, at the paths its envelope names
    /// (filled in from the envelope by the caller; the command line has none).
    Attachments(Vec<String>),
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
    /// One call of the tool named `name`, as named, with `input` (a JSON
    /// object).
    Tool {
        name: String,
        input: Value,
    },
    /// A line that names no command or misses arguments; the reply says why.
    Invalid {
        line: String,
        why: String,
    },
}

/// Reads the `g2:` command lines of a prompt, in order. A line may start
/// with a mention, as a chat's trigger puts it (`@G2 g2:bash ls`).
pub fn parse_commands(prompt: &str) -> Vec<Command> {
    prompt
        .lines()
        .map(|l| {
            let l = l.trim();
            match l.split_once(char::is_whitespace) {
                Some((mention, rest)) if mention.starts_with('@') => rest.trim_start(),
                _ => l,
            }
        })
        .filter_map(|l| l.strip_prefix("g2:").map(|rest| (l, rest)))
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
        "attachments" => Command::Attachments(Vec::new()),
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
        "tool" => parse_tool(args).unwrap_or_else(|why| invalid(&why.0)),
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

/// Longest tool name `g2:tool` takes.
const TOOL_NAME_MAX: usize = 128;

/// `<tool-name> [<json-object>]`: the name as it is, the rest of the line
/// as the input (`{}` when there is none).
fn parse_tool(args: &str) -> Result<Command, Refusal> {
    let (name, json) = match args.split_once(char::is_whitespace) {
        Some((name, json)) => (name, json.trim()),
        None => (args, ""),
    };
    if name.is_empty() {
        return Err("needs a tool name: g2:tool <tool-name> [<json-object>]".into());
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.len() > TOOL_NAME_MAX || !name.chars().all(valid) {
        return Err(Refusal(format!(
            "needs a tool name of letters, digits, _ and - (at most {TOOL_NAME_MAX})"
        )));
    }
    let input = match json {
        "" => Value::Object(Default::default()),
        json => match serde_json::from_str::<Value>(json) {
            Ok(input @ Value::Object(_)) => input,
            Ok(other) => {
                let kind = match other {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                };
                return Err(Refusal(format!(
                    "needs a JSON object after the tool name, not {kind}"
                )));
            }
            Err(e) => {
                return Err(Refusal(format!(
                    "needs a JSON object after the tool name: {e}"
                )));
            }
        },
    };
    Ok(Command::Tool {
        name: name.to_string(),
        input,
    })
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

/// The words a command's result is reported under.
pub(super) fn label(cmd: &Command) -> String {
    match cmd {
        Command::Attachments(paths) => format!("g2:attachments ({} files)", paths.len()),
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
        Command::Tool { name, .. } => format!("g2:tool {name}"),
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

/// What `g2:help` answers: [`COMMANDS`], one a line.
pub(super) fn help_text() -> String {
    let mut s = String::from("Offline model commands (one per line):");
    for (c, what) in COMMANDS {
        s.push_str(&format!("\n- {c}: {what}"));
    }
    s
}
