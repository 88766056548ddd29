//! Running a group's agent: prepare its folders and hooks, make sure its
//! gateway socket is served, start its container with the active session,
//! read the output frames, update the session pointer, and take in what the
//! agent reported through IPC (archives from PreCompact, hook events).
//!
//! Invariants:
//! - the pointer is written only through [`SessionManager`] with the
//!   generation read before the run: a `clear` during a run is never undone
//!   by the run's result;
//! - a session Claude Code cannot find is cleared and the prompt retried
//!   once, fresh — never looped on;
//! - a container never outlives its run: the hard timeout stops it (grace,
//!   then kill) and the runtime removes every container it started;
//! - host → agent files are written through a temp file and a rename.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use g2_core::confined::Dir;
use g2_core::ipc;
use g2_core::wire::{
    AgentEvent, ContainerInput, ContainerOutput, InputMessage, OUTPUT_END, OUTPUT_START,
    OutputStatus, STALE_SESSION,
};

use crate::archives::{ArchiveRecord, Prepared};
use crate::background::Background;
use crate::config::Settings;
use crate::container::{self, ContainerRuntime, Output};
use crate::gateway::{Gateway, Listening};
use crate::groups::{self, Group};
use crate::home::Home;
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use crate::{Error, Result};

/// Most stdout a container may write without completing a frame.
const MAX_PENDING_OUTPUT: usize = 10 << 20;

/// What one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub group: String,
    /// The replies, one per finished turn.
    pub replies: Vec<String>,
    /// Errors the agent reported.
    pub errors: Vec<String>,
    /// The session the group now points at.
    pub session_id: Option<String>,
    pub container: String,
    /// The stored session was gone and the prompt ran in a fresh one.
    pub retried_fresh: bool,
    /// Archives the agent wrote (PreCompact) and the host indexed.
    pub archives: Vec<ArchiveRecord>,
    pub exit_code: i64,
    pub timed_out: bool,
    /// Why the agent died, when it did (out of memory, out of processes,
    /// killed, over its disk quota, past its time limit): such a turn is
    /// reported to the sender, never re-run.
    pub crash: Option<String>,
}

/// How a run goes.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stay up between turns for follow-ups until `_close`.
    pub warm: bool,
    /// A scheduled task (the agent is told so).
    pub scheduled: bool,
    /// A fresh session that leaves the group's pointer alone.
    pub isolated: bool,
}

/// A finished turn, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    Reply(String),
    Failed(String),
}

pub type TurnSink = tokio::sync::mpsc::UnboundedSender<Turn>;

/// Hooks registered in every group's `.claude/settings.json`.
pub const HOOK_EVENTS: &[&str] = &[
    "PreCompact",
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "Stop",
    "SessionEnd",
];

/// Started when a group's container starts and stopped when it exits: in
/// `g2 run`, what serves the agent's requests meanwhile (`g2 serve` serves
/// every group's requests all the time and sets none).
pub type RunWatch = Arc<dyn Fn(&str) -> Result<Background> + Send + Sync>;

pub struct Agents {
    home: Home,
    settings: Settings,
    store: Store,
    sessions: SessionManager,
    runtime: Arc<dyn ContainerRuntime>,
    gateway: Gateway,
    sockets: Mutex<Vec<Listening>>,
    run_watch: Option<RunWatch>,
}

impl Agents {
    pub fn new(
        home: Home,
        settings: Settings,
        store: Store,
        sessions: SessionManager,
        runtime: Arc<dyn ContainerRuntime>,
        gateway: Gateway,
    ) -> Self {
        Agents {
            home,
            settings,
            store,
            sessions,
            runtime,
            gateway,
            sockets: Mutex::new(Vec::new()),
            run_watch: None,
        }
    }

    /// Starts `watch` for the time each container runs (see [`RunWatch`]).
    pub fn with_run_watch(mut self, watch: RunWatch) -> Self {
        self.run_watch = Some(watch);
        self
    }

