//! Running a group's agent: prepare its folders and hooks, make sure its
//! gateway socket is served, start its container with the active session,
//! read the output frames, update the session pointer, and take in what the
//! agent reported through IPC (archives from PreCompact, hook events).
//!
//! The public API is here: [`Agents`] ([`Agents::run`], [`Agents::run_prompt`],
//! [`Agents::ensure_socket`], [`Agents::clear_inputs`], [`Agents::take_events`]),
//! [`RunReport`], [`RunOptions`], [`Turn`], and the free functions
//! [`send_follow_up`], [`close`], [`take_frames`] and [`intake`]. The steps live in
//! `prepare` (folders, hooks, snapshots), `run` (one attempt's loop and
//! crash reasons), `frames` (the output protocol), `mailbox` (`input/`) and
//! `events` (`events/`).
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

mod events;
mod frames;
mod mailbox;
mod prepare;
mod run;

pub use events::intake;
pub use frames::take_frames;
pub use mailbox::{close, send_follow_up};
pub use prepare::{HOOK_EVENTS, hook_settings};

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::Mutex;

use g2_core::ipc;
use g2_core::wire::STALE_SESSION;

use crate::archives::ArchiveRecord;
use crate::background::Background;
use crate::config::Settings;
use crate::container::{self, ContainerRuntime};
use crate::gateway::{Gateway, Listening};
use crate::groups;
use crate::home::Home;
use crate::sessions::SessionManager;
use crate::store::Store;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

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

/// Started when a group's container starts and stopped when it exits: in
/// `g2 run`, what serves the agent's requests meanwhile (`g2 serve` serves
/// every group's requests all the time and sets none).
pub type RunWatch = Arc<dyn Fn(&GroupFolder) -> Result<Background> + Send + Sync>;

