//! `g2-agent mcp`: the stdio MCP server `g2` that the runner registers with
//! Claude Code. Its tools reach the host through the IPC folder: a request
//! is written to `tasks/{id}.json` (`messages/{id}.json` for
//! `send_message`; temp file + rename), the answer read from
//! `responses/{id}.json`, woken by inotify. The server holds no state and no
//! secret; which group asks is the folder it writes into.

use std::path::Path;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use g2_core::ipc;
use g2_core::tools::{
    ForgetArgs, MemoryGetArgs, MemorySearchArgs, MemoryTimelineArgs, RememberArgs, SearchArgs,
};
use g2_core::watch::Watch;
use g2_core::wire::{Action, TaskRequest, TaskResponse};

use crate::paths::Paths;

/// How long a tool waits for the host.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Deserialize, JsonSchema)]
pub struct ClearArgs {
    /// A short, descriptive name for the conversation being archived, e.g. "Tax research".
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct ResumeArgs {
    /// The history id from list_sessions.
    pub history_id: i64,
    /// Bookmark the current conversation under this name before switching.
    pub save_current_as: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct SendArgs {
    /// The message text.
    pub text: String,
    /// Main group only: the chat to send to (a jid from available_groups.json). Default: this group's chat.
    pub chat_jid: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ScheduleArgs {
    /// What the agent should do when the task runs, written as a self-contained instruction (an isolated run does not see this conversation).
    pub prompt: String,
    /// "cron", "interval" or "once".
    pub schedule_type: String,
    /// cron: a 5-field cron expression ("0 9 * * 1-5" = weekdays at 09:00) in `timezone`. interval: milliseconds between runs ("3600000" = hourly). once: an RFC 3339 time ("2026-12-01T09:00:00Z") or a local date-time without offset ("2026-12-01T09:00:00") in `timezone`.
    pub schedule_value: String,
    /// IANA time zone for cron and local once times, e.g. "Europe/Berlin". Default: UTC.
    pub timezone: Option<String>,
    /// "isolated" (a fresh session each run; the default) or "group" (runs in this group's conversation, with its history).
    pub context_mode: Option<String>,
    /// Main group only: schedule the task for another group (its folder). Default: this group.
    pub group_folder: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct TaskIdArgs {
    /// The task id (see list_tasks).
    pub task_id: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct RegisterArgs {
    /// The new group's folder: letters, digits, '-' and '_', starting with a letter or digit, e.g. "family".
    pub folder: String,
    /// The group's display name.
    pub name: String,
    /// The chat's jid: "tg:<chat_id>" for a Telegram chat ("tg:<chat_id>:<topic_id>" for a forum topic), else see available_groups.json. Default: "local:{folder}".
    pub jid: Option<String>,
    /// Regex a message must match to wake the agent. Default: "@" followed by the assistant's name at the start.
    pub trigger: Option<String>,
    /// Whether messages need the trigger (default true); false answers every message.
    pub requires_trigger: Option<bool>,
}

#[derive(Clone)]
pub struct G2Tools {
    paths: Paths,
    tool_router: ToolRouter<Self>,
}

#[tool_router(router = tool_router)]
impl G2Tools {
    pub fn new(paths: Paths) -> Self {
        G2Tools {
            paths,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Archive the current conversation under a name (searchable later), bookmark it in the session history, and start a fresh session with the next message. Use when the user wants to start over or switch topics."
    )]
    async fn clear_session(&self, Parameters(a): Parameters<ClearArgs>) -> String {
        self.ask(Action::ClearSession { name: a.name }).await
    }

    #[tool(
        description = "List earlier sessions of this group (bookmarks with history ids), newest first."
    )]
    async fn list_sessions(&self) -> String {
        self.ask(Action::ListSessions {}).await
    }

    #[tool(
        description = "Switch back to an earlier session by its history id (see list_sessions). The switch takes effect with the next message."
    )]
    async fn resume_session(&self, Parameters(a): Parameters<ResumeArgs>) -> String {
        self.ask(Action::ResumeSession {
            history_id: a.history_id,
            save_current_as: a.save_current_as,
        })
        .await
    }

    #[tool(
        description = "Full-text search over this group's archived conversations (best matches first, with snippets and file paths under conversations/)."
    )]
    async fn search_sessions(&self, Parameters(a): Parameters<SearchArgs>) -> String {
        self.ask(Action::SearchSessions {
            query: a.query,
            limit: a.limit,
        })
        .await
    }

    #[tool(
        description = "Search this group's memory (observations, session summaries, archived conversation passages) with a question in plain words. Returns a compact index (id, kind, title, date); use memory_get for full records and memory_timeline for what happened around one."
    )]
    async fn memory_search(&self, Parameters(a): Parameters<MemorySearchArgs>) -> String {
        self.ask(Action::MemorySearch {
            query: a.query,
            limit: a.limit,
            kind: a.kind,
            since: a.since,
        })
        .await
    }

    #[tool(
        description = "What happened around a memory: the neighbouring turns of an archived passage, or the prompts around an observation's. Give an id from memory_search, or a query."
    )]
    async fn memory_timeline(&self, Parameters(a): Parameters<MemoryTimelineArgs>) -> String {
        self.ask(Action::MemoryTimeline {
            id: a.id,
            query: a.query,
            before: a.before,
            after: a.after,
        })
        .await
    }

    #[tool(description = "Full records of memories by id (from memory_search).")]
    async fn memory_get(&self, Parameters(a): Parameters<MemoryGetArgs>) -> String {
        self.ask(Action::MemoryGet { ids: a.ids }).await
    }

    #[tool(
        description = "Remember something for this group for good (a high-importance observation that later sessions are given). Use when someone asks you to remember a fact, a preference or a decision."
    )]
    async fn remember(&self, Parameters(a): Parameters<RememberArgs>) -> String {
        self.ask(Action::Remember { text: a.text }).await
    }

    #[tool(
        description = "Forget an observation (by its id from memory_search): it leaves recall and what later sessions are given."
    )]
    async fn forget(&self, Parameters(a): Parameters<ForgetArgs>) -> String {
        self.ask(Action::Forget { id: a.id }).await
    }

    #[tool(
        description = "Send a message to this group's chat right away, while you keep working (progress updates, partial results). Your final reply is sent anyway; do not repeat it here. chat_jid is for the main group only, to reach another chat."
    )]
    async fn send_message(&self, Parameters(a): Parameters<SendArgs>) -> String {
        self.ask(Action::SendMessage {
            text: a.text,
            chat_jid: a.chat_jid,
        })
        .await
    }

    #[tool(
        description = "Schedule a prompt to run later or repeatedly as an agent run of this group. schedule_type: cron (5-field cron expression in timezone, default UTC), interval (milliseconds between runs) or once (RFC 3339 time, or a local date-time without offset in timezone). Returns the task id."
    )]
    async fn schedule_task(&self, Parameters(a): Parameters<ScheduleArgs>) -> String {
        self.ask(Action::ScheduleTask {
            prompt: a.prompt,
            schedule_type: a.schedule_type,
            schedule_value: a.schedule_value,
            timezone: a.timezone,
            context_mode: a.context_mode,
            group_folder: a.group_folder,
        })
        .await
    }

    #[tool(
        description = "List scheduled tasks with their ids, schedules, status and next run: this group's tasks, or every group's for the main group."
    )]
    async fn list_tasks(&self) -> String {
        self.ask(Action::ListTasks {}).await
    }

    #[tool(
        description = "Pause a scheduled task (it keeps its schedule but does not run until resumed)."
    )]
    async fn pause_task(&self, Parameters(a): Parameters<TaskIdArgs>) -> String {
        self.ask(Action::PauseTask { task_id: a.task_id }).await
    }

    #[tool(description = "Resume a paused scheduled task.")]
    async fn resume_task(&self, Parameters(a): Parameters<TaskIdArgs>) -> String {
        self.ask(Action::ResumeTask { task_id: a.task_id }).await
    }

    #[tool(description = "Cancel a scheduled task for good.")]
    async fn cancel_task(&self, Parameters(a): Parameters<TaskIdArgs>) -> String {
        self.ask(Action::CancelTask { task_id: a.task_id }).await
    }

    #[tool(
        description = "Main group only: register a new chat group, so the host answers it with its own agent, folder and memory."
    )]
    async fn register_group(&self, Parameters(a): Parameters<RegisterArgs>) -> String {
        self.ask(Action::RegisterGroup {
            folder: a.folder,
            name: a.name,
            jid: a.jid,
            trigger: a.trigger,
            requires_trigger: a.requires_trigger,
        })
        .await
    }

    #[tool(
        description = "Main group only: rewrite available_groups.json (in the IPC folder) with the current groups and their jids now."
    )]
    async fn refresh_groups(&self) -> String {
        self.ask(Action::RefreshGroups {}).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for G2Tools {}

impl G2Tools {
    async fn ask(&self, action: Action) -> String {
        let paths = self.paths.clone();
        let request = TaskRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            action,
        };
        match tokio::task::spawn_blocking(move || exchange(&paths, &request, ANSWER_TIMEOUT)).await
        {
            Ok(Ok(r)) if r.ok => r.text,
            Ok(Ok(r)) => format!("Error: {}", r.text),
            Ok(Err(e)) => format!("Error: {e}"),
            Err(e) => format!("Error: {e}"),
        }
    }
}

