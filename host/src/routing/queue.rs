//! The group queue: which group's agent runs when, in which container.
//!
//! One actor task owns all state; everything else talks to it through a
//! [`QueueHandle`] (commands) or the wake channel (folders with new
//! messages). It is event-driven: nothing polls.
//!
//! Boundary: slots only — admission, the FIFO, warm containers,
//! follow-ups, retries. What the senders are told when their messages go
//! unanswered (and what giving up records) is [`notices`]; a task's run
//! is logged and posted by [`store::tasks::runs`]; the store is
//! reached through those and [`router`], never with SQL of its own.
//!
//! Invariants:
//! - at most one container per group, at most `queue.max_containers` in
//!   all; groups waiting for a slot are served first come, first served;
//! - a message for a group whose container is up goes into that
//!   container's `input/` as a follow-up (one file = one turn); replies
//!   come back in the order the prompts went in, so each reply answers the
//!   oldest outstanding batch and moves the cursor to its end
//!   ([`router::deliver_reply`]);
//! - a container with nothing to do is closed as soon as any other work
//!   waits (a scheduled task of its group, or a group waiting for a slot):
//!   work never waits behind an idle container; otherwise it is closed
//!   after the group's idle timeout;
//! - a failed turn (error frame, or exit before answering) is retried with
//!   exponential backoff (`queue.retries` tries from `queue.retry_base_ms`);
//!   after the last one the group is marked failing, the senders are told
//!   and the cursor moves past the messages;
//! - a clear or resume of the group's session closes its container after
//!   the current turn, so the next message starts fresh or resumed.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::Result;
use crate::agent::{self, Agents, RunOptions, RunReport, Turn};
use crate::channels::Channels;
use crate::config::QueueSettings;
use crate::groups::Group;
use crate::routing::notices::{self, GiveUp};
use crate::routing::rules as router;
use crate::store::{self, Store};
use crate::tasks::{self, Task};
use g2_core::validate::GroupFolder;

enum Cmd {
    Task(Task),
    Close(GroupFolder),
    Turn {
        folder: GroupFolder,
        run: u64,
        turn: Turn,
    },
    Exited {
        folder: GroupFolder,
        run: u64,
        result: Result<RunReport>,
    },
    Idle {
        folder: GroupFolder,
        run: u64,
        epoch: u64,
    },
    Retry(GroupFolder),
    Status(oneshot::Sender<Status>),
    Shutdown(oneshot::Sender<()>),
    ShutdownDeadline,
}

/// What the queue is doing.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Status {
    /// Groups with a container, and whether it is answering right now.
    pub running: Vec<RunningStatus>,
    /// Groups waiting for a slot, first in line first.
    pub waiting: Vec<GroupFolder>,
    pub max_containers: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunningStatus {
    pub group: GroupFolder,
    /// `messages` or `task`.
    pub kind: &'static str,
    /// Prompts sent and not answered yet.
    pub outstanding: usize,
    pub closing: bool,
}

/// Talks to the queue actor. Cheap to clone.
#[derive(Clone)]
pub struct QueueHandle {
    cmd: mpsc::UnboundedSender<Cmd>,
    wake: mpsc::UnboundedSender<GroupFolder>,
}

/// The receiving ends, until [`Queue::spawn`] takes them.
pub struct QueueInbox {
    cmd: mpsc::UnboundedReceiver<Cmd>,
    wake: mpsc::UnboundedReceiver<GroupFolder>,
}

/// A handle and its inbox: create these first, so the agents' request
/// links can hold the handle before the queue exists.
pub fn channel() -> (QueueHandle, QueueInbox) {
    let (cmd_tx, cmd) = mpsc::unbounded_channel();
    let (wake_tx, wake) = mpsc::unbounded_channel();
    (
        QueueHandle {
            cmd: cmd_tx,
            wake: wake_tx,
        },
        QueueInbox { cmd, wake },
    )
}

impl QueueHandle {
    /// The group has new messages (or may have).
    pub fn wake(&self, folder: &GroupFolder) {
        let _ = self.wake.send(folder.clone());
    }

