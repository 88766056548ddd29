//! What a run came to: each finished turn (a reply stored and delivered,
//! or a failure), the container's exit (what is left unanswered, the
//! slot freed for the next in line), retries with backoff, giving up, and
//! a task's result.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::{Cmd, Kind, Queue, Run, router};
use crate::Result;
use crate::agent::{RunReport, Turn};
use crate::messages::Message;
use crate::routing::notices::{self, GiveUp};
use crate::store;
use crate::tasks::{self, Task};
use g2_core::trace::{Stage, TARGET};
use g2_core::validate::GroupFolder;
use tracing::Instrument;

impl Queue {
    pub(super) async fn turn(&mut self, folder: &GroupFolder, run_id: u64, turn: Turn) {
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
                    self.outlet.idle(folder);
                }
                match turn {
                    Turn::Reply(text) => {
                        g.retries = 0;
                        let fence = super::fence(self.leases.as_ref(), run.lease);
                        match self.store_reply(folder, text, upto, fence).await {
                            Ok(Some(m)) => {
                                crate::trace::stamp(Stage::ReplyStored, folder, Some(m.seq));
                                self.outlet.deliver(m).await;
                            }
                            Ok(None) => {}
                            Err(e) if crate::cluster::is_fenced(&e) => {
                                // Another host owns the group now: its
                                // messages are that host's to answer.
                                tracing::warn!(group = %folder, error = %e, "reply not stored: the group's lease is gone");
                                if let Some(run) =
                                    self.groups.get_mut(folder).and_then(|g| g.run.as_mut())
                                {
                                    run.fenced = true;
                                }
                                self.close(folder);
                                return;
                            }
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
                // What is still pending goes on at once: the next batch of
                // a backlog as a follow-up (the reply moved the cursor only
                // to its batch's end, and no new message may come to ring).
                self.wake(folder).await;
                let others_wait = self.others_wait(folder);
                let Some(run) = self
                    .groups
                    .get_mut(folder)
                    .and_then(|g| g.run.as_mut())
                    .filter(|r| r.id == run_id)
                else {
                    return;
                };
                if run.is_idle() {
                    if others_wait {
                        self.close(folder);
                    } else {
                        // The row the container started with: its own idle
                        // exit was set from the same timeout.
                        let idle = crate::container::timeouts(
                            &self.agents.settings().container,
                            &run.group,
                        )
                        .1;
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

    /// Stores `text` as the reply to the group's messages up to `upto` and
    /// moves its cursor ([`router::deliver_reply`]); `None` when there is
    /// nothing to deliver.
    async fn store_reply(
        &self,
        folder: &GroupFolder,
        text: String,
        upto: i64,
        fence: Option<crate::cluster::Fence>,
    ) -> Result<Option<Message>> {
        let (f, sender, outlet, redactor) = (
            folder.clone(),
            self.assistant_name.clone(),
            self.outlet.clone(),
            self.redactor.clone(),
        );
        let span = tracing::debug_span!(target: TARGET, "store_reply", group = %folder, upto);
        let reply = self
            .store
            .write(move |tx| {
                if let Some(fence) = &fence {
                    fence.check(tx, &f)?;
                }
                // Read again, in the reply's own transaction: the group may
                // have been removed (and its chat given to another) since
                // its run started; then nothing is stored.
                let Some(group) = store::groups::get(tx, &f)? else {
                    return Ok(None);
                };
                let delivered = outlet.stored_is_delivered(&group.jid);
                router::deliver_reply(tx, &group, &sender, &text, upto, delivered, &redactor)
                    .map(Some)
            })
            .instrument(span)
            .await?;
        Ok(reply.and_then(|r| {
            if r.cleaned {
                self.store.truncate_wal();
            }
            r.message
        }))
    }

    pub(super) async fn exited(
        &mut self,
        folder: &GroupFolder,
        run_id: u64,
        result: Result<RunReport>,
    ) {
        let Some(g) = self.groups.get_mut(folder) else {
            return;
        };
        if g.run.as_ref().is_none_or(|r| r.id != run_id) {
            return;
        }
        let run = g.run.take().expect("checked above");
        if let Some(l) = &self.leases {
            l.end(folder);
        }
        self.outlet.idle(folder);
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
                let fenced = run.fenced || result.as_ref().is_err_and(crate::cluster::is_fenced);
                if fenced {
                    // Not this host's group any more: nothing is retried or
                    // told; the owner answers from the stored cursor.
                    tracing::warn!(group = %folder, "the run's lease is gone; its messages are left to the group's owner");
                } else if self.stopping.is_some() && result.is_ok() {
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
        // Whoever holds the group waited for its container to go.
        if let Some(g) = self.groups.get_mut(folder) {
            for tx in g.hold_waiters.drain(..) {
                let _ = tx.send(());
            }
        }
        // Free slot: first in line first, then this group's own next work.
        while let Some(next) = self.fifo.next(self.active(), self.settings.max_containers) {
            if self
                .groups
                .get(&next)
                .is_some_and(|g| g.run.is_none() && g.held == 0)
            {
                self.start_waiting(&next).await;
            }
        }
        // A fresh read of the row: this group's next batch, if any.
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
        let (f, sender, why, outlet, redactor) = (
            folder.clone(),
            self.assistant_name.clone(),
            why.to_string(),
            self.outlet.clone(),
            self.redactor.clone(),
        );
        let stored = self
            .store
            .write(move |tx| {
                // Read again, in the notice's own transaction: a group
                // removed meanwhile is told nothing and keeps its cursor.
                let Some(group) = store::groups::get(tx, &f)? else {
                    return Ok(None);
                };
                let delivered = outlet.stored_is_delivered(&group.jid);
                notices::give_up(tx, &group, &sender, upto, &why, how, delivered, &redactor)
                    .map(Some)
            })
            .await;
        match stored {
            Ok(Some((m, cleaned))) => {
                if cleaned {
                    self.store.truncate_wal();
                }
                self.outlet.deliver(m).await;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(group = %folder, error = %e, "recording the failure"),
        }
    }

    /// A task's run is over: logged ([`tasks::runs::record`]), its result
    /// posted to the task's chat, then the scheduler is told its tasks
    /// changed.
    async fn task_done(
        &mut self,
        task: &Task,
        run_at: DateTime<Utc>,
        took: Duration,
        outcome: std::result::Result<String, String>,
    ) {
        let text =
            tasks::runs::record(&self.store, &self.redactor, task, run_at, took, outcome).await;
        if let Err(e) = self
            .outlet
            .say(&task.chat_jid, &self.assistant_name, &text)
            .await
        {
            tracing::error!(task = %task.id, error = %e, "delivering a task result");
        }
        if let Some(n) = &self.tasks_changed {
            n.notify_one();
        }
    }
}
