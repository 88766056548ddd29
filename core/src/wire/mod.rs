//! What the host and the runner inside the container must agree on: the
//! JSON that crosses the container boundary and every name, path and text
//! both sides use (`docs/protocol.md`).
//!
//! The host writes [`ContainerInput`] to the agent's stdin; the agent writes
//! [`ContainerOutput`] frames between [`OUTPUT_START`] and [`OUTPUT_END`] on
//! stdout. Field names are the protocol's (camelCase). Nothing here may ever
//! carry a credential.
//!
//! Constants live here by kind: the container's layout (paths the mount
//! table, the image and the runner share), the environment variables set
//! for the runner, the hooks the host registers and the runner handles,
//! and the texts an error frame starts with. Names inside the IPC folder
//! (sub-folders, `_close`, the socket, the snapshot files) live in
//! [`crate::ipc`] instead, beside the code that reads and writes them.

use serde::{Deserialize, Serialize};

/// Start of the `error` the runner reports for a session Claude Code could
/// not find: the host clears the pointer and retries once, fresh.
pub const STALE_SESSION: &str = "stale session";

/// Start of the `error` the runner reports when the agent's process
/// (claude) died during a turn: the host reports such a turn and does not
/// run it again.
pub const AGENT_DIED: &str = "claude exited";

/// The line before each output frame's JSON.
pub const OUTPUT_START: &str = "---G2_OUTPUT_START---";
/// The line after each output frame's JSON.
pub const OUTPUT_END: &str = "---G2_OUTPUT_END---";

// The container's layout: the host mounts (and the image creates) these,
// the runner finds its files there. `docs/protocol.md`, "Mounts".

/// Root of everything the host mounts for the agent.
pub const WORKSPACE: &str = "/workspace";
/// The group's folder (read-write), the agent's working directory.
pub const GROUP_DIR: &str = "/workspace/group";
/// The shared global memory folder (read-only, non-main groups only).
pub const GLOBAL_DIR: &str = "/workspace/global";
/// The group's IPC folder (read-write; [`crate::ipc`] names its contents).
pub const IPC_DIR: &str = "/workspace/ipc";
/// The project (the host's home), read-only, main group only.
pub const PROJECT_DIR: &str = "/workspace/project";
/// Parent of the allowlisted extra mounts: `/workspace/extra/{name}`.
pub const EXTRA_DIR: &str = "/workspace/extra";
/// The agent user's home; `HOME` in the container.
pub const AGENT_HOME: &str = "/home/node";
/// The group's Claude Code state (read-write); `CLAUDE_CONFIG_DIR`.
pub const CLAUDE_DIR: &str = "/home/node/.claude";
/// The runner in the image: the entrypoint and every hook's command.
pub const AGENT_EXE: &str = "/usr/local/bin/g2-agent";
/// Claude Code in the image (the runner's default, [`ENV_CLAUDE`] moves it).
pub const CLAUDE_EXE: &str = "/usr/local/bin/claude";
/// The memory file, in the group's folder and in the global folder.
pub const MEMORY_FILE: &str = "CLAUDE.md";
/// The archive folder inside the group's folder; [`AgentEvent::Archive`]
/// paths start with it.
pub const CONVERSATIONS_DIR: &str = "conversations";

/// `path` (one of the constants above) relative to [`WORKSPACE`], for the
/// runner, whose workspace [`ENV_WORKSPACE`] can move.
pub fn in_workspace(path: &str) -> &str {
    path.strip_prefix(WORKSPACE)
        .map(|p| p.trim_start_matches('/'))
        .unwrap_or(path)
}

// Environment variables of the runner and the processes it starts.

/// `0` when the group's memory injection is off: the runner then asks the
/// host for no memory with its prompts.
pub const ENV_INJECT: &str = "G2_INJECT";