    /// Where channels ring for new messages.
    pub fn wake_sender(&self) -> mpsc::UnboundedSender<GroupFolder> {
        self.wake.clone()
    }

    /// Runs a claimed scheduled task.
    pub fn task(&self, task: Task) {
        let _ = self.cmd.send(Cmd::Task(task));
    }

    /// Closes the group's container after its current turn.
    pub fn close(&self, folder: &GroupFolder) {
        let _ = self.cmd.send(Cmd::Close(folder.clone()));
    }

    pub async fn status(&self) -> Option<Status> {
        let (tx, rx) = oneshot::channel();
        self.cmd.send(Cmd::Status(tx)).ok()?;
        rx.await.ok()
    }

    /// Closes every container (each finishes its turn) and waits for them;
    /// the queue starts nothing afterwards.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

/// Records that messages up to `upto` went to the group's agent.
async fn mark_inflight(store: &Store, folder: &GroupFolder, upto: i64) {
    let f = folder.clone();
    if let Err(e) = store
        .write(move |tx| router::mark_inflight(tx, &f, upto))
        .await
    {
        tracing::warn!(group = %folder, error = %e, "recording the in-flight mark");
    }
}

enum Kind {
    Messages {
        /// `upto` of each prompt sent and not answered, oldest first.
        outstanding: VecDeque<i64>,
        /// Highest `seq` handed to this container.
        sent_upto: i64,
        failed: Option<String>,
        /// The follow-ups written to its `input/`: their `upto` and file.
        follow_ups: Vec<(i64, String)>,
    },
    Task {
        task: Box<Task>,
        run_at: DateTime<Utc>,
        started: Instant,
        reply: Option<String>,
        error: Option<String>,
    },
}

struct Run {
    id: u64,
    kind: Kind,
    closing: bool,
    /// Bumped whenever the container gets work; an idle timer armed
    /// with an older epoch does nothing.
    epoch: u64,
}

impl Run {
    fn is_idle(&self) -> bool {
        matches!(&self.kind, Kind::Messages { outstanding, .. } if outstanding.is_empty())
            && !self.closing
    }
}

#[derive(Default)]
struct GroupState {
    run: Option<Run>,
    tasks: VecDeque<Task>,
    retries: u32,
    retry_at: Option<Instant>,
    /// The last attempt ran and was cut short (why): the next prompt says
    /// so, so the agent continues instead of redoing what it did.
    interrupted: Option<String>,
}

/// The slot policy, apart from the actor so that it can be tested on its
/// own: groups that find every slot taken wait in one line, each once, and
/// are served first come, first served.
#[derive(Debug, Default)]
struct Line {
    waiting: VecDeque<GroupFolder>,
}

impl Line {
    /// Whether `folder` may start now, with `running` of `max` slots taken;
    /// if not, it joins the line (unless it is in it already).
    fn admit(&mut self, folder: &GroupFolder, running: usize, max: usize) -> bool {
        if running < max {
            return true;
        }
        if !self.waiting.iter().any(|f| f == folder) {
            self.waiting.push_back(folder.clone());
        }
        false
    }

    /// The group first in line, when a slot is free.
    fn next(&mut self, running: usize, max: usize) -> Option<GroupFolder> {
        if running < max {
            self.waiting.pop_front()
        } else {
            None
        }
    }

    fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = &GroupFolder> {
        self.waiting.iter()
    }
}

pub struct Queue {
    agents: Arc<Agents>,
    store: Store,
    channels: Channels,
    settings: QueueSettings,
    assistant_name: String,
    tasks_changed: Option<Arc<tokio::sync::Notify>>,
    me: mpsc::UnboundedSender<Cmd>,
    groups: HashMap<GroupFolder, GroupState>,
    fifo: Line,
    next_run: u64,
    stopping: Option<Vec<oneshot::Sender<()>>>,
}

impl Queue {
    /// Starts the queue actor.
    pub fn spawn(
        inbox: QueueInbox,
        handle: &QueueHandle,
        agents: Arc<Agents>,
        store: Store,
        channels: Channels,
        tasks_changed: Option<Arc<tokio::sync::Notify>>,
    ) -> tokio::task::JoinHandle<()> {
        let settings = agents.settings().queue.clone();
        let assistant_name = agents.settings().assistant_name.clone();
        let q = Queue {
            agents,
            store,
            channels,
            settings,
            assistant_name,
            tasks_changed,
            me: handle.cmd.clone(),
            groups: HashMap::new(),
            fifo: Line::default(),
            next_run: 0,
            stopping: None,
        };
        tokio::spawn(q.main(inbox))
    }

