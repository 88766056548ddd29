//! The group queue: which group's agent runs when, in which container.
//!
//! One actor task owns all state; everything else talks to it through a
//! [`QueueHandle`] (commands), the wake channel (folders with new
//! messages) or the task channel (scheduled tasks that are due). It is
//! event-driven: nothing polls.
//!
//! Boundary: slots only — admission, the FIFO, warm containers,
//! follow-ups, retries. What the senders are told when their messages go
//! unanswered (and what giving up records) is [`notices`](super::notices);
//! a task's run is logged by [`tasks::runs`](crate::tasks::runs); the
//! store is reached through those and
//! [`router`], never with SQL of its own. The chats are reached only
//! through an [`Outlet`] (replies out, working and idle): the queue never
//! sees the channels.
//!
//! One message's group row is read once per batch, when the group is
//! woken (`wake`), and carried as a [`Group`] into the run
//! (`Agents::run`). It is read again only where a stale row would be
//! wrong: a group that waited in line for a slot, a reply or notice stored
//! for a group that may have been removed meanwhile, and the next batch.
//!
//! The actor is split by concept: `admission.rs` (the line, waking a
//! group, follow-ups, asking for a slot), `start.rs` (a container started
//! with its prompt), `outcome.rs` (turns, exits, retries, giving up, task
//! results), `outlet.rs` (the way out).
//!
//! Invariants:
//! - at most one container per group, at most `queue.max_containers` in
//!   all; groups waiting for a slot are served first come, first served;
//! - a message for a group whose container is up goes into that
//!   container's `input/` as a follow-up (one file = one turn); replies
//!   come back in the order the prompts went in, so each reply answers the
//!   oldest outstanding batch and moves the cursor to its end
//!   ([`router::deliver_reply`]);
//! - a batch, first prompt or follow-up, is the oldest pending messages
//!   within the prompt budget ([`router::next_batch`]); after each reply
//!   what is still pending goes on at once (a backlog drains without new
//!   messages to ring for it);
//! - a container with nothing to do is closed as soon as any other work
//!   waits (a scheduled task of its group, or a group waiting for a slot):
//!   work never waits behind an idle container; otherwise it is closed
//!   after the group's idle timeout;
//! - a failed turn (error frame, or exit before answering) is retried with
//!   exponential backoff (`queue.retries` tries from `queue.retry_base_ms`);
//!   after the last one the group is marked failing, the senders are told
//!   and the cursor moves past the messages;
//! - a clear or resume of the group's session closes its container after
//!   the current turn, so the next message starts fresh or resumed; one
//!   from outside the agent (the API, so the CLI too) first *holds* the
//!   group ([`QueueHandle::hold`]): its container finishes its turn and
//!   exits, nothing of the group starts while held, and on release its
//!   pending work is routed again — so a session is never archived while
//!   an agent still writes to it;
//! - with [`Leases`] (several hosts on one store, docs/cluster.md), only
//!   a group this host owns is started, and the in-flight mark and the
//!   reply are written under the lease generation the run started with: a
//!   run whose lease is gone stores nothing and leaves its messages to the
//!   group's new owner, unanswered, untold.

mod admission;
mod outcome;
mod outlet;
mod start;

pub use outlet::Outlet;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::Result;
use crate::agent::{Agents, RunReport, Turn};
use crate::cluster::Leases;
use crate::config::QueueSettings;
use crate::groups::Group;
use crate::routing::rules as router;
use crate::store::{self, Store};
use crate::tasks::Task;
use g2_core::validate::GroupFolder;

use admission::Line;

enum Cmd {
    Close(GroupFolder),
    Hold(GroupFolder, oneshot::Sender<()>),
    Release(GroupFolder),
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
    tasks: mpsc::UnboundedSender<Task>,
}

/// The receiving ends, until [`Queue::spawn`] takes them.
pub struct QueueInbox {
    cmd: mpsc::UnboundedReceiver<Cmd>,
    wake: mpsc::UnboundedReceiver<GroupFolder>,
    tasks: mpsc::UnboundedReceiver<Task>,
}