/// Moves the whole [`WORKSPACE`] tree (the runner outside a container:
/// benches and tests).
pub const ENV_WORKSPACE: &str = "G2_WORKSPACE";
/// The Claude Code executable, instead of [`CLAUDE_EXE`].
pub const ENV_CLAUDE: &str = "G2_CLAUDE";
/// The assistant's name in archives the PreCompact hook writes.
pub const ENV_ASSISTANT_NAME: &str = "G2_ASSISTANT_NAME";
/// The IANA timezone the group's memory is dated in (the day lines of the
/// archives the PreCompact hook writes); UTC when unset or unknown.
pub const ENV_TIMEZONE: &str = "G2_TIMEZONE";
/// When set, the runner logs when each message reached claude's stdin (the
/// follow-up latency bench) and reports the turn's stamps in its reply
/// frames (`crate::trace`); the host sets it while it traces turns.
pub const ENV_AGENT_TRACE: &str = "G2_AGENT_TRACE";
/// Set by the runner for the hooks while it traces: the file each hook
/// appends its stamps to (`crate::trace::hook_line`).
pub const ENV_HOOK_STAMPS: &str = "G2_TRACE_HOOKS";
/// Claude Code's own: where it keeps all of its state; the host points it
/// at [`CLAUDE_DIR`].
pub const ENV_CLAUDE_CONFIG_DIR: &str = "CLAUDE_CONFIG_DIR";
/// `0` when the group's memory capture is off: the hooks write no capture
/// event (PreCompact still archives).
pub const ENV_CAPTURE: &str = "G2_CAPTURE";
/// The tools whose calls are not captured, comma-separated (the host's
/// `memory.skip_tools`); unset: [`SKIPPED_TOOLS`].
pub const ENV_SKIP_TOOLS: &str = "G2_SKIP_TOOLS";
/// How long (ms) the memory hooks wait for the host (the host's
/// `memory.inject_wait_ms`); unset: the runner's 50 ms.
pub const ENV_INJECT_WAIT_MS: &str = "G2_INJECT_WAIT_MS";
/// The assistant's name when none is configured.
pub const DEFAULT_ASSISTANT_NAME: &str = "G2";

// Claude Code hooks: the host registers these in the group's
// `.claude/settings.json`, each running [`AGENT_EXE`] with [`hook_args`]; the runner's
// `hook` subcommand handles them. `docs/claude-code.md`, "Hooks".

/// The hook that archives the transcript before a compaction.
pub const PRE_COMPACT: &str = "PreCompact";
pub const SESSION_START: &str = "SessionStart";
/// A prompt. Captured (and given its memory) by the runner as it writes
/// the prompt to Claude Code, not registered as a hook: a hook process
/// would add its start-up to every turn.
pub const USER_PROMPT_SUBMIT: &str = "UserPromptSubmit";
pub const POST_TOOL_USE: &str = "PostToolUse";
/// A tool call that failed: recorded as a [`Captured::Tool`] with `ok: false`.
pub const POST_TOOL_USE_FAILURE: &str = "PostToolUseFailure";
/// A turn's reply. Captured by the runner from Claude Code's `result`
/// line, not registered as a hook (as [`USER_PROMPT_SUBMIT`]).
pub const STOP: &str = "Stop";
pub const SUBAGENT_STOP: &str = "SubagentStop";
pub const SESSION_END: &str = "SessionEnd";
/// Hooks registered in every group's `.claude/settings.json`.
pub const HOOK_EVENTS: &[&str] = &[
    PRE_COMPACT,
    SESSION_START,
    POST_TOOL_USE,
    POST_TOOL_USE_FAILURE,
    SUBAGENT_STOP,
    SESSION_END,
];
/// Every hook `g2-agent hook` handles: [`HOOK_EVENTS`] and the two whose
/// work the runner does itself (a settings file written by an older host
/// may still register them).
pub const HANDLED_HOOKS: &[&str] = &[
    PRE_COMPACT,
    SESSION_START,
    USER_PROMPT_SUBMIT,
    POST_TOOL_USE,
    POST_TOOL_USE_FAILURE,
    STOP,
    SUBAGENT_STOP,
    SESSION_END,
];
/// How long Claude Code lets a hook run, in seconds.
pub const HOOK_TIMEOUT_SECS: u64 = 30;

