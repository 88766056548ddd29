//! One attempt: the group's container started with a prompt and its output
//! read until it ends. The loop is a few named steps over [`Attempt`]:
//! [`Agents::start`] (input, request watch, container), then per wake-up
//! [`Attempt::check_disk`], [`Attempt::read_stdout`] (chunk → frames →
//! pointer and turns), [`Attempt::read_stderr`] or [`Attempt::timer`]
//! (hard deadline, idle close), and at the end [`Attempt::finish`] (exit,
//! crash reason, the report). [`Agents::crash_reason`] says why an agent
//! died, if it did.
//!
//! Boundary: called by [`Agents::run`](super::Agents::run) only; the
//! session pointer is written only through
//! [`SessionManager`](crate::sessions::SessionManager) with the generation
//! read before the run; every container it starts is stopped or exits
//! before it returns.

use std::time::{Duration, Instant};

use g2_core::trace::Stage;
use g2_core::wire::{ContainerInput, STALE_SESSION};

use super::frames::{self, Finished, take_frames};
use super::mailbox::close;
use super::{Agents, RunOptions, RunReport, Turn, TurnSink};
use crate::background::Background;
use crate::container::{self, Output, Running};
use crate::groups::Group;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

/// Most stdout a container may write without completing a frame.
const MAX_PENDING_OUTPUT: usize = 10 << 20;

/// Most of the container's stderr kept for the report.
const STDERR_TAIL: usize = 16_384;

/// A running attempt: the container, its report so far, and the clocks
/// that end it.
pub(super) struct Attempt<'a> {
    agents: &'a Agents,
    group: &'a Group,
    opts: &'a RunOptions,
    turns: Option<&'a TurnSink>,
    running: Running,
    /// What serves the agent's requests while it runs (`g2 run`).
    watching: Option<Background>,
    report: RunReport,
    hard: Duration,
    idle: Duration,
    deadline: Instant,
    /// When a one-shot run asked its agent to finish.
    idle_since: Option<Instant>,
    /// The generation the pointer is written with (None: stop writing).
    generation: Option<i64>,
    known_session: Option<String>,
    /// Stdout not yet a complete frame.
    pending: Vec<u8>,
    stderr_tail: String,
    /// The host is stopping the container.
    stopping: bool,
    check_every: Duration,
    next_check: Instant,
    /// The group's disk use when measuring began.
    grew_from: Option<u64>,
    /// Its processes are looked into by the disk ledger while this lives.
    _processes: Option<container::disk::Processes>,
    over_quota: Option<String>,
}

impl Agents {
    /// Runs the group's container once with `prompt` and reads its output
    /// until it ends.
    pub(super) async fn attempt(
        &self,
        group: &Group,
        prompt: &str,
        session_id: Option<String>,
        generation: Option<i64>,
        opts: &RunOptions,
        turns: Option<&TurnSink>,
    ) -> Result<RunReport> {
        let mut run = self
            .start(group, prompt, session_id, generation, opts, turns)
            .await?;
        loop {
            run.check_disk().await;
            let wait = run.wait_until();
            let item = tokio::time::timeout_at(wait.into(), run.running.output.recv()).await;
            match item {
                Ok(Some(Output::Stdout(b))) => run.read_stdout(&b).await,
                Ok(Some(Output::Stderr(b))) => run.read_stderr(&b),
                Ok(None) => break,
                Err(_) => {
                    if !run.timer().await {
                        break;
                    }
                }
            }
        }
        Ok(run.finish().await)
    }