/// Writes a request and waits for its response file.
fn exchange(
    paths: &Paths,
    request: &TaskRequest,
    timeout: Duration,
) -> std::io::Result<TaskResponse> {
    let responses = paths.ipc().join(ipc::RESPONSES_DIR);
    std::fs::create_dir_all(&responses)?;
    let answer = responses.join(format!("{}.json", request.request_id));
    // Watch before asking, so the answer cannot slip past.
    let (tx, rx) = std::sync::mpsc::channel();
    let _watch = Watch::on(&responses, move |_| {
        let _ = tx.send(());
    })
    .map_err(std::io::Error::other)?;
    ipc::write_request(&paths.ipc(), request)?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(r) = take(&answer) {
            return Ok(r);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the g2 host did not answer in time",
            ));
        }
        // Woken by inotify; the bound only guards against a lost event.
        let _ = rx.recv_timeout(left.min(Duration::from_secs(1)));
    }
}

fn take(path: &Path) -> Option<TaskResponse> {
    let bytes = std::fs::read(path).ok()?;
    let _ = std::fs::remove_file(path);
    serde_json::from_slice(&bytes).ok()
}

/// Serves MCP on stdin/stdout until Claude Code closes it.
pub async fn serve(paths: Paths) -> i32 {
    let service = match G2Tools::new(paths).serve(rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("g2-agent mcp: {e}");
            return 1;
        }
    };
    match service.waiting().await {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("g2-agent mcp: {e}");
            1
        }
    }
}