/// The arguments a hook runs [`AGENT_EXE`] with: `hook <event>`. Hooks are
/// registered in exec form (`command` + `args`), so Claude Code starts the
/// runner directly instead of through a shell: about 4 ms less per hook
/// (`docs/claude-code.md`, "Hooks").
pub fn hook_args(event: &str) -> [String; 2] {
    ["hook".to_string(), event.to_string()]
}

// A prompt's memory in the user message the runner writes to Claude Code.

/// A memory block as it rides with a prompt: in the `<system-reminder>`
/// wrapper Claude Code gives a hook's context, a text block of its own
/// after the prompt's.
pub fn memory_reminder(block: &str) -> String {
    format!("<system-reminder>\n{block}\n</system-reminder>")
}

/// Every placeholder holds this, also as a JSON string: a request without
/// it has none to look for.
pub const MEMORY_PLACEHOLDER_MARK: &str = "<g2-memory ref=";
const PLACEHOLDER_START: &str = "<g2-memory ref=\"";
const PLACEHOLDER_END: &str = "\"/>";

/// The stand-in for a prompt's memory the host is still making: the runner
/// sends it as the text block the memory would be, and the group's gateway
/// puts the block in its place in every model request (or drops it when
/// there is none), so Claude Code's work on the prompt and the host's
/// recall run at once.
pub fn memory_placeholder(reference: &str) -> String {
    memory_reminder(&format!("{PLACEHOLDER_START}{reference}{PLACEHOLDER_END}"))
}

/// The reference of a text block that is exactly a placeholder (nothing
/// else in any block stands for memory).
pub fn memory_placeholder_ref(text: &str) -> Option<&str> {
    let r = text
        .strip_prefix("<system-reminder>\n")?
        .strip_prefix(PLACEHOLDER_START)?
        .strip_suffix("\n</system-reminder>")?
        .strip_suffix(PLACEHOLDER_END)?;
    valid_memory_ref(r).then_some(r)
}

/// A placeholder's reference: 1-64 ASCII letters, digits and `-`.
pub fn valid_memory_ref(r: &str) -> bool {
    (1..=64).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// What a container is started with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerInput {
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub group_folder: String,
    pub chat_jid: String,
    pub is_main: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_scheduled_task: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_name: Option<String>,
    /// The agent finishes by itself after this long between turns with no
    /// new input: a backstop for a host that died without closing it (the
    /// host's own idle close comes first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_exit_secs: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputStatus {
    Success,
    Error,
}

/// One output frame. `result: None` after a turn is the idle signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerOutput {
    pub status: OutputStatus,
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The turn's stamps taken in the container, on a reply frame and only
    /// while the host traces turns ([`ENV_AGENT_TRACE`]; `crate::trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::Trace>,
}

impl ContainerOutput {
    /// The frame as written on stdout, markers included.
    pub fn frame(&self) -> String {
        format!(
            "{OUTPUT_START}\n{}\n{OUTPUT_END}\n",
            serde_json::to_string(self).expect("output frames serialize")
        )
    }
}

/// A message for a running agent (`ipc/input/*.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum InputMessage {
    Message { text: String },
}

/// What an agent reports to the host (`ipc/events/*.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    /// The PreCompact hook archived a transcript.
    Archive {
        /// Relative to the group folder: `conversations/{file}.md`.
        path: String,
        title: String,
        session_id: Option<String>,
        /// `manual` or `auto`, as Claude Code reported it.
        compact_trigger: Option<String>,
    },
    /// What a capture hook recorded for the memory layer, already stripped
    /// of private text, redacted and bounded by the hook (the host cleans
    /// it again before storing).
    Capture {
        /// Claude Code's session id (the content session).
        session_id: Option<String>,
        /// RFC 3339, UTC.
        at: String,
        event: Captured,
    },
}