/// A handle and its inbox: create these first, so the agents' request
/// links can hold the handle before the queue exists.
pub fn channel() -> (QueueHandle, QueueInbox) {
    let (cmd_tx, cmd) = mpsc::unbounded_channel();
    let (wake_tx, wake) = mpsc::unbounded_channel();
    let (tasks_tx, tasks) = mpsc::unbounded_channel();
    (
        QueueHandle {
            cmd: cmd_tx,
            wake: wake_tx,
            tasks: tasks_tx,
        },
        QueueInbox { cmd, wake, tasks },
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
        let _ = self.tasks.send(task);
    }

    /// Where the scheduler hands the tasks it claimed.
    pub fn task_sender(&self) -> mpsc::UnboundedSender<Task> {
        self.tasks.clone()
    }

    /// Closes the group's container after its current turn.
    pub fn close(&self, folder: &GroupFolder) {
        let _ = self.cmd.send(Cmd::Close(folder.clone()));
    }

    /// Holds the group: its container finishes its current turn and exits
    /// (this waits for that), and nothing of the group starts until the
    /// returned [`Hold`] is dropped; then its pending messages and tasks
    /// are routed again. What a change of the group's session from outside
    /// its agent runs under.
    pub async fn hold(&self, folder: &GroupFolder) -> Hold {
        // Made first: a caller that gives up while waiting still releases.
        let hold = Hold {
            cmd: self.cmd.clone(),
            folder: folder.clone(),
        };
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Hold(folder.clone(), tx)).is_ok() {
            let _ = rx.await;
        }
        hold
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

/// A held group ([`QueueHandle::hold`]); released when dropped.
pub struct Hold {
    cmd: mpsc::UnboundedSender<Cmd>,
    folder: GroupFolder,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.cmd.send(Cmd::Release(self.folder.clone()));
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
    /// The group's row the container was started with (its limits and
    /// timeouts are this row's).
    group: Arc<Group>,
    closing: bool,
    /// Bumped whenever the container gets work; an idle timer armed
    /// with an older epoch does nothing.
    epoch: u64,
    /// The lease generation the run started under (with [`Leases`]).
    lease: Option<i64>,
    /// A write of the run was refused: the group is another host's now.
    fenced: bool,
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
    /// Holds on the group ([`QueueHandle::hold`]): nothing starts while
    /// any is held.
    held: u32,
    /// Holders waiting for the group's container to exit.
    hold_waiters: Vec<oneshot::Sender<()>>,
}

pub struct Queue {
    agents: Arc<Agents>,
    store: Store,
    outlet: Arc<dyn Outlet>,
    /// What the log keeps of answered messages is cleaned with (the
    /// outlet's, taken once).
    redactor: g2_core::privacy::Redactor,
    settings: QueueSettings,
    assistant_name: String,
    tasks_changed: Option<Arc<tokio::sync::Notify>>,
    me: mpsc::UnboundedSender<Cmd>,
    groups: HashMap<GroupFolder, GroupState>,
    fifo: Line,
    next_run: u64,
    stopping: Option<Vec<oneshot::Sender<()>>>,
    /// The groups this host owns, when it shares the store with others.
    leases: Option<Leases>,
    /// The lease generation each group was last adopted under.
    adopted: HashMap<GroupFolder, i64>,
}

/// What a run's writes for its group carry: its lease, when hosts share
/// the store.
fn fence(leases: Option<&Leases>, lease: Option<i64>) -> Option<crate::cluster::Fence> {
    leases.zip(lease).map(|(l, g)| l.at(g))
}

impl Queue {
    /// Starts the queue actor; what it says to the chats goes out through
    /// `outlet`.
    pub fn spawn(
        inbox: QueueInbox,
        handle: &QueueHandle,
        agents: Arc<Agents>,
        store: Store,
        outlet: Arc<dyn Outlet>,
        tasks_changed: Option<Arc<tokio::sync::Notify>>,
        leases: Option<Leases>,
    ) -> tokio::task::JoinHandle<()> {
        let settings = agents.settings().queue.clone();
        let assistant_name = agents.settings().assistant_name.clone();
        let q = Queue {
            agents,
            store,
            redactor: outlet.redactor().clone(),
            outlet,
            settings,
            assistant_name,
            tasks_changed,
            me: handle.cmd.clone(),
            groups: HashMap::new(),
            fifo: Line::default(),
            next_run: 0,
            stopping: None,
            leases,
            adopted: HashMap::new(),
        };
        tokio::spawn(q.main(inbox))
    }

    async fn main(mut self, mut inbox: QueueInbox) {
        loop {
            tokio::select! {
                Some(cmd) = inbox.cmd.recv() => self.handle(cmd).await,
                Some(task) = inbox.tasks.recv() => self.task(task).await,
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

    /// Whether something holds the group ([`QueueHandle::hold`]).
    fn held(&self, folder: &GroupFolder) -> bool {
        self.groups.get(folder).is_some_and(|g| g.held > 0)
    }

    async fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Close(folder) => self.close(&folder),
            Cmd::Hold(folder, tx) => {
                let g = self.groups.entry(folder.clone()).or_default();
                g.held += 1;
                if g.run.is_some() {
                    g.hold_waiters.push(tx);
                    self.close(&folder);
                } else {
                    let _ = tx.send(());
                }
            }
            Cmd::Release(folder) => {
                let g = self.groups.entry(folder.clone()).or_default();
                g.held = g.held.saturating_sub(1);
                if g.held == 0 {
                    self.wake(&folder).await;
                }
            }
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
                let _ = tx.send(self.status());
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
                    for (f, g) in &mut self.groups {
                        g.hold_waiters.clear();
                        if g.run.take().is_some()
                            && let Some(l) = &self.leases
                        {
                            l.end(f);
                        }
                    }
                }
            }
        }
    }

    fn status(&self) -> Status {
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
        Status {
            running,
            waiting: self.fifo.iter().cloned().collect(),
            max_containers: self.settings.max_containers,
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
}