    /// Step 1: the container started with its input (and, for `g2 run`, the
    /// watch that answers its requests).
    async fn start<'a>(
        &'a self,
        group: &'a Group,
        prompt: &str,
        session_id: Option<String>,
        generation: Option<i64>,
        opts: &'a RunOptions,
        turns: Option<&'a TurnSink>,
    ) -> Result<Attempt<'a>> {
        let mut spec = container::spec_for(
            &self.home,
            &self.settings.container,
            group,
            None,
            &self.host,
        )?;
        // Only a list of the host's own: the hooks default to the same one.
        let skip = &self.settings.memory.skip_tools;
        if !skip.iter().eq(g2_core::wire::SKIPPED_TOOLS.iter()) {
            spec.env
                .push((g2_core::wire::ENV_SKIP_TOOLS.into(), skip.join(",")));
        }
        // The container's stamps come only while the host traces turns.
        if crate::trace::on() {
            spec.env
                .push((g2_core::wire::ENV_AGENT_TRACE.into(), "1".into()));
        }
        let wait = self.settings.memory.inject_wait_ms;
        if wait != g2_settings::INJECT_WAIT_MS {
            spec.env
                .push((g2_core::wire::ENV_INJECT_WAIT_MS.into(), wait.to_string()));
        }
        let (hard, idle) = container::timeouts(&self.settings.container, group);
        let input = ContainerInput {
            prompt: prompt.to_string(),
            session_id: session_id.clone(),
            group_folder: group.folder.to_string(),
            chat_jid: group.jid.clone(),
            is_main: group.is_main,
            is_scheduled_task: opts.scheduled,
            assistant_name: Some(self.settings.assistant_name.clone()),
            // Past the host's own idle close, so it only ever ends orphans.
            idle_exit_secs: Some(idle.as_secs() + (idle.as_secs() / 10).clamp(5, 300)),
        };
        let bytes = serde_json::to_vec(&input)?;
        // The agent's g2 tools are answered while its container runs.
        let watching = match &self.run_watch {
            Some(watch) => Some(watch(&group.folder)?),
            None => None,
        };
        let running = self.runtime.run(spec, bytes).await?;
        let processes = self.disk.processes(&group.folder, &running.id, running.pid);
        let report = RunReport {
            group: group.folder.to_string(),
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
        let check_every = Duration::from_millis(self.settings.container.disk_check_ms.max(100));
        Ok(Attempt {
            agents: self,
            group,
            opts,
            turns,
            running,
            watching,
            known_session: report.session_id.clone(),
            report,
            hard,
            idle,
            deadline: Instant::now() + hard,
            idle_since: None,
            generation,
            pending: Vec::new(),
            stderr_tail: String::new(),
            stopping: false,
            check_every,
            next_check: Instant::now() + check_every,
            grew_from: None,
            over_quota: None,
            _processes: processes,
        })
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
    async fn close_or_stop(&self, folder: &GroupFolder, id: &str) {
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
    async fn point_at(
        &self,
        folder: &GroupFolder,
        id: &str,
        generation: Option<i64>,
    ) -> Option<i64> {
        let g = generation?;
        match self.sessions.set(folder, id, g).await {
            Ok(p) => Some(p.generation),
            Err(Error::StaleGeneration { .. }) => {
                tracing::info!(
                    group = %folder,
                    "pointer changed during the run; not overwriting it"
                );
                None
            }
            Err(e) => {
                tracing::warn!(group = %folder, error = %e, "could not record the session");
                None
            }
        }
    }

    fn grace(&self) -> Duration {
        Duration::from_secs(self.settings.container.stop_grace_secs)
    }
}

impl Attempt<'_> {
    /// Step 2, at most every `disk_check_ms`: the group's latest count
    /// (the ledger counts a running group in the background, so this never
    /// waits for a walk) against its quotas; the container is stopped when
    /// the group is over them, when its files could not be counted, or,
    /// below the host's reserve, when it is still growing.
    async fn check_disk(&mut self) {
        if Instant::now() < self.next_check || self.stopping {
            return;
        }
        let agents = self.agents;
        self.next_check = Instant::now() + self.check_every;
        let Some(count) = agents.disk.latest(&self.group.folder) else {
            return;
        };
        let quotas =
            container::disk::Quotas::of(&agents.home, &agents.settings.container, self.group);
        let why = match container::disk::usage(&count, &quotas) {
            Ok(u) => {
                let start = *self.grew_from.get_or_insert(u.used_bytes);
                // Below the host's reserve, only a group still writing is stopped.
                u.refusal()
                    .filter(|_| u.over_quota() || u.used_bytes > start + (1 << 20))
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = why {
            tracing::warn!(group = %self.group.folder, container = %self.running.name, reason = %why, "disk limit; stopping");
            self.over_quota = Some(why);
            self.stopping = true;
            agents.stop_quietly(&self.running.id).await;
        }
    }

    /// Until when to wait for output: the idle close, the hard deadline or
    /// the next disk check, whichever comes first.
    fn wait_until(&self) -> Instant {
        match self.idle_since {
            Some(t) => (t + self.idle).min(self.deadline),
            None => self.deadline,
        }
        .min(if self.stopping {
            self.deadline
        } else {
            self.next_check
        })
    }

    /// Step 3: a chunk of stdout → complete frames → the pointer and the
    /// turns; then the clocks, and the bound on output without a frame.
    async fn read_stdout(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        for frame in take_frames(&mut self.pending) {
            self.take_frame(frame).await;
        }
        self.after_output().await;
        if self.pending.len() > MAX_PENDING_OUTPUT && !self.stopping {
            self.report
                .errors
                .push("the agent wrote more than 10 MB without a frame; stopped".into());
            self.stopping = true;
            self.agents.stop_quietly(&self.running.id).await;
        }
    }

    /// One frame: a session it announces moves the pointer (under the
    /// generation guard); a turn it finishes goes into the report and to
    /// the sink.
    async fn take_frame(&mut self, frame: g2_core::wire::ContainerOutput) {
        if let Some(id) = &frame.new_session_id
            && self.known_session.as_ref() != Some(id)
        {
            self.known_session = Some(id.clone());
            self.generation = self
                .agents
                .point_at(&self.group.folder, id, self.generation)
                .await;
        }
        if frame.new_session_id.is_some() {
            self.report.session_id = frame.new_session_id.clone();
        }
        if frame.result.is_some() {
            crate::trace::stamp(Stage::ReplyFrame, &self.group.folder, None);
        }
        if let Some(t) = &frame.trace {
            crate::trace::container(&self.group.folder, t);
        }
        let turn = match frames::finished(frame) {
            Some(Finished::Reply(text)) => {
                self.report.replies.push(text.clone());
                Some(Turn::Reply(text))
            }
            Some(Finished::Error(e)) => {
                self.report.errors.push(e.clone());
                // A stale session is retried here, not reported.
                (!e.starts_with(STALE_SESSION)).then_some(Turn::Failed(e))
            }
            None => None,
        };
        if let (Some(t), Some(sink)) = (turn, self.turns) {
            let _ = sink.send(t);
        }
    }

    /// After output: a warm run's deadline moves on; a one-shot run whose
    /// turn is over is asked to finish.
    async fn after_output(&mut self) {
        if self.opts.warm {
            // Activity keeps a warm container alive; the deadline
            // only ends a turn that hangs.
            self.deadline = Instant::now() + self.hard;
        } else if self.report.replies.len() + self.report.errors.len() > 0
            && self.idle_since.is_none()
        {
            // One prompt per `g2 run`: the turn is over, let the agent finish.
            self.idle_since = Some(Instant::now());
            self.agents
                .close_or_stop(&self.group.folder, &self.running.id)
                .await;
        }
    }

    /// Step 3': stderr is logged and its tail kept for the report.
    fn read_stderr(&mut self, chunk: &[u8]) {
        let text = String::from_utf8_lossy(chunk);
        for line in text.lines() {
            tracing::debug!(container = %self.running.name, "{line}");
        }
        let tail = &mut self.stderr_tail;
        tail.push_str(&text);
        if tail.len() > STDERR_TAIL {
            let cut = tail.len() - STDERR_TAIL;
            let cut = (cut..tail.len())
                .find(|i| tail.is_char_boundary(*i))
                .unwrap_or(0);
            tail.drain(..cut);
        }
    }

    /// Step 4, when no output came in time: past the hard deadline the
    /// container is stopped (and, if stopping did not end its streams, the
    /// reading ends: returns false); a one-shot run idle too long is asked
    /// to finish again.
    async fn timer(&mut self) -> bool {
        if Instant::now() >= self.deadline {
            if self.stopping {
                // Stop did not end the streams: give up waiting on them.
                return false;
            }
            tracing::warn!(container = %self.running.name, "hard timeout; stopping");
            self.report.timed_out = true;
            self.stopping = true;
            self.agents.stop_quietly(&self.running.id).await;
        } else if self
            .idle_since
            .is_some_and(|t| Instant::now() >= t + self.idle)
        {
            // Idle (one-shot only: a warm run's owner decides when
            // it is idle): ask the agent to finish (again; harmless).
            self.agents
                .close_or_stop(&self.group.folder, &self.running.id)
                .await;
            self.idle_since = Some(Instant::now());
        }
        // Otherwise: time for the next disk check (at the top of the loop).
        true
    }

    /// Step 5: the exit read (or given up on), the crash reason, the watch
    /// stopped, and a report that says something even without a frame.
    async fn finish(mut self) -> RunReport {
        let agents = self.agents;
        let exit = tokio::time::timeout(
            agents.grace() + Duration::from_secs(30),
            &mut self.running.exit,
        )
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(container::Exit {
            code: -1,
            oom_killed: false,
        });
        let mut report = self.report;
        report.exit_code = exit.code;
        report.crash = self
            .over_quota
            .map(|why| format!("was stopped: {why}"))
            .or_else(|| {
                agents.crash_reason(self.group, &report, exit, &self.stderr_tail, self.stopping)
            });
        if let Some(w) = self.watching {
            w.stop().await;
        }
        if report.replies.is_empty() && report.errors.is_empty() {
            report.errors.push(format!(
                "the agent exited ({}) without a reply: {}",
                report.exit_code,
                self.stderr_tail.trim()
            ));
        }
        report
    }
}