/// One captured hook event ([`AgentEvent::Capture`]), tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Captured {
    /// `SessionStart`.
    SessionStart {
        /// `startup`, `resume`, `clear` or `compact`.
        source: Option<String>,
        transcript_path: Option<String>,
    },
    /// `UserPromptSubmit`. An entirely private prompt is `private` with an
    /// empty `text`: the batch exists, its content does not.
    Prompt { text: String, private: bool },
    /// `PostToolUse` (`ok`) or `PostToolUseFailure` (not `ok`), for a tool
    /// not in [`SKIPPED_TOOLS`].
    Tool {
        tool_use_id: Option<String>,
        tool: String,
        /// A compact summary of the input: the file path, command,
        /// pattern, URL or query, each cut at [`MAX_CAPTURE_FIELD`]; for an
        /// MCP or unknown tool its `arguments` as compact JSON cut at
        /// [`MAX_CAPTURE_ARGS`].
        input: serde_json::Value,
        /// The tool's output (or error), cut at [`MAX_CAPTURE_OUTPUT`] bytes.
        output: String,
        #[serde(default)]
        files_read: Vec<String>,
        #[serde(default)]
        files_modified: Vec<String>,
        ok: bool,
        /// Called by a subagent, not by the main thread.
        #[serde(default)]
        subagent: bool,
    },
    /// `Stop`: the turn's last assistant text, cut at [`MAX_CAPTURE_REPLY`].
    Stop { reply: Option<String> },
    /// `SubagentStop`: a subagent finished.
    SubagentStop {
        agent_id: Option<String>,
        agent_type: Option<String>,
        reply: Option<String>,
    },
    /// `SessionEnd`.
    SessionEnd { reason: Option<String> },
}

/// Tools whose calls are not worth remembering: bookkeeping, questions
/// and g2's own session tools (memory must not feed on itself).
pub const SKIPPED_TOOLS: &[&str] = &[
    "TodoWrite",
    "AskUserQuestion",
    "ListMcpResourcesTool",
    "SlashCommand",
    "Skill",
    "mcp__g2__list_sessions",
    "mcp__g2__search_sessions",
    "mcp__g2__memory_search",
    "mcp__g2__memory_timeline",
    "mcp__g2__memory_get",
];

/// Longest prompt text in a [`Captured::Prompt`], in characters.
pub const MAX_CAPTURE_PROMPT: usize = 16_000;
/// Longest string of a tool input summary, in characters.
pub const MAX_CAPTURE_FIELD: usize = 1_000;
/// Longest `arguments` JSON of an MCP or unknown tool, in characters.
pub const MAX_CAPTURE_ARGS: usize = 2_000;
/// Longest tool output, in bytes.
pub const MAX_CAPTURE_OUTPUT: usize = 4 << 10;
/// Longest reply of a [`Captured::Stop`], in characters.
pub const MAX_CAPTURE_REPLY: usize = 2_000;
/// Most files listed as read or modified by one tool call.
pub const MAX_CAPTURE_FILES: usize = 50;
/// Longest id, name, source or reason, in characters.
pub const MAX_CAPTURE_NAME: usize = 200;

/// What `g2-agent hook <event>` takes from Claude Code's hook JSON (stdin).
/// Anything that is not a JSON object, or a field of the wrong type, is
/// simply absent: a hook must never fail on its input.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    pub session_id: Option<String>,
    /// `PreCompact` only: the transcript about to be compacted.
    pub transcript_path: Option<String>,
    /// `PreCompact` only: `manual` or `auto`.
    pub trigger: Option<String>,
}

impl HookInput {
    pub fn parse(event: &str, raw: &[u8]) -> HookInput {
        let input: serde_json::Value =
            serde_json::from_slice(raw).unwrap_or(serde_json::Value::Null);
        let text = |k: &str| input[k].as_str().map(str::to_string);
        let pre_compact = event == PRE_COMPACT;
        HookInput {
            session_id: text("session_id"),
            transcript_path: text("transcript_path").filter(|_| pre_compact),
            trigger: text("trigger").filter(|_| pre_compact),
        }
    }
}

