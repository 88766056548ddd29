//! Starting a group's container: its next task, or else its pending
//! messages, as one prompt; the run is spawned with the group's row the
//! queue read, and its turns and exit come back to the actor as commands.
//! Also closing a container (after its current turn).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use tokio::sync::mpsc;

use super::{Cmd, Kind, Queue, Run, router};
use crate::agent::{self, RunOptions};
use crate::cluster::Fence;
use crate::groups::Group;
use crate::routing::notices;
use crate::store::Store;
use g2_core::trace::{Stage, TARGET};
use g2_core::validate::GroupFolder;
use tracing::Instrument;

/// Records that a batch (messages up to `upto`, and the context it passes
/// over) went to the group's agent ([`router::hand_over`]), under the
/// run's lease when there is one (refused once the lease is gone).
pub(super) async fn hand_over(
    store: &Store,
    folder: &GroupFolder,
    jid: &str,
    upto: i64,
    passed: Option<router::Passed>,
    fence: Option<Fence>,
) -> crate::Result<()> {
    let (f, jid) = (folder.clone(), jid.to_string());
    let span = tracing::debug_span!(target: TARGET, "hand_over", group = %folder, upto);
    let r = store
        .write(move |tx| {
            if let Some(fence) = &fence {
                fence.check(tx, &f)?;
            }
            router::hand_over(tx, &f, &jid, upto, passed.as_ref())
        })
        .instrument(span)
        .await;
    crate::trace::stamp(Stage::HandedOver, folder, Some(upto));
    // Only a lost lease stops the run: the marks are a hint for a restart
    // and for the viewer.
    match r {
        Err(e) if crate::cluster::is_fenced(&e) => {
            tracing::warn!(group = %folder, error = %e, "the group's lease is gone; left to its owner");
            Err(e)
        }
        Err(e) => {
            tracing::warn!(group = %folder, error = %e, "recording the in-flight and passed-over marks");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

impl Queue {
    /// Starts a group that was not woken with its row (it waited in line
    /// for a slot, or a task is due). Its row is read now: one read before
    /// it waited would be stale (the group may have changed or gone).
    pub(super) async fn start_waiting(&mut self, folder: &GroupFolder) {
        if self.stopping.is_some() {
            return;
        }
        match self.group(folder).await {
            Ok(Some(g)) => self.start(g).await,
            Ok(None) => {
                // Unregistered meanwhile: its tasks cannot run.
                if let Some(g) = self.groups.get_mut(folder) {
                    for t in g.tasks.drain(..) {
                        tracing::warn!(task = %t.id, group = %folder, "the task's group is gone; not run");
                    }
                }
            }
            Err(_) => self.retry_soon(folder),
        }
    }

    /// Starts the group's container with its next task, or else its
    /// pending messages; the run gets `group`, the row read for it.
    pub(super) async fn start(&mut self, group: Group) {
        if self.stopping.is_some() {
            return;
        }
        let folder = &group.folder;
        // Only under this host's lease, when it shares the store.
        let lease = match &self.leases {
            Some(l) => match l.confirm(folder).await {
                Ok(Some(g)) => Some(g),
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(group = %folder, error = %e, "confirming the group's lease");
                    return self.retry_soon(folder);
                }
            },
            None => None,
        };
        if let Some(g) = lease {
            self.adopt(folder, g).await;
        }
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
        let (kind, prompt, opts, handed) = match task {
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
                    None,
                )
            }
            None => {
                let Some(b) = self.pending(&group).await else {
                    return;
                };
                self.outlet.working(folder, &group.jid);
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
                    Some((b.upto, b.passed)),
                )
            }
        };
        // Marked running under the lease (the heartbeat hands over only
        // idle groups); gone meanwhile, nothing starts.
        let lease = match (&self.leases, lease) {
            (Some(l), Some(_)) => match l.begin(folder) {
                Some(g) => Some(g),
                None => return,
            },
            _ => None,
        };
        self.next_run += 1;
        let id = self.next_run;
        let group = Arc::new(group);
        let g = self.groups.entry(group.folder.clone()).or_default();
        g.run = Some(Run {
            id,
            kind,
            group: group.clone(),
            closing: false,
            epoch: 0,
            lease,
            fenced: false,
        });
        let (agents, me, store) = (self.agents.clone(), self.me.clone(), self.store.clone());
        let fence = super::fence(self.leases.as_ref(), lease);
        tokio::spawn(async move {
            let f = group.folder.clone();
            if let Some((upto, passed)) = handed
                && let Err(e) = hand_over(&store, &f, &group.jid, upto, passed, fence).await
            {
                let _ = me.send(Cmd::Exited {
                    folder: f,
                    run: id,
                    result: Err(e),
                });
                return;
            }
            let (turn_tx, mut turns) = mpsc::unbounded_channel();
            let run = agents.run(&group, &prompt, opts, Some(turn_tx));
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

    /// Asks the group's container to close after its current turn.
    pub(super) fn close(&mut self, folder: &GroupFolder) {
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
}
