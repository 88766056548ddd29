//! `g2 memory`: what the memory layer captured of a group's sessions.

use anyhow::{Result, anyhow};
use clap::Subcommand;
use g2_core::validate::MemoryFolder;

use super::{Ctx, Output, Scope, require_group};
use crate::memory::shown;
use crate::store::Store;
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
    /// Forget an observation (it leaves recall and injection; a tombstone
    /// stays), or with `--session` delete what was captured of one session.
    #[command(group = clap::ArgGroup::new("what").required(true).args(["id", "session"]))]
    Forget {
        /// The observation's id.
        id: Option<i64>,
        /// Claude Code's session id.
        #[arg(long)]
        session: Option<String>,
    },
    /// Ask the memory a question in your own words: ranked hits with where
    /// each came from (archive path and turns, session, observation).
    Search {
        /// The question.
        #[arg(required = true, num_args = 1..)]
        question: Vec<String>,
        #[command(flatten)]
        scope: Scope,
        #[command(flatten)]
        out: Output,
    },
    /// A group's observations (or `global`'s), most important first.
    Observations {
        folder: String,
        /// Superseded and forgotten ones too.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        out: Output,
    },
    /// Remember something for a group, or for every group (`global`,
    /// read-only to them): an observation of importance 9.
    Remember {
        /// A registered group's folder, or `global`.
        folder: String,
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// A session's summary.
    Summary {
        /// Claude Code's session id.
        session_id: String,
        #[command(flatten)]
        out: Output,
    },
    /// Rebuild recall's passages and indexes from the archives and rows.
    Reindex,
}

/// A registered group's memory, or `global`'s.
async fn memory_owner(store: &Store, folder: &str) -> Result<MemoryFolder> {
    let owner = MemoryFolder::new(folder)?;
    if !owner.is_global() {
        require_group(store, folder).await?;
    }
    Ok(owner)
}

