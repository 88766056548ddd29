//! Admission and the line: what a wake or a due task asks of the queue.
//! A group with a container up gets its new messages as a follow-up; one
//! without asks for a slot, and waits in [`Line`] (first come, first
//! served) when every slot is taken. The group's row is read here, once
//! per batch, and handed on to the start.

use std::collections::VecDeque;
use std::time::Instant;

use super::start::hand_over;
use super::{Kind, Queue, Run, router};
use crate::agent;
use crate::groups::Group;
use crate::tasks::{self, Task};
use g2_core::trace::Stage;
use g2_core::validate::GroupFolder;

/// The slot policy, apart from the actor so that it can be tested on its
/// own: groups that find every slot taken wait in one line, each once, and
/// are served first come, first served.
#[derive(Debug, Default)]
pub(super) struct Line {
    waiting: VecDeque<GroupFolder>,
}

impl Line {
    /// Whether `folder` may start now, with `running` of `max` slots taken;
    /// if not, it joins the line (unless it is in it already).
    pub(super) fn admit(&mut self, folder: &GroupFolder, running: usize, max: usize) -> bool {
        if running < max {
            return true;
        }
        if !self.waiting.iter().any(|f| f == folder) {
            self.waiting.push_back(folder.clone());
        }
        false
    }

    /// The group first in line, when a slot is free.
    pub(super) fn next(&mut self, running: usize, max: usize) -> Option<GroupFolder> {
        if running < max {
            self.waiting.pop_front()
        } else {
            None
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &GroupFolder> {
        self.waiting.iter()
    }
}

impl Queue {
    /// A scheduled task is due: it runs next in its group's container.
    pub(super) async fn task(&mut self, t: Task) {
        let folder = t.group_folder.clone();
        let g = self.groups.entry(folder.clone()).or_default();
        g.tasks.push_back(t);
        if g.held > 0 {
            // Runs once the group is released.
            return;
        }
        match &g.run {
            // Never behind an idle container.
            Some(r) if r.is_idle() => self.close(&folder),
            // Closed when its turn ends.
            Some(_) => {}
            None => self.want_slot(&folder, None).await,
        }
    }

    /// New messages may be waiting for `folder`. The group's row is read
    /// here (the batch's one read) and carried to the follow-up or start.
    pub(super) async fn wake(&mut self, folder: &GroupFolder) {
        crate::trace::stamp(Stage::Woken, folder, None);
        // A held group's messages wait for its release.
        if self.stopping.is_some() || self.held(folder) || !self.ours(folder).await {
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
                let injects = group.container_config.memory.injects();
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
                    // The hook will ask memory about this prompt: its
                    // answer is begun while the agent reads it.
                    if injects {
                        crate::memory::context::ask_ahead(&b.prompt);
                    }
                    let home = self.agents.home();
                    // Marked before the agent has it: an edit that comes
                    // later no longer changes these messages.
                    let fence = super::fence(self.leases.as_ref(), run.lease);
                    if let Err(e) =
                        hand_over(&self.store, folder, &jid, b.upto, b.passed.clone(), fence).await
                    {
                        if crate::cluster::is_fenced(&e) {
                            run.fenced = true;
                            self.close(folder);
                        }
                        return;
                    }
                    match agent::send_follow_up(home, folder, &b.prompt) {
                        Ok(file) => {
                            crate::trace::stamp(Stage::InputWritten, folder, Some(b.upto));
                            self.outlet.working(folder, &jid);
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
            self.want_slot(folder, Some(group)).await;
        }
    }

    /// Whether this host may act on `folder`: it owns it, or has just
    /// taken its free lease. Always, without leases.
    async fn ours(&mut self, folder: &GroupFolder) -> bool {
        let Some(l) = &self.leases else {
            return true;
        };
        match l.take(folder).await {
            Ok(Some(g)) => {
                self.adopt(folder, g).await;
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(group = %folder, error = %e, "taking the group's lease");
                false
            }
        }
    }

    /// Under a lease generation it has not seen for `folder` yet, takes up
    /// what the group's earlier holder left (`Agents::adopt`) first.
    pub(super) async fn adopt(&mut self, folder: &GroupFolder, generation: i64) {
        if self.adopted.get(folder) == Some(&generation) {
            return;
        }
        self.agents.adopt(folder).await;
        // Its tasks another host (or an earlier process) claimed run again.
        if let Some(l) = &self.leases {
            let (f, mine) = (folder.clone(), tasks::scheduler::claimer(l.host_id()));
            let released = self
                .store
                .write(move |tx| {
                    tasks::release_claims_where(tx, None, &|c| {
                        c.task.group_folder == f && c.claimed_by != mine
                    })
                })
                .await;
            match released {
                Ok(0) => {}
                Ok(n) => {
                    tracing::warn!(group = %folder, n, "scheduled tasks an earlier holder was running will run again");
                }
                Err(e) => {
                    tracing::warn!(group = %folder, error = %e, "releasing the group's task claims");
                }
            }
        }
        self.adopted.insert(folder.clone(), generation);
    }

    /// Whether other work waits for `folder`'s container to go: a task of
    /// its own, or a group in line for a slot.
    pub(super) fn others_wait(&self, folder: &GroupFolder) -> bool {
        !self.fifo.is_empty() || self.groups.get(folder).is_some_and(|g| !g.tasks.is_empty())
    }

    /// The batch the group's next container would start with.
    pub(super) async fn pending(&self, group: &Group) -> Option<router::Batch> {
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

    /// Starts `folder`'s container if a slot is free (with `group`, the
    /// row the caller read for this batch, if it did); else it joins the
    /// line and an idle container is asked to make room.
    async fn want_slot(&mut self, folder: &GroupFolder, group: Option<Group>) {
        if self
            .fifo
            .admit(folder, self.active(), self.settings.max_containers)
        {
            match group {
                Some(g) => self.start(g).await,
                None => self.start_waiting(folder).await,
            }
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