/// A request an agent's g2 tool makes of the host (`ipc/tasks/{id}.json`).
/// The host answers in `ipc/responses/{id}.json`. Which group asks is
/// the IPC folder the file is in, never anything in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRequest {
    /// Also the file names of the request and its response.
    pub request_id: String,
    #[serde(flatten)]
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Action {
    /// Archive the active session under `name`, bookmark it, start fresh.
    ClearSession {
        name: String,
    },
    ListSessions {},
    /// Make an earlier session active; bookmark (and archive) the current
    /// one as `save_current_as` first when given.
    ResumeSession {
        history_id: i64,
        save_current_as: Option<String>,
    },
    SearchSessions {
        query: String,
        limit: Option<usize>,
    },
    /// Send a message to a chat now: the group's own chat when `chat_jid`
    /// is absent (any chat for main, only its own for other groups).
    SendMessage {
        text: String,
        chat_jid: Option<String>,
    },
    /// Schedule a prompt. `group_folder` other than the source group is
    /// for main only.
    ScheduleTask {
        prompt: String,
        /// `cron` (5 fields), `interval` (milliseconds) or `once`
        /// (RFC 3339, or a local time without offset in `timezone`).
        schedule_type: String,
        schedule_value: String,
        /// IANA name; default UTC.
        timezone: Option<String>,
        /// `group` (the group's session) or `isolated` (fresh; default).
        context_mode: Option<String>,
        group_folder: Option<String>,
    },
    /// The group's tasks (every task for main).
    ListTasks {},
    PauseTask {
        task_id: String,
    },
    ResumeTask {
        task_id: String,
    },
    CancelTask {
        task_id: String,
    },
    /// Main only.
    RegisterGroup {
        folder: String,
        name: String,
        jid: Option<String>,
        trigger: Option<String>,
        requires_trigger: Option<bool>,
    },
    /// Main only: rewrite `available_groups.json` now.
    RefreshGroups {},
    /// Recall over the group's own memory: a compact index of hits.
    MemorySearch {
        query: String,
        limit: Option<usize>,
        /// `passage`, `observation`, `summary`, or an observation kind.
        kind: Option<String>,
        /// RFC 3339 or a date.
        since: Option<String>,
    },
    /// What happened around a memory: `id` (as memory_search shows it,
    /// `o12`, `p34`, `s3`) or the best hit for `query`.
    MemoryTimeline {
        id: Option<String>,
        query: Option<String>,
        before: Option<usize>,
        after: Option<usize>,
    },
    /// Full records of memories by id.
    MemoryGet {
        ids: Vec<String>,
    },
    /// A user-authored observation (importance high).
    Remember {
        text: String,
    },
    /// An observation out of recall and injection (a tombstone stays).
    Forget {
        id: String,
    },
}

impl Action {
    /// The action's wire name (`type`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::ClearSession { .. } => "clear_session",
            Action::ListSessions {} => "list_sessions",
            Action::ResumeSession { .. } => "resume_session",
            Action::SearchSessions { .. } => "search_sessions",
            Action::SendMessage { .. } => "send_message",
            Action::ScheduleTask { .. } => "schedule_task",
            Action::ListTasks {} => "list_tasks",
            Action::PauseTask { .. } => "pause_task",
            Action::ResumeTask { .. } => "resume_task",
            Action::CancelTask { .. } => "cancel_task",
            Action::RegisterGroup { .. } => "register_group",
            Action::RefreshGroups {} => "refresh_groups",
            Action::MemorySearch { .. } => "memory_search",
            Action::MemoryTimeline { .. } => "memory_timeline",
            Action::MemoryGet { .. } => "memory_get",
            Action::Remember { .. } => "remember",
            Action::Forget { .. } => "forget",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskResponse {
    pub request_id: String,
    pub ok: bool,
    /// What the tool returns to the agent.
    pub text: String,
}

#[cfg(test)]
mod tests;