    pub fn sessions(&self) -> &SessionManager {
        &self.sessions
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Removes containers an earlier host of this home left behind.
    pub async fn reap(&self) -> Result<Vec<String>> {
        self.runtime
            .reap(&container::home_label(self.home.root()))
            .await
    }

    /// Serves the group's gateway socket unless a live one is there already
    /// (another g2 process serving it).
    pub async fn ensure_socket(&self, folder: &str) -> Result<()> {
        let path = self.home.ipc_dir(folder)?.join(ipc::MODEL_SOCKET);
        let mut sockets = self.sockets.lock().await;
        // Ours and still a socket (the agent may have put a link in its place).
        let found = self
            .home
            .ipc_tree(folder)?
            .kind(ipc::MODEL_SOCKET)
            .ok()
            .flatten();
        let intact = found == Some(g2_core::confined::Kind::Socket);
        if let Some(i) = sockets.iter().position(|l| Path::new(&l.address) == path) {
            if intact {
                return Ok(());
            }
            sockets.remove(i);
        }
        // Served by this host's `g2 serve` listeners (only a socket is
        // connected to: never through a link).
        if intact && tokio::net::UnixStream::connect(&path).await.is_ok() {
            return Ok(());
        }
        if !intact && found.is_some() {
            self.home
                .planted(folder, "model.sock: not a socket; replaced");
        }
        sockets.push(self.gateway.listen_group(&self.home, folder).await?);
        Ok(())
    }

    /// Runs one prompt in the group's container and returns when the
    /// container has finished (`g2 run`).
    pub async fn run_prompt(&self, folder: &str, prompt: &str) -> Result<RunReport> {
        self.clear_inputs(folder)?;
        self.run(folder, prompt, RunOptions::default(), None).await
    }

    /// Removes what an earlier container of the group left in its `input/`
    /// (a `_close`, follow-ups it never took): they must not end the next
    /// run nor be answered twice — unanswered messages are in the next
    /// prompt, since the router's cursor did not move past them. Called by
    /// whoever starts a run, before anything may write a new input.
    pub fn clear_inputs(&self, folder: &str) -> Result<()> {
        let dir = self.home.ipc_sub(folder, ipc::INPUT_DIR)?;
        let _ = dir.remove(ipc::CLOSE);
        for name in dir.pending() {
            let _ = dir.remove(&name);
        }
        Ok(())
    }

    /// Runs the group's container with `prompt` until it exits. Each
    /// finished turn is also sent to `turns` as it happens. A warm run stays
    /// up between turns for follow-ups in `input/` until `_close` (see
    /// [`close`]); a one-shot run closes after its first turn.
    pub async fn run(
        &self,
        folder: &str,
        prompt: &str,
        opts: RunOptions,
        turns: Option<TurnSink>,
    ) -> Result<RunReport> {
        let group = groups::require(&self.store, folder).await?;
        // A group over its disk quota (or a host short of disk) does not start.
        let usage =
            container::disk::measure_async(&self.home, &self.settings.container, &group).await?;
        if let Some(why) = usage.refusal() {
            return Err(Error::OverQuota(why));
        }
        self.prepare(&group)?;
        self.ensure_socket(folder).await?;
        let pointer = self.sessions.get(folder).await?;
        // An isolated task neither resumes nor moves the group's session.
        let (session, generation) = if opts.isolated {
            (None, None)
        } else {
            (pointer.session_id.clone(), Some(pointer.generation))
        };
        let mut report = self
            .attempt(
                &group,
                prompt,
                session.clone(),
                generation,
                &opts,
                turns.as_ref(),
            )
            .await?;
        if report.errors.iter().any(|e| e.starts_with(STALE_SESSION)) && session.is_some() {
            tracing::warn!(
                group = folder,
                "stored session not found; clearing the pointer and retrying fresh"
            );
            let generation = match generation {
                Some(g) => Some(self.sessions.delete(folder, g).await?.generation),
                None => None,
            };
            report = self
                .attempt(&group, prompt, None, generation, &opts, turns.as_ref())
                .await?;
            report.retried_fresh = true;
        }
        if !opts.isolated {
            report.session_id = self.sessions.get(folder).await?.session_id;
        }
        report.archives = self.take_events(folder).await?;
        Ok(report)
    }

    /// Folders, ownership and hooks a run needs. Everything in the group's
    /// trees is done beneath directory handles that never follow a link
    /// ([`g2_core::confined`]); a folder replaced by the agent is made real
    /// again and recorded.
    fn prepare(&self, group: &Group) -> Result<()> {
        let folder = group.folder.as_str();
        self.home.ensure_layout()?;
        self.home.ensure_group(folder, &group.name, group.is_main)?;
        let ipc_tree = self.home.ipc_tree(folder)?;
        for d in [
            ipc::INPUT_DIR,
            ipc::EVENTS_DIR,
            ipc::ERRORS_DIR,
            ipc::TASKS_DIR,
            ipc::MESSAGES_DIR,
            ipc::RESPONSES_DIR,
        ] {
            self.home.ensure_sub(folder, &ipc_tree, d)?;
        }
        // Claude Code keeps its transcripts here: a link in their place
        // would send them elsewhere (and break the group).
        let claude = self.home.claude_tree(folder)?;
        let projects = self.home.ensure_sub(folder, &claude, "projects")?;
        self.home
            .ensure_sub(folder, &projects, crate::home::PROJECT_DIR)?;
        write_hooks(&self.home, folder)?;
        self.write_snapshots(group, &ipc_tree)?;
        let (uid, gid) = crate::container::image::agent_ids();
        if crate::container::image::host_ids().0 == 0 {
            for tree in [self.home.group_tree(folder)?, claude, ipc_tree] {
                tree.chown_tree(uid, gid);
            }
        }
        Ok(())
    }

    /// Read-only snapshots for the agent, written before each start:
    /// `session_history.json`, `current_tasks.json` (the group's tasks; all
    /// tasks for main) and `available_groups.json` (empty unless main).
    fn write_snapshots(&self, group: &Group, ipc_tree: &Dir) -> Result<()> {
        let (folder, is_main) = (group.folder.clone(), group.is_main);
        let (history, tasks, groups) = self.store.read_blocking(move |c| {
            let history = crate::sessions::history(c, &folder)?;
            let tasks: Vec<Value> =
                crate::store::tasks::list(c, (!is_main).then_some(folder.as_str()))?
                    .into_iter()
                    .map(|t| {
                        json!({
                            "id": t.id, "groupFolder": t.group_folder, "prompt": t.prompt,
                            "scheduleType": t.schedule_type, "scheduleValue": t.schedule_value,
                            "status": t.status, "nextRun": t.next_run,
                        })
                    })
                    .collect();
            let groups = if is_main {
                store::groups::list(c)?
            } else {
                Vec::new()
            };
            Ok((history, tasks, groups))
        })?;
        for (name, v) in [
            (
                "session_history.json",
                serde_json::to_value(&history).unwrap_or_default(),
            ),
            ("current_tasks.json", Value::Array(tasks)),
            ("available_groups.json", groups::snapshot(&groups)),
        ] {
            let r = ipc_tree.write_atomic(name, &serde_json::to_vec_pretty(&v).unwrap_or_default());
            self.home.confined(&group.folder, name, r)?;
        }
        Ok(())
    }

    async fn attempt(
        &self,
        group: &Group,
        prompt: &str,
        session_id: Option<String>,
        mut generation: Option<i64>,
        opts: &RunOptions,
        turns: Option<&TurnSink>,
    ) -> Result<RunReport> {
        let spec = container::spec_for(&self.home, &self.settings.container, group, None)?;
        let (hard, idle) = container::timeouts(&self.settings.container, group);
        let input = ContainerInput {
            prompt: prompt.to_string(),
            session_id: session_id.clone(),
            group_folder: group.folder.clone(),
            chat_jid: group.jid.clone(),
            is_main: group.is_main,
            is_scheduled_task: opts.scheduled,
            assistant_name: Some(self.settings.assistant_name.clone()),
            // Past the host's own idle close, so it only ever ends orphans.
            idle_exit_secs: Some(idle.as_secs() + (idle.as_secs() / 10).clamp(5, 300)),
        };
        let bytes = serde_json::to_vec(&input).map_err(|e| Error::Invalid(e.to_string()))?;
        // The agent's g2 tools are answered while its container runs.
        let watching = match &self.run_watch {
            Some(watch) => Some(watch(&group.folder)?),
            None => None,
        };
        let mut running = self.runtime.run(spec, bytes).await?;
        let mut report = RunReport {
            group: group.folder.clone(),
            replies: Vec::new(),
            errors: Vec::new(),
            session_id,
            container: running.name.clone(),
            retried_fresh: false,
            archives: Vec::new(),
            exit_code: 0,
            timed_out: false,
            crash: None,
        };
        let mut deadline = Instant::now() + hard;
        let mut idle_since: Option<Instant> = None;
        let mut known_session = report.session_id.clone();
        let mut pending = Vec::new();
        let mut stderr_tail = String::new();
        let mut stopping = false;
        let check_every = Duration::from_millis(self.settings.container.disk_check_ms.max(100));
        let mut next_check = Instant::now() + check_every;
        let (mut grew_from, mut over_quota) = (None::<u64>, None::<String>);
        loop {
            if Instant::now() >= next_check && !stopping {
                next_check = Instant::now() + check_every;
                match container::disk::measure_async(&self.home, &self.settings.container, group)
                    .await
                {
                    Ok(u) => {
                        let start = *grew_from.get_or_insert(u.used_bytes);
                        // Below the host's reserve, only a group still writing is stopped.
                        let why = u.refusal().filter(|_| {
                            u.used_bytes > u.quota_bytes || u.used_bytes > start + (1 << 20)
                        });
                        if let Some(why) = why {
                            tracing::warn!(group = %group.folder, container = %running.name, reason = %why, "disk limit; stopping");
                            over_quota = Some(why);
                            stopping = true;
                            self.stop_quietly(&running.id).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(group = %group.folder, error = %e, "measuring disk use")
                    }
                }
            }
            let wait = match idle_since {
                Some(t) => (t + idle).min(deadline),
                None => deadline,
            }
            .min(if stopping { deadline } else { next_check });
            let item = tokio::time::timeout_at(wait.into(), running.output.recv()).await;
            match item {
                Ok(Some(Output::Stdout(b))) => {
                    pending.extend_from_slice(&b);
                    for frame in take_frames(&mut pending) {
                        if let Some(id) = &frame.new_session_id
                            && known_session.as_ref() != Some(id)
                        {
                            known_session = Some(id.clone());
                            generation = self.point_at(&group.folder, id, generation).await;
                        }
                        if frame.new_session_id.is_some() {
                            report.session_id = frame.new_session_id.clone();
                        }
                        let turn = match (frame.status, frame.result, frame.error) {
                            (OutputStatus::Success, Some(text), _) => {
                                report.replies.push(text.clone());
                                Some(Turn::Reply(text))
                            }
                            (_, _, Some(e)) => {
                                report.errors.push(e.clone());
                                // A stale session is retried here, not reported.
                                (!e.starts_with(STALE_SESSION)).then_some(Turn::Failed(e))
                            }
                            _ => None,
                        };
                        if let (Some(t), Some(sink)) = (turn, turns) {
                            let _ = sink.send(t);
                        }
                    }
                    if opts.warm {
                        // Activity keeps a warm container alive; the deadline
                        // only ends a turn that hangs.
                        deadline = Instant::now() + hard;
                    } else if report.replies.len() + report.errors.len() > 0 && idle_since.is_none()
                    {
                        // One prompt per `g2 run`: the turn is over, let the agent finish.
                        idle_since = Some(Instant::now());
                        self.close_or_stop(&group.folder, &running.id).await;
                    }
                    if pending.len() > MAX_PENDING_OUTPUT && !stopping {
                        report.errors.push(
                            "the agent wrote more than 10 MB without a frame; stopped".into(),
                        );
                        stopping = true;
                        self.stop_quietly(&running.id).await;
                    }
                }
                Ok(Some(Output::Stderr(b))) => {
                    let text = String::from_utf8_lossy(&b);
                    for line in text.lines() {
                        tracing::debug!(container = %running.name, "{line}");
                    }
                    stderr_tail.push_str(&text);
                    if stderr_tail.len() > 16_384 {
                        let cut = stderr_tail.len() - 16_384;
                        let cut = (cut..stderr_tail.len())
                            .find(|i| stderr_tail.is_char_boundary(*i))
                            .unwrap_or(0);
                        stderr_tail.drain(..cut);
                    }
                }
                Ok(None) => break,
                Err(_) if Instant::now() >= deadline => {
                    if !stopping {
                        tracing::warn!(container = %running.name, "hard timeout; stopping");
                        report.timed_out = true;
                        stopping = true;
                        self.stop_quietly(&running.id).await;
                    } else {
                        // Stop did not end the streams: give up waiting on them.
                        break;
                    }
                }
                Err(_) if idle_since.is_some_and(|t| Instant::now() >= t + idle) => {
                    // Idle (one-shot only: a warm run's owner decides when
                    // it is idle): ask the agent to finish (again; harmless).
                    self.close_or_stop(&group.folder, &running.id).await;
                    idle_since = Some(Instant::now());
                }
                // Time for the next disk check (at the top of the loop).
                Err(_) => {}
            }
        }
        let exit = tokio::time::timeout(self.grace() + Duration::from_secs(30), &mut running.exit)
            .await
            .ok()
            .and_then(|r| r.ok())
            .unwrap_or(container::Exit {
                code: -1,
                oom_killed: false,
            });
        report.exit_code = exit.code;
        report.crash = over_quota
            .map(|why| format!("was stopped: {why}"))
            .or_else(|| self.crash_reason(group, &report, exit, &stderr_tail, stopping));
        if let Some(w) = watching {
            w.stop().await;
        }
        if report.replies.is_empty() && report.errors.is_empty() {
            report.errors.push(format!(
                "the agent exited ({}) without a reply: {}",
                report.exit_code,
                stderr_tail.trim()
            ));
        }
        Ok(report)
    }

    /// Why the container died, if it did rather than finish: the turn is
    /// then reported to its sender and not re-run (it would only repeat
    /// the harm). `stopped`: the host stopped it (time limit).
    fn crash_reason(
        &self,
        group: &Group,
        report: &RunReport,
        exit: container::Exit,
        stderr: &str,
        stopped: bool,
    ) -> Option<String> {
        let cfg = &group.container_config;
        if report.timed_out {
            let (hard, _) = container::timeouts(&self.settings.container, group);
            return Some(format!(
                "did not finish within its time limit ({} s) and was stopped",
                hard.as_secs()
            ));
        }
        if exit.oom_killed {
            return Some(format!(
                "ran out of memory (its limit is {} MB)",
                cfg.memory_mb.unwrap_or(self.settings.container.memory_mb)
            ));
        }
        // Node and bash say so when fork() or a thread start hits pids.max.
        let pids = [
            "fork: retry",
            "fork: Resource temporarily unavailable",
            "EAGAIN",
            "Resource temporarily unavailable",
        ];
        let failed = exit.code != 0 && exit.code != -1;
        if failed && pids.iter().any(|p| stderr.contains(p)) {
            return Some(format!(
                "ran out of processes (its limit is {})",
                cfg.pids.unwrap_or(self.settings.container.pids)
            ));
        }
        if exit.code > 128 && !stopped {
            return Some(format!("was killed (signal {})", exit.code - 128));
        }
        // The runner saw claude die mid-turn (killed, aborted, crashed).
        if let Some(e) = report
            .errors
            .iter()
            .find(|e| e.starts_with(g2_core::wire::AGENT_DIED))
        {
            let what: String = e.chars().take(200).collect();
            let what = what.trim_end_matches([':', ' ']);
            return Some(if e.contains("signal") {
                format!("was killed ({what})")
            } else {
                format!("crashed ({what})")
            });
        }
        // No frame at all, yet a failing exit: the runner itself died.
        if failed && report.replies.is_empty() && report.errors.is_empty() {
            let tail: String = stderr
                .trim()
                .chars()
                .rev()
                .take(300)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return Some(format!(
                "crashed (exit code {}){}",
                exit.code,
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            ));
        }
        None
    }

    /// Asks the agent to finish; when even that cannot be written, stops
    /// its container: no error may leave a container behind.
    async fn close_or_stop(&self, folder: &str, id: &str) {
        if let Err(e) = close(&self.home, folder) {
            tracing::error!(error = %e, "could not write _close; stopping the container");
            self.stop_quietly(id).await;
        }
    }

    async fn stop_quietly(&self, id: &str) {
        if let Err(e) = self.runtime.stop(id, self.grace()).await {
            tracing::error!(container = id, error = %e, "stopping a container");
        }
    }

    /// Points the group at the session its agent runs, unless the pointer
    /// moved since the run read it (a clear or resume meanwhile stands).
    /// Returns the generation to use for the next write (None: stop writing).
    async fn point_at(&self, folder: &str, id: &str, generation: Option<i64>) -> Option<i64> {
        let g = generation?;
        match self.sessions.set(folder, id, g).await {
            Ok(p) => Some(p.generation),
            Err(Error::StaleGeneration { .. }) => {
                tracing::info!(
                    group = folder,
                    "pointer changed during the run; not overwriting it"
                );
                None
            }
            Err(e) => {
                tracing::warn!(group = folder, error = %e, "could not record the session");
                None
            }
        }
    }

    fn grace(&self) -> Duration {
        Duration::from_secs(self.settings.container.stop_grace_secs)
    }

    /// Takes the agent's IPC events: indexes archive notices, stores hook
    /// records; unreadable files go to `errors/`.
    pub async fn take_events(&self, folder: &str) -> Result<Vec<ArchiveRecord>> {
        let dir = self.home.ipc_sub(folder, ipc::EVENTS_DIR)?;
        let mut archived = Vec::new();
        for name in dir.pending() {
            let outcome = match self
                .home
                .confined(folder, "events/", dir.read(&name, 1 << 20))
                .and_then(|b| {
                    serde_json::from_slice::<AgentEvent>(&b)
                        .map_err(|e| Error::Invalid(format!("agent event: {e}")))
                }) {
                Ok(AgentEvent::Archive {
                    path,
                    title,
                    session_id,
                    ..
                }) => self
                    .adopt_archive(folder, &path, &title, session_id.as_deref())
                    .await
                    .map(|r| archived.extend(r)),
                Ok(AgentEvent::Hook {
                    event,
                    session_id,
                    at,
                    data,
                }) => self.store_hook(folder, event, session_id, at, data).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    let _ = dir.remove(&name);
                }
                Err(e) => {
                    tracing::warn!(group = folder, file = %name, error = %e, "agent event kept in errors/");
                    if let Ok(errors) = self.home.ipc_sub(folder, ipc::ERRORS_DIR) {
                        let _ = dir.rename_to(&name, &errors, &name);
                    }
                }
            }
        }
        Ok(archived)
    }

    async fn adopt_archive(
        &self,
        folder: &str,
        rel: &str,
        title: &str,
        session_id: Option<&str>,
    ) -> Result<Option<ArchiveRecord>> {
        let prepared = Prepared::adopt(&self.home, folder, rel, title, session_id)?;
        let path = prepared.rel_path.clone();
        let known = self
            .store
            .read(move |c| store::archives::is_recorded(c, &path))
            .await?;
        if known {
            return Ok(None);
        }
        let rec = self
            .store
            .write(move |tx| store::archives::insert(tx, &prepared))
            .await?;
        Ok(Some(rec))
    }

    async fn store_hook(
        &self,
        folder: &str,
        event: String,
        session: Option<String>,
        at: String,
        data: Value,
    ) -> Result<()> {
        let event: String = event.chars().take(64).collect();
        let g = folder.to_string();
        self.store
            .write(move |tx| {
                tx.execute(
                    "INSERT INTO hook_events (group_folder, session_id, event, data, at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    rusqlite::params![g, session, event, data.to_string(), at],
                )?;
                Ok(())
            })
            .await
    }
}

/// Pulls complete frames out of `buf`, leaving any partial one. Searches
/// bytes: no copy of the buffer per chunk, and offsets stay right when the
/// output is not valid UTF-8.
pub fn take_frames(buf: &mut Vec<u8>) -> Vec<ContainerOutput> {
    use memchr::memmem;
    let (open, close) = (OUTPUT_START.as_bytes(), OUTPUT_END.as_bytes());
    let mut frames = Vec::new();
    loop {
        let Some(start) = memmem::find(buf, open) else {
            // Keep only a possible partial marker.
            let keep = buf.len().saturating_sub(open.len());
            buf.drain(..keep);
            break;
        };
        let body_from = start + open.len();
        let Some(len) = memmem::find(&buf[body_from..], close) else {
            buf.drain(..start);
            break;
        };
        match serde_json::from_slice::<ContainerOutput>(
            buf[body_from..body_from + len].trim_ascii(),
        ) {
            Ok(f) => frames.push(f),
            Err(e) => tracing::warn!(error = %e, "unreadable output frame skipped"),
        }
        buf.drain(..body_from + len + close.len());
    }
    frames
}

/// Asks the agent to finish: the `_close` sentinel.
pub fn close(home: &Home, folder: &str) -> Result<()> {
    let dir = home.ipc_sub(folder, ipc::INPUT_DIR)?;
    let r = dir.write_atomic(ipc::CLOSE, b"");
    home.confined(folder, "input/_close", r)
}

/// Writes a message for a running agent into its `input/` folder; returns
/// the file's name.
pub fn send_follow_up(home: &Home, folder: &str, text: &str) -> Result<String> {
    let dir = home.ipc_sub(folder, ipc::INPUT_DIR)?;
    let msg = serde_json::to_vec(&InputMessage::Message {
        text: text.to_string(),
    })
    .map_err(|e| Error::Invalid(e.to_string()))?;
    let name = ipc::timestamped_name();
    let r = dir.write_atomic(&name, &msg);
    home.confined(folder, "input/", r)?;
    Ok(name)
}

/// Registers g2's hooks in a group's `.claude/settings.json`, keeping any
/// other settings in the file.
fn write_hooks(home: &Home, folder: &str) -> Result<()> {
    let tree = home.claude_tree(folder)?;
    // The agent can write here: never read through a link it planted (a
    // link is replaced by the write below).
    let mut settings: Value = match tree.read("settings.json", 1 << 20) {
        Ok(t) => serde_json::from_slice(&t)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({})),
        Err(e) if g2_core::confined::is_planted(&e) => {
            home.planted(folder, ".claude/settings.json: a link; replaced");
            json!({})
        }
        Err(_) => json!({}),
    };
    let mut hooks = serde_json::Map::new();
    for ev in HOOK_EVENTS {
        hooks.insert(
            ev.to_string(),
            json!([{ "hooks": [{ "type": "command", "command": format!("/usr/local/bin/g2-agent hook {ev}"), "timeout": 30 }] }]),
        );
    }
    settings["hooks"] = Value::Object(hooks);
    let r = tree.write_atomic(
        "settings.json",
        &serde_json::to_vec_pretty(&settings).unwrap_or_default(),
    );
    home.confined(folder, ".claude/settings.json", r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_across_chunks_and_noise() {
        let f1 = ContainerOutput {
            status: OutputStatus::Success,
            result: Some("hi".into()),
            new_session_id: Some("s".into()),
            error: None,
        }
        .frame();
        let f2 = ContainerOutput {
            status: OutputStatus::Success,
            result: None,
            new_session_id: Some("s".into()),
            error: None,
        }
        .frame();
        let all = format!("noise \u{fffd}\n{f1}more noise\n{f2}");
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for c in all.as_bytes().chunks(7) {
            buf.extend_from_slice(c);
            got.extend(take_frames(&mut buf));
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].result.as_deref(), Some("hi"));
        assert_eq!(got[1].result, None);
        assert!(buf.len() < OUTPUT_START.len());
    }

    #[test]
    fn hooks_keep_other_settings() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        let claude = home.claude_dir("main").unwrap();
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::write(
            claude.join("settings.json"),
            r#"{"model":"x","hooks":{"Old":[]}}"#,
        )
        .unwrap();
        write_hooks(&home, "main").unwrap();
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(claude.join("settings.json")).unwrap())
                .unwrap();
        assert_eq!(v["model"], "x");
        assert!(v["hooks"].get("Old").is_none());
        assert_eq!(
            v["hooks"]["PreCompact"][0]["hooks"][0]["command"],
            "/usr/local/bin/g2-agent hook PreCompact"
        );
    }
}
