//! `g2 memory`: what the memory layer captured of a group's sessions.

use anyhow::{Result, anyhow};
use clap::Subcommand;

use super::{Ctx, Output, require_group};
use crate::store;
use crate::terminal::{inert, inert_name};

#[derive(Subcommand)]
pub(super) enum MemoryCmd {
    /// A group's captured sessions, newest first: status, prompts, tool calls, times.
    Sessions {
        folder: String,
        #[command(flatten)]
        out: Output,
    },
    /// One session's timeline: each prompt, its tool calls in order, the reply.
    Show {
        /// Claude Code's session id.
        session_id: String,
        #[command(flatten)]
        out: Output,
    },
    /// Delete what was captured of one session.
    Forget {
        /// Claude Code's session id.
        #[arg(long)]
        session: String,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: MemoryCmd) -> Result<i32> {
    let store = ctx.store().await?;
    match cmd {
        MemoryCmd::Sessions { folder, out } => {
            let group = require_group(&store, &folder).await?;
            let f = group.folder.clone();
            let list = store.read(move |c| store::memory::sessions(c, &f)).await?;
            out.print(&list, |list| {
                if list.is_empty() {
                    println!("nothing captured yet");
                }
                for s in list {
                    println!(
                        "{}  {:<9}  {:>3} prompts  {:>4} tool calls  {} .. {}",
                        s.session_id,
                        s.status,
                        s.prompts,
                        s.tool_calls,
                        inert_name(&s.started_at),
                        inert_name(s.ended_at.as_deref().unwrap_or("-")),
                    );
                }
                Ok(())
            })?;
        }
        MemoryCmd::Show { session_id, out } => {
            let id = session_id.clone();
            let timeline = store
                .read(move |c| {
                    let Some(group) = store::memory::session_group(c, &id)? else {
                        return Ok(None);
                    };
                    store::memory::timeline(c, &group, &id)
                })
                .await?
                .ok_or_else(|| anyhow!("no captured session {session_id:?}"))?;
            out.print(&timeline, |t| {
                println!(
                    "session {} of {} ({}, {} prompts, {} tool calls)",
                    t.session.session_id,
                    t.session.group,
                    t.session.status,
                    t.session.prompts,
                    t.session.tool_calls
                );
                for b in &t.batches {
                    let who = if b.senders.is_empty() {
                        String::new()
                    } else {
                        format!(" from {}", inert_name(&b.senders.join(", ")))
                    };
                    println!("\n#{} {}{who}", b.prompt_number, inert_name(&b.started_at));
                    if !b.prompt.is_empty() {
                        println!("{}", inert(&b.prompt));
                    }
                    for a in &b.activities {
                        let mark = if a.ok { "" } else { " (failed)" };
                        println!(
                            "  - {}{mark}: {}",
                            inert_name(&a.tool),
                            inert_name(&a.input.to_string())
                        );
                    }
                    if let Some(r) = &b.reply {
                        println!("  => {}", inert(r));
                    }
                }
                Ok(())
            })?;
        }
        MemoryCmd::Forget { session } => {
            let id = session.clone();
            let forgotten = store
                .write(move |tx| match store::memory::session_group(tx, &id)? {
                    Some(group) => store::memory::forget_session(tx, &group, &id),
                    None => Ok(false),
                })
                .await?;
            if !forgotten {
                return Err(anyhow!("no captured session {session:?}"));
            }
            println!("forgot session {session}");
        }
    }
    Ok(0)
}