pub struct Agents {
    home: Home,
    settings: Settings,
    store: Store,
    sessions: SessionManager,
    runtime: Arc<dyn ContainerRuntime>,
    gateway: Gateway,
    sockets: Mutex<Vec<Listening>>,
    run_watch: Option<RunWatch>,
    /// Cleans captured memory again on the host, the host's credential
    /// included (the archives' redactor, `SessionManager::redactor`).
    redactor: g2_core::privacy::Redactor,
    /// Counts the groups' files (their disk quotas).
    disk: container::disk::Ledger,
    /// This host's name among the hosts of the home (its containers'
    /// `g2.host` label).
    host: String,
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
        let disk = container::disk::Ledger::new(
            home.clone(),
            std::time::Duration::from_millis(settings.container.disk_check_ms.max(100)),
            settings.container.disk_cpu_percent,
            crate::home::agent_owner(),
        );
        Agents {
            host: crate::cluster::host_id(&settings.cluster),
            redactor: sessions.redactor().clone(),
            disk,
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

    /// Who counts the groups' files.
    pub fn disk(&self) -> &container::disk::Ledger {
        &self.disk
    }

    /// Removes containers an earlier process of this host left behind.
    pub async fn reap(&self) -> Result<Vec<String>> {
        self.runtime
            .reap(&container::home_label(self.home.root()), &self.host)
            .await
    }

    /// Has every registered group's files counted once, in the background,
    /// for its status and its next start. (What an earlier host left in a
    /// group, claimed events and unsettled archives, is taken up by whoever
    /// takes the group's lease next: [`Agents::adopt`], by the queue.)
    pub async fn count_all(&self) -> Result<()> {
        for g in groups::list(&self.store).await? {
            self.disk.want(&g.folder);
        }
        Ok(())
    }

    /// Takes up what an earlier holder of the group left (this host
    /// before a restart, or a host that died or lost it): events it was
    /// taking in are taken in again, and archives it was writing are
    /// settled or removed (`archives::reconcile`). Before the group's
    /// first container under a new lease.
    pub async fn adopt(&self, folder: &GroupFolder) {
        if let Ok(n @ 1..) = self.release_event_claims(folder) {
            tracing::warn!(group = %folder, n, "events an earlier host left claimed are taken in again");
        }
        let (home, store, f) = (self.home.clone(), self.store.clone(), folder.clone());
        let settled =
            tokio::task::spawn_blocking(move || crate::archives::reconcile(&home, &store, &f))
                .await;
        if let Ok(Err(e)) = settled {
            tracing::warn!(group = %folder, error = %e, "settling archives left by a crash");
        }
    }

    /// Removes the group's containers that another host of the home
    /// started on this engine: one that died, or lost the group while
    /// paused, leaves its container running (docs/cluster.md).
    async fn evict(&self, folder: &GroupFolder) -> Result<()> {
        let label = container::home_label(self.home.root());
        for name in self.runtime.evict(&label, folder, &self.host).await? {
            tracing::warn!(group = %folder, container = %name, "removed the group's container of another host");
        }
        Ok(())
    }

    /// Serves the group's gateway socket unless this process serves it
    /// already. Whatever else is in its place (a socket of a host that had
    /// the group before, or anything the agent put there) is replaced.
    pub async fn ensure_socket(&self, folder: &GroupFolder) -> Result<()> {
        let mut sockets = self.sockets.lock().await;
        if let Some(i) = sockets.iter().position(|l| l.group() == Some(folder)) {
            if sockets[i].is_current() {
                return Ok(());
            }
            sockets.remove(i);
        }
        let found = self
            .home
            .ipc_tree(folder)?
            .kind(ipc::MODEL_SOCKET)
            .ok()
            .flatten();
        if found.is_some_and(|k| k != g2_core::confined::Kind::Socket) {
            self.home
                .planted(folder, "model.sock: not a socket; replaced");
        }
        sockets.push(self.gateway.listen_group(&self.home, folder).await?);
        Ok(())
    }

    /// Stops serving the group's gateway socket (another host has the
    /// group now; its socket, if it placed one, stays).
    pub async fn release_socket(&self, folder: &GroupFolder) {
        let mut sockets = self.sockets.lock().await;
        if let Some(i) = sockets.iter().position(|l| l.group() == Some(folder)) {
            sockets.remove(i).stop().await;
        }
    }

    /// The group sockets served, handed over to be stopped (at the end).
    pub async fn take_sockets(&self) -> Vec<Listening> {
        std::mem::take(&mut *self.sockets.lock().await)
    }

    /// How many group sockets this process serves.
    pub async fn sockets_served(&self) -> usize {
        self.sockets.lock().await.len()
    }

    /// A group over its disk quotas (or a host short of disk) does not
    /// start. An over-quota count is taken again before refusing: files
    /// may have been deleted since.
    async fn check_disk(&self, group: &groups::Group) -> Result<()> {
        let quotas = || container::disk::Quotas::of(&self.home, &self.settings.container, group);
        let count = self.disk.trusted(&group.folder).await?;
        let mut usage = container::disk::usage(&count, &quotas())?;
        if usage.over_quota() {
            let count = self.disk.fresh(&group.folder).await?;
            usage = container::disk::usage(&count, &quotas())?;
        }
        match usage.refusal() {
            Some(why) => Err(Error::OverQuota(why)),
            None => Ok(()),
        }
    }

    /// Runs one prompt in the group's container and returns when the
    /// container has finished (`g2 run`).
    pub async fn run_prompt(&self, group: &groups::Group, prompt: &str) -> Result<RunReport> {
        self.clear_inputs(&group.folder)?;
        self.run(group, prompt, RunOptions::default(), None).await
    }

    /// Runs the group's container with `prompt` until it exits. Each
    /// finished turn is also sent to `turns` as it happens. A warm run stays
    /// up between turns for follow-ups in `input/` until `_close` (see
    /// [`close`]); a one-shot run closes after its first turn. `group` is
    /// the row the caller read (the queue, once per batch): the run does
    /// not read it again. Only the capture switch is read where events are
    /// taken in ([`Agents::take_events`]), so capture turned off while the
    /// agent runs stops what it captures next.
    pub async fn run(
        &self,
        group: &groups::Group,
        prompt: &str,
        opts: RunOptions,
        turns: Option<TurnSink>,
    ) -> Result<RunReport> {
        let folder = &group.folder;
        self.check_disk(group).await?;
        // Counted again and again while the container runs, once more after.
        let _counted = self.disk.running(folder);
        self.prepare(group)?;
        self.ensure_socket(folder).await?;
        self.evict(folder).await?;
        let pointer = self.sessions.get(folder).await?;
        // An isolated task neither resumes nor moves the group's session.
        let (session, generation) = if opts.isolated {
            (None, None)
        } else {
            (pointer.session_id.clone(), Some(pointer.generation))
        };
        let mut report = self
            .attempt(
                group,
                prompt,
                session.clone(),
                generation,
                &opts,
                turns.as_ref(),
            )
            .await?;
        if report.errors.iter().any(|e| e.starts_with(STALE_SESSION)) && session.is_some() {
            tracing::warn!(
                group = %folder,
                "stored session not found; clearing the pointer and retrying fresh"
            );
            let generation = match generation {
                Some(g) => Some(self.sessions.delete(folder, g).await?.generation),
                None => None,
            };
            report = self
                .attempt(group, prompt, None, generation, &opts, turns.as_ref())
                .await?;
            report.retried_fresh = true;
        }
        if !opts.isolated {
            report.session_id = self.sessions.get(folder).await?.session_id;
        }
        report.archives = self.take_events(folder).await?;
        Ok(report)
    }
}