pub(super) async fn run(ctx: &Ctx, cmd: MemoryCmd) -> Result<i32> {
    let store = ctx.store().await?;
    match cmd {
        MemoryCmd::Sessions { folder, out } => {
            let group = require_group(&store, &folder).await?;
            let list = shown::sessions(&store, &group.folder).await?;
            out.print(&list, |list| {
                if list.is_empty() {
                    println!("nothing captured yet");
                }
                let mut table = super::output::Table::new(&[2, 3]);
                for s in list {
                    table.row([
                        s.session_id.clone(),
                        s.status.clone(),
                        format!("{} prompts", s.prompts),
                        format!("{} tool calls", s.tool_calls),
                        format!(
                            "{} .. {}",
                            inert_name(&s.started_at),
                            inert_name(s.ended_at.as_deref().unwrap_or("-"))
                        ),
                    ]);
                }
                table.print()
            })?;
        }
        MemoryCmd::Show { session_id, out } => {
            let timeline = match shown::session_group(&store, &session_id).await? {
                Some(group) => shown::timeline(&store, &group, &session_id).await?,
                None => None,
            }
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
        MemoryCmd::Forget { id: Some(id), .. } => {
            // A person may forget any memory's observation.
            let forgotten = crate::memory::forget::forget(&store, id, None).await?;
            if forgotten != crate::memory::forget::Forgotten::Done {
                return Err(anyhow!("no observation {id}"));
            }
            println!("forgot observation {id}");
        }
        MemoryCmd::Forget { session: None, .. } => {
            return Err(anyhow!("name an observation id or --session"));
        }
        MemoryCmd::Search {
            question,
            scope: Scope { group, limit },
            out,
        } => {
            let question = question.join(" ");
            if let Some(note) = crate::search::question::cap(&question).note() {
                eprintln!("note: {note}");
            }
            let groups = match &group {
                Some(g) => vec![require_group(&store, g).await?.folder],
                None => crate::groups::list(&store)
                    .await?
                    .into_iter()
                    .map(|g| g.folder)
                    .collect(),
            };
            let hits = match ask_host(ctx, &question, group.as_deref(), limit).await {
                Some(hits) => hits,
                None => recall_here(ctx, &store, groups, &question, limit).await?,
            };
            out.print(&hits, |hits| {
                if hits.is_empty() {
                    println!("nothing recalled");
                }
                for h in hits {
                    let kind = h.observation_kind.as_deref().unwrap_or(&h.kind);
                    println!(
                        "{} [{kind} {}] {} {}",
                        inert_name(&h.group),
                        h.id,
                        inert_name(&h.day),
                        inert_name(&h.title)
                    );
                    if let (Some(p), Some(s), Some(e)) = (&h.archive_path, h.turn_start, h.turn_end)
                    {
                        println!("  {}  messages {s}-{e}", inert_name(p));
                    }
                    println!("  {}", inert(&h.snippet));
                }
                Ok(())
            })?;
        }
        MemoryCmd::Observations { folder, all, out } => {
            let owner = memory_owner(&store, &folder).await?;
            let list = shown::observations(&store, &owner, all).await?;
            out.print(&list, |list| {
                if list.is_empty() {
                    println!("no observations yet");
                }
                for o in list {
                    let status = if o.status == "active" {
                        String::new()
                    } else {
                        format!(" ({})", o.status)
                    };
                    println!(
                        "{:>5}  {:<10} {:>2}  {}{status}",
                        o.id,
                        o.kind,
                        o.importance,
                        inert_name(&o.title)
                    );
                }
                Ok(())
            })?;
        }
        MemoryCmd::Remember { folder, text } => {
            let owner = memory_owner(&store, &folder).await?;
            let redactor = crate::gateway::credentials::redactor(ctx.home.root(), &ctx.settings);
            let id = crate::memory::remember::remember(&store, &redactor, owner, &text.join(" "))
                .await?;
            println!("remembered as observation {id}");
        }
        MemoryCmd::Summary { session_id, out } => {
            let summary = match shown::session_group(&store, &session_id).await? {
                Some(group) => shown::summary(&store, &group, &session_id).await?,
                None => None,
            }
            .ok_or_else(|| anyhow!("no summary of session {session_id:?} (yet)"))?;
            out.print(&summary, |s| {
                println!("{}", inert_name(&s.title));
                for (k, v) in [
                    ("request", &s.request),
                    ("investigated", &s.investigated),
                    ("learned", &s.learned),
                    ("completed", &s.completed),
                    ("next steps", &s.next_steps),
                ] {
                    if !v.is_empty() {
                        println!("{k}: {}", inert(v));
                    }
                }
                Ok(())
            })?;
        }
        MemoryCmd::Reindex => {
            let opts = ctx
                .settings
                .archive_options(&crate::gateway::credentials::redactor(
                    ctx.home.root(),
                    &ctx.settings,
                ));
            let done = crate::memory::recall::rebuild(&store, &ctx.home, opts).await?;
            println!("reindexed: {} archives split into passages", done.split);
            println!(
                "re-dated {} archives: {} from transcripts, {} from their markdown, {} unchanged",
                done.redated(),
                done.from_transcripts,
                done.from_markdown,
                done.unchanged
            );
            reembed(ctx, &store).await?;
        }
        MemoryCmd::Forget {
            session: Some(session),
            ..
        } => {
            // A live session's group is held through the running host.
            let forgotten = match super::live::route(ctx, &store, "memory").await? {
                super::live::Route::Here(_lock) => {
                    crate::memory::forget::forget_session(&store, &session).await?
                }
                super::live::Route::Host(api) => {
                    match shown::session_group(&store, &session).await? {
                        Some(group) => {
                            let id = super::live::segment(&session);
                            api.call::<serde_json::Value>(
                                reqwest::Method::DELETE,
                                &format!("/api/groups/{group}/memory/sessions/{id}"),
                                None,
                            )
                            .await?;
                            true
                        }
                        None => false,
                    }
                }
            };
            if !forgotten {
                return Err(anyhow!("no captured session {session:?}"));
            }
            println!("forgot session {session}");
        }
    }
    Ok(0)
}

/// A running `g2 serve`'s recall (`GET /api/memory/search`): it holds
/// the embedding model loaded. `None` when no host runs, or it failed to
/// answer (then the recall is made here).
async fn ask_host(
    ctx: &Ctx,
    question: &str,
    group: Option<&str>,
    limit: usize,
) -> Option<Vec<crate::memory::recall::RecallHit>> {
    let api = super::live::running_host(ctx)?;
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("q", question);
    if let Some(g) = group {
        q.append_pair("group", g);
    }
    q.append_pair("limit", &limit.to_string());
    let path = format!("/api/memory/search?{}", q.finish());
    match api.call(reqwest::Method::GET, &path, None).await {
        Ok(hits) => Some(hits),
        Err(e) => {
            tracing::debug!(error = %e, "the running host did not answer; recalling here");
            None
        }
    }
}

/// The recall made in this process: the embedding model is loaded only
/// when a memory in scope (the groups' or `global`'s) holds vectors, for
/// without them the question's vector would find nothing.
async fn recall_here(
    ctx: &Ctx,
    store: &Store,
    groups: Vec<g2_core::validate::GroupFolder>,
    question: &str,
    limit: usize,
) -> Result<Vec<crate::memory::recall::RecallHit>> {
    let names: Vec<String> = groups
        .iter()
        .map(ToString::to_string)
        .chain([MemoryFolder::global().to_string()])
        .collect();
    let vectors = store
        .read(move |c| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            crate::store::embeddings::any_in(c, &names)
        })
        .await?;
    if vectors {
        let (root, m) = (ctx.home.root().to_path_buf(), ctx.settings.memory.clone());
        tokio::task::spawn_blocking(move || crate::memory::embed::init(&root, &m)).await?;
    }
    Ok(shown::recall_groups(store, groups, question, limit).await?)
}

