//! `g2-agent mcp`: the stdio MCP server `g2` that the runner registers with
//! Claude Code. Its tools reach the host through the IPC folder: a request
//! is written to `tasks/{id}.json` (temp file + rename), the answer read
//! from `responses/{id}.json`, woken by inotify. The server holds no state
//! and no secret; which group asks is the folder it writes into.

use std::path::Path;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use g2_core::ipc;
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
pub struct SearchArgs {
    /// Words to find in archived conversations (all must match; word* matches a prefix).
    pub query: String,
    /// Most results (default 10).
    pub limit: Option<usize>,
}

#[derive(Clone)]
pub struct G2Tools {
    paths: Paths,
    tool_router: ToolRouter<Self>,
}

#[tool_router(router = tool_router)]
impl G2Tools {
    pub fn new(paths: Paths) -> Self {
        G2Tools { paths, tool_router: Self::tool_router() }
    }

    #[tool(description = "Archive the current conversation under a name (searchable later), bookmark it in the session history, and start a fresh session with the next message. Use when the user wants to start over or switch topics.")]
    async fn clear_session(&self, Parameters(a): Parameters<ClearArgs>) -> String {
        self.ask(Action::ClearSession { name: a.name }).await
    }

    #[tool(description = "List earlier sessions of this group (bookmarks with history ids), newest first.")]
    async fn list_sessions(&self) -> String {
        self.ask(Action::ListSessions {}).await
    }

    #[tool(description = "Switch back to an earlier session by its history id (see list_sessions). The switch takes effect with the next message.")]
    async fn resume_session(&self, Parameters(a): Parameters<ResumeArgs>) -> String {
        self.ask(Action::ResumeSession { history_id: a.history_id, save_current_as: a.save_current_as }).await
    }

    #[tool(description = "Full-text search over this group's archived conversations (best matches first, with snippets and file paths under conversations/).")]
    async fn search_sessions(&self, Parameters(a): Parameters<SearchArgs>) -> String {
        self.ask(Action::SearchSessions { query: a.query, limit: a.limit }).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for G2Tools {}

impl G2Tools {
    async fn ask(&self, action: Action) -> String {
        let paths = self.paths.clone();
        let request = TaskRequest { request_id: uuid::Uuid::new_v4().to_string(), action };
        match tokio::task::spawn_blocking(move || exchange(&paths, &request, ANSWER_TIMEOUT)).await {
            Ok(Ok(r)) if r.ok => r.text,
            Ok(Ok(r)) => format!("Error: {}", r.text),
            Ok(Err(e)) => format!("Error: {e}"),
            Err(e) => format!("Error: {e}"),
        }
    }
}

/// Writes a request and waits for its response file.
fn exchange(paths: &Paths, request: &TaskRequest, timeout: Duration) -> std::io::Result<TaskResponse> {
    let responses = paths.ipc().join(ipc::RESPONSES_DIR);
    std::fs::create_dir_all(&responses)?;
    let answer = responses.join(format!("{}.json", request.request_id));
    // Watch before asking, so the answer cannot slip past.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |_| {
        let _ = tx.send(());
    })
    .map_err(std::io::Error::other)?;
    watcher.watch(&responses, RecursiveMode::NonRecursive).map_err(std::io::Error::other)?;
    let body = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    ipc::write_atomic(&paths.ipc().join(ipc::TASKS_DIR), &format!("{}.json", request.request_id), &body)?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(r) = take(&answer) {
            return Ok(r);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the g2 host did not answer in time"));
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