/// The `--mcp-config` that registers this server as `g2`.
pub fn config_json(exe: &Path) -> String {
    serde_json::json!({ "mcpServers": { "g2": { "type": "stdio", "command": exe, "args": ["mcp"] } } }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_is_a_tool() {
        let tools = G2Tools::new(Paths {
            workspace: "/nonexistent".into(),
            claude: "claude".into(),
        });
        let mut names: Vec<String> = tools
            .tool_router
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "cancel_task",
                "clear_session",
                "forget",
                "list_sessions",
                "list_tasks",
                "memory_get",
                "memory_search",
                "memory_timeline",
                "pause_task",
                "refresh_groups",
                "register_group",
                "remember",
                "resume_session",
                "resume_task",
                "schedule_task",
                "search_sessions",
                "send_message",
            ]
        );
    }

    /// Answers the request that appears in `ipc/{dir}/`, as the host would.
    fn fake_host(
        ipc_dir: std::path::PathBuf,
        dir: &'static str,
    ) -> std::thread::JoinHandle<TaskRequest> {
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(name) = ipc::pending(&ipc_dir.join(dir)).into_iter().next() {
                    let bytes = std::fs::read(ipc_dir.join(dir).join(&name)).unwrap();
                    let request: TaskRequest = serde_json::from_slice(&bytes).unwrap();
                    assert_eq!(name, format!("{}.json", request.request_id));
                    let response = TaskResponse {
                        request_id: request.request_id.clone(),
                        ok: true,
                        text: format!("did {}", request.action.name()),
                    };
                    ipc::write_atomic(
                        &ipc_dir.join(ipc::RESPONSES_DIR),
                        &name,
                        &serde_json::to_vec(&response).unwrap(),
                    )
                    .unwrap();
                    return request;
                }
                assert!(std::time::Instant::now() < deadline, "no request in {dir}/");
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    }

    #[test]
    fn send_message_goes_to_messages_and_the_rest_to_tasks() {
        let d = tempfile::tempdir().unwrap();
        let paths = Paths {
            workspace: d.path().to_path_buf(),
            claude: "claude".into(),
        };
        let cases = [
            (
                Action::SendMessage {
                    text: "hi".into(),
                    chat_jid: None,
                },
                ipc::MESSAGES_DIR,
            ),
            (Action::ListTasks {}, ipc::TASKS_DIR),
            (
                Action::CancelTask {
                    task_id: "t1".into(),
                },
                ipc::TASKS_DIR,
            ),
        ];
        for (action, dir) in cases {
            let host = fake_host(paths.ipc(), dir);
            let request = TaskRequest {
                request_id: uuid::Uuid::new_v4().to_string(),
                action: action.clone(),
            };
            let response = exchange(&paths, &request, Duration::from_secs(10)).unwrap();
            assert_eq!(host.join().unwrap(), request);
            assert!(response.ok);
            assert_eq!(response.text, format!("did {}", action.name()));
            let answer = paths
                .ipc()
                .join(ipc::RESPONSES_DIR)
                .join(format!("{}.json", request.request_id));
            assert!(!answer.exists(), "the response is taken");
            std::fs::remove_file(
                paths
                    .ipc()
                    .join(dir)
                    .join(format!("{}.json", request.request_id)),
            )
            .unwrap();
        }
        assert!(ipc::pending(&paths.ipc().join(ipc::TASKS_DIR)).is_empty());
        assert!(ipc::pending(&paths.ipc().join(ipc::MESSAGES_DIR)).is_empty());
    }
}