    async fn main(mut self, mut inbox: QueueInbox) {
        loop {
            tokio::select! {
                Some(cmd) = inbox.cmd.recv() => self.handle(cmd).await,
                Some(folder) = inbox.wake.recv() => self.wake(&folder).await,
                else => break,
            }
            if self.stopping.is_some() && self.active() == 0 {
                for tx in self.stopping.take().into_iter().flatten() {
                    let _ = tx.send(());
                }
                self.stopping = Some(Vec::new());
            }
        }
    }

    fn active(&self) -> usize {
        self.groups.values().filter(|g| g.run.is_some()).count()
    }

    async fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Task(t) => {
                let folder = t.group_folder.clone();
                let g = self.groups.entry(folder.clone()).or_default();
                g.tasks.push_back(t);
                match &g.run {
                    // Never behind an idle container.
                    Some(r) if r.is_idle() => self.close(&folder),
                    // Closed when its turn ends.
                    Some(_) => {}
                    None => self.want_slot(&folder).await,
                }
            }
            Cmd::Close(folder) => self.close(&folder),
            Cmd::Turn { folder, run, turn } => self.turn(&folder, run, turn).await,
            Cmd::Exited {
                folder,
                run,
                result,
            } => self.exited(&folder, run, result).await,
            Cmd::Idle { folder, run, epoch } => {
                let due = self
                    .groups
                    .get(&folder)
                    .and_then(|g| g.run.as_ref())
                    .is_some_and(|r| r.id == run && r.epoch == epoch && r.is_idle());
                if due {
                    tracing::debug!(group = %folder, "idle; closing the container");
                    self.close(&folder);
                }
            }
            Cmd::Retry(folder) => {
                if let Some(g) = self.groups.get_mut(&folder) {
                    g.retry_at = None;
                }
                self.wake(&folder).await;
            }
            Cmd::Status(tx) => {
                let mut running: Vec<RunningStatus> = self
                    .groups
                    .iter()
                    .filter_map(|(f, g)| {
                        let r = g.run.as_ref()?;
                        let (kind, outstanding) = match &r.kind {
                            Kind::Messages { outstanding, .. } => ("messages", outstanding.len()),
                            Kind::Task { .. } => ("task", 1),
                        };
                        Some(RunningStatus {
                            group: f.clone(),
                            kind,
                            outstanding,
                            closing: r.closing,
                        })
                    })
                    .collect();
                running.sort_by(|a, b| a.group.cmp(&b.group));
                let _ = tx.send(Status {
                    running,
                    waiting: self.fifo.iter().cloned().collect(),
                    max_containers: self.settings.max_containers,
                });
            }
            Cmd::Shutdown(tx) => {
                let first = self.stopping.is_none();
                self.stopping.get_or_insert_with(Vec::new).push(tx);
                if first {
                    let folders: Vec<GroupFolder> = self
                        .groups
                        .iter()
                        .filter(|(_, g)| g.run.is_some())
                        .map(|(f, _)| f.clone())
                        .collect();
                    for f in folders {
                        self.close(&f);
                    }
                    let wait =
                        Duration::from_secs(self.agents.settings().container.stop_grace_secs + 20);
                    self.later(wait, Cmd::ShutdownDeadline);
                }
            }
            Cmd::ShutdownDeadline => {
                if self.active() > 0 {
                    tracing::warn!(
                        running = self.active(),
                        "containers did not finish in time; removing them"
                    );
                    let _ = self.agents.reap().await;
                    for g in self.groups.values_mut() {
                        g.run = None;
                    }
                }
            }
        }
    }

    /// New messages may be waiting for `folder`.
    async fn wake(&mut self, folder: &GroupFolder) {
        if self.stopping.is_some() {
            return;
        }
        let group = match self.group(folder).await {
            Ok(Some(g)) => g,
            Ok(None) => return,
            Err(_) => return self.retry_soon(folder),
        };
        let others_wait = self.others_wait(folder);
        let g = self.groups.entry(folder.clone()).or_default();
        if let Some(run) = &mut g.run {
            // A follow-up for the running container — unless other work
            // waits for it to finish: then it finishes what it has, closes,
            // and these messages wait for the group's next turn in line.
            if let (
                Kind::Messages {
                    outstanding,
                    sent_upto,
                    follow_ups,
                    ..
                },
                false,
                false,
            ) = (&mut run.kind, run.closing, others_wait)
            {
                let after = *sent_upto;
                let jid = group.jid.clone();
                let batch = match self
                    .store
                    .read(move |c| router::next_batch(c, &group, after))
                    .await
                {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::error!(group = %folder, error = %e, "reading pending messages");
                        return;
                    }
                };
                if let Some(b) = batch {
                    let home = self.agents.home();
                    // Marked before the agent has it: an edit that comes
                    // later no longer changes these messages.
                    mark_inflight(&self.store, folder, b.upto).await;
                    match agent::send_follow_up(home, folder, &b.prompt) {
                        Ok(file) => {
                            self.channels.working(folder, &jid);
                            follow_ups.push((b.upto, file));
                            outstanding.push_back(b.upto);
                            *sent_upto = b.upto;
                            run.epoch += 1;
                        }
                        Err(e) => {
                            tracing::error!(group = %folder, error = %e, "writing a follow-up");
                        }
                    }
                }
            }
            return;
        }
        if g.retry_at.is_some_and(|t| t > Instant::now()) {
            return;
        }
        if !g.tasks.is_empty() || self.pending(&group).await.is_some() {
            self.want_slot(folder).await;
        }
    }

    /// The group's row: `Ok(None)` when it is not registered (any more).
    async fn group(&self, folder: &GroupFolder) -> Result<Option<Group>> {
        let f = folder.clone();
        self.store
            .read(move |c| store::groups::get(c, &f))
            .await
            .inspect_err(|e| tracing::error!(group = %folder, error = %e, "reading the group"))
    }

    /// Tries `folder` again in a second (after a database error).
    fn retry_soon(&self, folder: &GroupFolder) {
        self.later(Duration::from_secs(1), Cmd::Retry(folder.clone()));
    }

    /// Sends `cmd` to this actor after `delay` (timers are commands too, so
    /// all state changes happen in the actor).
    fn later(&self, delay: Duration, cmd: Cmd) {
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = me.send(cmd);
        });
    }

    /// Whether other work waits for `folder`'s container to go: a task of
    /// its own, or a group in line for a slot.
    fn others_wait(&self, folder: &GroupFolder) -> bool {
        !self.fifo.is_empty() || self.groups.get(folder).is_some_and(|g| !g.tasks.is_empty())
    }

    /// The batch the group's next container would start with.
    async fn pending(&self, group: &Group) -> Option<router::Batch> {
        let g = group.clone();
        self.store
            .read(move |c| {
                let cursor = router::cursor(c, &g.folder)?;
                router::next_batch(c, &g, cursor)
            })
            .await
            .unwrap_or_else(|e| {
                tracing::error!(group = %group.folder, error = %e, "reading pending messages");
                None
            })
    }

    async fn want_slot(&mut self, folder: &GroupFolder) {
        if self
            .fifo
            .admit(folder, self.active(), self.settings.max_containers)
        {
            self.start(folder).await;
            return;
        }
        // Make room: an idle container gives way to waiting work.
        let idle = self
            .groups
            .iter()
            .find(|(_, g)| g.run.as_ref().is_some_and(Run::is_idle))
            .map(|(f, _)| f.clone());
        if let Some(f) = idle {
            self.close(&f);
        }
    }

    /// Starts the group's container with its next task, or else its
    /// pending messages.
    async fn start(&mut self, folder: &GroupFolder) {
        if self.stopping.is_some() {
            return;
        }
        let group = match self.group(folder).await {
            Ok(Some(g)) => g,
            Ok(None) => {
                // Unregistered meanwhile: its tasks cannot run.
                if let Some(g) = self.groups.get_mut(folder) {
                    for t in g.tasks.drain(..) {
                        tracing::warn!(task = %t.id, group = %folder, "the task's group is gone; not run");
                    }
                }
                return;
            }
            Err(_) => return self.retry_soon(folder),
        };
        // Before the run exists, so no follow-up or _close of this run can
        // be written yet and then be taken for a leftover.
        if let Err(e) = self.agents.clear_inputs(folder) {
            tracing::error!(group = %folder, error = %e, "clearing input/");
        }
        let task = self
            .groups
            .entry(folder.clone())
            .or_default()
            .tasks
            .pop_front();
        let (kind, prompt, opts) = match task {
            Some(t) => {
                let opts = RunOptions {
                    warm: false,
                    scheduled: true,
                    isolated: t.context_mode != "group",
                };
                let prompt = t.prompt.clone();
                (
                    Kind::Task {
                        task: Box::new(t),
                        run_at: Utc::now(),
                        started: Instant::now(),
                        reply: None,
                        error: None,
                    },
                    prompt,
                    opts,
                )
            }
            None => {
                let Some(b) = self.pending(&group).await else {
                    return;
                };
                self.channels.working(folder, &group.jid);
                let kind = Kind::Messages {
                    outstanding: VecDeque::from([b.upto]),
                    sent_upto: b.upto,
                    failed: None,
                    follow_ups: Vec::new(),
                };
                // An attempt that ran and was cut short, here or by a host
                // that stopped mid-turn (its in-flight mark is still there).
                let interrupted = self
                    .groups
                    .get_mut(folder)
                    .and_then(|g| g.interrupted.take())
                    .or_else(|| b.resumes.then(|| notices::HOST_STOPPED.into()));
                let prompt = match interrupted {
                    Some(why) => format!("{}{}", router::interrupted_note(&why), b.prompt),
                    None => b.prompt,
                };
                (
                    kind,
                    prompt,
                    RunOptions {
                        warm: true,
                        ..Default::default()
                    },
                )
            }
        };
        let inflight = match &kind {
            Kind::Messages { sent_upto, .. } => Some(*sent_upto),
            Kind::Task { .. } => None,
        };
        self.next_run += 1;
        let id = self.next_run;
        let g = self.groups.entry(folder.clone()).or_default();
        g.run = Some(Run {
            id,
            kind,
            closing: false,
            epoch: 0,
        });
        let (agents, me, f, store) = (
            self.agents.clone(),
            self.me.clone(),
            folder.clone(),
            self.store.clone(),
        );
        tokio::spawn(async move {
            if let Some(upto) = inflight {
                mark_inflight(&store, &f, upto).await;
            }
            let (turn_tx, mut turns) = mpsc::unbounded_channel();
            let folder_arg = f.clone();
            let run = agents.run(&folder_arg, &prompt, opts, Some(turn_tx));
            tokio::pin!(run);
            // Turns are forwarded as they come, and all of them before the exit.
            let result = loop {
                tokio::select! {
                    biased;
                    Some(turn) = turns.recv() => { let _ = me.send(Cmd::Turn { folder: f.clone(), run: id, turn }); }
                    r = &mut run => break r,
                }
            };
            while let Ok(turn) = turns.try_recv() {
                let _ = me.send(Cmd::Turn {
                    folder: f.clone(),
                    run: id,
                    turn,
                });
            }
            let _ = me.send(Cmd::Exited {
                folder: f,
                run: id,
                result,
            });
        });
    }

    fn close(&mut self, folder: &GroupFolder) {
        let Some(run) = self.groups.get_mut(folder).and_then(|g| g.run.as_mut()) else {
            return;
        };
        if run.closing {
            return;
        }
        run.closing = true;
        if let Err(e) = agent::close(self.agents.home(), folder) {
            tracing::error!(group = %folder, error = %e, "could not ask the container to close");
        }
    }

    async fn turn(&mut self, folder: &GroupFolder, run_id: u64, turn: Turn) {
        let Some(g) = self.groups.get_mut(folder) else {
            return;
        };
        let Some(run) = g.run.as_mut().filter(|r| r.id == run_id) else {
            return;
        };
        match &mut run.kind {
            Kind::Task { reply, error, .. } => match turn {
                Turn::Reply(t) => *reply = Some(t),
                Turn::Failed(e) => *error = Some(e),
            },
            Kind::Messages {
                outstanding,
                failed,
                ..
            } => {
                let Some(upto) = outstanding.pop_front() else {
                    tracing::warn!(group = %folder, "a turn nobody asked for; ignored");
                    return;
                };
                if outstanding.is_empty() {
                    self.channels.idle(folder);
                }
                match turn {
                    Turn::Reply(text) => {
                        g.retries = 0;
                        let stored = match self.group(folder).await {
                            Ok(Some(group)) => {
                                let (sender, delivered, redactor) = (
                                    self.assistant_name.clone(),
                                    self.channels.stored_is_delivered(&group.jid),
                                    self.channels.redactor().clone(),
                                );
                                self.store
                                    .write(move |tx| {
                                        router::deliver_reply(
                                            tx, &group, &sender, &text, upto, delivered, &redactor,
                                        )
                                    })
                                    .await
                                    .map(|r| {
                                        if r.cleaned {
                                            self.store.truncate_wal();
                                        }
                                        r.message
                                    })
                            }
                            Ok(None) => Ok(None),
                            Err(e) => Err(e),
                        };
                        match stored {
                            Ok(Some(m)) => self.channels.deliver(m).await,
                            Ok(None) => {}
                            Err(e) => {
                                // The cursor did not move: redo from it rather
                                // than credit the next reply to these messages.
                                tracing::error!(group = %folder, error = %e, "storing a reply; the run is redone");
                                if let Some(Run {
                                    kind:
                                        Kind::Messages {
                                            failed,
                                            outstanding,
                                            ..
                                        },
                                    ..
                                }) = self.groups.get_mut(folder).and_then(|g| g.run.as_mut())
                                {
                                    *failed = Some(notices::reply_not_stored(&e));
                                    outstanding.clear();
                                }
                                self.close(folder);
                                return;
                            }
                        }
                    }
                    Turn::Failed(e) => {
                        tracing::warn!(group = %folder, error = %e, "turn failed");
                        *failed = Some(e);
                        outstanding.clear();
                        self.close(folder);
                        return;
                    }
                }
                let others_wait = self.others_wait(folder);
                let idle = self.idle_timeout(folder).await;
                let Some(run) = self.groups.get_mut(folder).and_then(|g| g.run.as_mut()) else {
                    return;
                };
                if run.is_idle() {
                    if others_wait {
                        self.close(folder);
                    } else {
                        run.epoch += 1;
                        let epoch = run.epoch;
                        self.later(
                            idle,
                            Cmd::Idle {
                                folder: folder.clone(),
                                run: run_id,
                                epoch,
                            },
                        );
                    }
                }
            }
        }
    }

    async fn idle_timeout(&self, folder: &GroupFolder) -> Duration {
        match self.group(folder).await {
            Ok(Some(g)) => crate::container::timeouts(&self.agents.settings().container, &g).1,
            _ => Duration::from_secs(self.agents.settings().container.idle_timeout_secs),
        }
    }

    async fn exited(&mut self, folder: &GroupFolder, run_id: u64, result: Result<RunReport>) {
        let Some(g) = self.groups.get_mut(folder) else {
            return;
        };
        if g.run.as_ref().is_none_or(|r| r.id != run_id) {
            return;
        }
        let run = g.run.take().expect("checked above");
        self.channels.idle(folder);
        match run.kind {
            Kind::Messages {
                outstanding,
                sent_upto,
                failed,
                follow_ups,
            } => {
                // What the agent never took is not an interrupted attempt:
                // its messages are routed again as if new.
                let untaken = failed.is_none()
                    && result.as_ref().is_ok_and(|r| r.crash.is_none())
                    && !outstanding.is_empty()
                    && outstanding.iter().all(|upto| {
                        follow_ups
                            .iter()
                            .find(|(u, _)| u == upto)
                            .is_some_and(|(_, file)| self.untaken(folder, file))
                    });
                if untaken {
                    tracing::info!(group = %folder, n = outstanding.len(), "the agent left before taking its follow-ups; they are routed again");
                    let f = folder.to_string();
                    if let Err(e) = self
                        .store
                        .write(move |tx| router::drop_inflight(tx, &f))
                        .await
                    {
                        tracing::warn!(group = %folder, error = %e, "dropping the in-flight mark");
                    }
                }
                let unanswered =
                    !untaken && (failed.is_some() || !outstanding.is_empty() || result.is_err());
                if self.stopping.is_some() && result.is_ok() {
                    // Cut by this host's shutdown: the messages stay unanswered
                    // and the next host continues (their in-flight mark says so).
                } else if unanswered {
                    match (failed, &result) {
                        // Never reached the agent: try again from scratch.
                        (_, Err(crate::Error::OverQuota(why))) => {
                            self.give_up(folder, sent_upto, why, GiveUp::Refused).await;
                        }
                        (_, Err(e)) => self.failed(folder, &e.to_string(), sent_upto, false).await,
                        // The agent died: running it again would repeat the harm.
                        (_, Ok(r)) if r.crash.is_some() => {
                            let why = r.crash.clone().unwrap_or_default();
                            self.give_up(folder, sent_upto, &why, GiveUp::Crashed).await;
                        }
                        // It ran and stopped short: resume and say so.
                        (Some(e), Ok(_)) => self.failed(folder, &e, sent_upto, true).await,
                        (None, Ok(r)) => {
                            let why = notices::unanswered(r);
                            self.failed(folder, &why, sent_upto, true).await;
                        }
                    }
                }
            }
            Kind::Task {
                task,
                run_at,
                started,
                reply,
                error,
            } => {
                let outcome = tasks::runs::outcome(reply, error, &result);
                self.task_done(&task, run_at, started.elapsed(), outcome)
                    .await;
            }
        }
        if let Ok(r) = &result {
            tracing::info!(group = %folder, container = %r.container, exit = r.exit_code, "container finished");
        }
        // Free slot: first in line first, then this group's own next work.
        while let Some(next) = self.fifo.next(self.active(), self.settings.max_containers) {
            if self.groups.get(&next).is_some_and(|g| g.run.is_none()) {
                self.start(&next).await;
            }
        }
        self.wake(folder).await;
    }

    /// Whether a follow-up file is still in the group's `input/`: the agent
    /// never took it.
    fn untaken(&self, folder: &GroupFolder, file: &str) -> bool {
        self.agents
            .home()
            .ipc_sub(folder, g2_core::ipc::INPUT_DIR)
            .is_ok_and(|dir| {
                dir.kind(file)
                    .is_ok_and(|k| k == Some(g2_core::confined::Kind::File))
            })
    }

    /// A messages turn failed: retried after a backoff (`interrupted`: the
    /// agent ran, so the next prompt tells it to continue, not redo); after
    /// the last retry the senders are told.
    async fn failed(&mut self, folder: &GroupFolder, why: &str, upto: i64, interrupted: bool) {
        let g = self.groups.entry(folder.clone()).or_default();
        g.retries += 1;
        if g.retries <= self.settings.retries {
            let delay = Duration::from_millis(
                self.settings
                    .retry_base_ms
                    .saturating_mul(1 << (g.retries - 1).min(20)),
            );
            tracing::warn!(
                group = %folder,
                attempt = g.retries,
                retry_in_ms = delay.as_millis() as u64,
                error = why,
                interrupted,
                "will retry"
            );
            g.interrupted = interrupted.then(|| why.to_string());
            g.retry_at = Some(Instant::now() + delay);
            self.later(delay, Cmd::Retry(folder.clone()));
            return;
        }
        let tries = self.settings.retries + 1;
        tracing::error!(
            group = %folder,
            tries,
            error = why,
            "giving up; the group is marked failing"
        );
        self.give_up(folder, upto, why, GiveUp::Retried(tries))
            .await;
    }

    /// Tells the senders of the messages up to `upto` why they get no
    /// answer, moves the cursor past them and marks the group failing
    /// ([`notices::give_up`]), then delivers the notice.
    async fn give_up(&mut self, folder: &GroupFolder, upto: i64, why: &str, how: GiveUp) {
        let g = self.groups.entry(folder.clone()).or_default();
        g.retries = 0;
        g.interrupted = None;
        if !matches!(how, GiveUp::Retried(_)) {
            tracing::error!(
                group = %folder,
                reason = why,
                "not answered and not re-run; the senders are told"
            );
        }
        let Ok(Some(group)) = self.group(folder).await else {
            return;
        };
        let (sender, delivered, why, redactor) = (
            self.assistant_name.clone(),
            self.channels.stored_is_delivered(&group.jid),
            why.to_string(),
            self.channels.redactor().clone(),
        );
        let stored = self
            .store
            .write(move |tx| {
                notices::give_up(tx, &group, &sender, upto, &why, how, delivered, &redactor)
            })
            .await;
        match stored {
            Ok((m, cleaned)) => {
                if cleaned {
                    self.store.truncate_wal();
                }
                self.channels.deliver(m).await;
            }
            Err(e) => tracing::error!(group = %folder, error = %e, "recording the failure"),
        }
    }

    /// A task's run is over: logged and its result posted
    /// ([`store::tasks::runs`](mod@store::tasks::runs)), then the scheduler is told its
    /// tasks changed.
    async fn task_done(
        &mut self,
        task: &Task,
        run_at: DateTime<Utc>,
        took: Duration,
        outcome: std::result::Result<String, String>,
    ) {
        tasks::runs::record(
            &self.store,
            &self.channels,
            &self.assistant_name,
            task,
            run_at,
            took,
            outcome,
        )
        .await;
        if let Some(n) = &self.tasks_changed {
            n.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// The group has work (messages or a task).
        Want(usize),
        /// The n-th running container exits.
        Exit(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..6usize).prop_map(Op::Want),
            (0..6usize).prop_map(Op::Exit)
        ]
    }

    proptest! {
        /// The actor's use of the line, replayed over any order of wants and
        /// exits: at most `max` running, one per group, no slot free while a
        /// group waits, and groups leave the line in the order they joined.
        #[test]
        fn slots_are_shared_fairly(max in 1..4usize, ops in proptest::collection::vec(op(), 0..64)) {
            let mut line = Line::default();
            let mut running: Vec<GroupFolder> = Vec::new();
            let mut joined: VecDeque<GroupFolder> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Want(g) => {
                        let g = GroupFolder::new(format!("g{g}")).unwrap();
                        // A running group gets follow-ups, not a second container.
                        if running.contains(&g) {
                            continue;
                        }
                        if line.admit(&g, running.len(), max) {
                            running.push(g);
                        } else if !joined.contains(&g) {
                            joined.push_back(g);
                        }
                    }
                    Op::Exit(i) => {
                        if running.is_empty() {
                            continue;
                        }
                        running.remove(i % running.len());
                        while let Some(next) = line.next(running.len(), max) {
                            prop_assert_eq!(Some(&next), joined.front(), "first come, first served");
                            joined.pop_front();
                            if !running.contains(&next) {
                                running.push(next);
                            }
                        }
                    }
                }
                prop_assert!(running.len() <= max);
                let mut unique = running.clone();
                unique.sort();
                unique.dedup();
                prop_assert_eq!(unique.len(), running.len(), "one container per group");
                prop_assert!(line.is_empty() || running.len() == max, "no free slot while a group waits");
                prop_assert_eq!(line.iter().cloned().collect::<VecDeque<_>>(), joined.clone());
                prop_assert!(line.iter().all(|g| !running.contains(g)), "a waiting group has no container");
            }
        }
    }
}