/// Queues every row for a new vector and embeds them all, with a progress
/// bar (a running host's jobs may take some of them: each is embedded
/// once either way).
async fn reembed(ctx: &Ctx, store: &Store) -> Result<()> {
    let (root, m) = (ctx.home.root().to_path_buf(), ctx.settings.memory.clone());
    let model =
        match tokio::task::spawn_blocking(move || crate::memory::embed::load(&root, &m)).await? {
            crate::memory::embed::Loaded::Model(m) => m,
            crate::memory::embed::Loaded::Off => {
                println!("embeddings are off (memory.embeddings): recall is lexical");
                return Ok(());
            }
            crate::memory::embed::Loaded::Failed(why) => {
                println!("no embeddings: {why}; recall is lexical");
                return Ok(());
            }
        };
    let total = u64::try_from(crate::memory::embed::requeue_all(store).await?).unwrap_or(0);
    let s = store.clone();
    let done = tokio::task::spawn_blocking(move || -> crate::Result<u64> {
        let progress = Progress::new(total);
        let n = crate::memory::embed::embed_queued(&s, &model, |n| progress.show(n))?;
        progress.finish(n);
        Ok(n)
    })
    .await??;
    println!("embedded: {done} rows");
    Ok(())
}

/// The reindex's progress: `embedded 1200/5900 (85/s, about 55 s left)`,
/// rewritten in place on a terminal, a line every [`Progress::EVERY`]
/// otherwise (a log keeps them).
struct Progress {
    total: u64,
    started: std::time::Instant,
    shown: std::sync::Mutex<std::time::Instant>,
    terminal: bool,
}

impl Progress {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    fn new(total: u64) -> Progress {
        use std::io::IsTerminal;
        let now = std::time::Instant::now();
        Progress {
            total,
            started: now,
            shown: std::sync::Mutex::new(now),
            terminal: std::io::stdout().is_terminal(),
        }
    }

    fn line(&self, n: u64) -> String {
        let pace = crate::memory::embed::pace_line(n, self.total, self.started.elapsed());
        format!("embedded {n}/{} ({pace})", self.total)
    }

    fn show(&self, n: u64) {
        if self.terminal {
            print!("\r{}\x1b[K", self.line(n));
            let _ = std::io::Write::flush(&mut std::io::stdout());
            return;
        }
        let mut shown = self
            .shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if shown.elapsed() >= Self::EVERY {
            *shown = std::time::Instant::now();
            println!("{}", self.line(n));
        }
    }

    fn finish(&self, n: u64) {
        if self.terminal && n > 0 {
            println!();
        }
    }
}
