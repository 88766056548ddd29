//! The long-running commands and the agent's one-shot: `g2 serve`,
//! `g2 gateway`, `g2 run`, and `g2 chat` (a client of `g2 serve`). The
//! wiring is [`crate::host`]'s; here are the lines printed and the signal
//! waited for.

use anyhow::{Result, anyhow};

use super::{Console, Ctx, Output, require_group};
use crate::host::{self, Host};
use crate::lock::HostLock;
use crate::terminal::{inert, inert_name};

pub(super) async fn serve(ctx: &Ctx, listen: Option<String>) -> Result<i32> {
    let host = Host::start(&ctx.home, &ctx.settings, listen.as_deref(), &Console).await?;
    println!("provider  {}", host.provider());
    println!("api       http://{}", host.api_address());
    println!("groups    {} sockets", host.group_sockets().await);
    shutdown_signal().await;
    host.stop().await;
    Ok(0)
}

pub(super) async fn gateway(ctx: &Ctx, listen: Option<String>) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let (gw, choice) = host::gateway(&ctx.home, &ctx.settings, &store)?;
    // Per-prompt recall by meaning, as under `g2 serve`: the model, and the
    // jobs that embed what the groups' memory holds.
    let embedder = {
        let (root, m) = (ctx.home.root().to_path_buf(), ctx.settings.memory.clone());
        tokio::task::spawn_blocking(move || crate::memory::embed::init(&root, &m))
            .await?
            .map(|model| crate::memory::embed::start(store.clone(), model))
    };
    let addr = listen.unwrap_or_else(|| ctx.settings.gateway.listen.clone());
    let tcp = gw.listen_tcp(&addr).await?;
    println!("provider  {}", choice.reason);
    // Before any group socket is replaced: one host per home.
    let _lock = HostLock::acquire(&ctx.home, "gateway")?;
    println!("listening {}", tcp.address);
    let mut sockets = Vec::new();
    for (folder, l) in host::group_sockets(&ctx.home, &gw, &store).await? {
        println!("group     {folder} {}", l.address);
        sockets.push(l);
    }
    println!(
        "try       ANTHROPIC_BASE_URL={} ANTHROPIC_API_KEY=unused CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude",
        tcp.address
    );
    shutdown_signal().await;
    sockets.push(tcp);
    host::stop_gateway(gw, sockets).await;
    if let Some(e) = embedder {
        e.stop().await;
    }
    Ok(0)
}

pub(super) async fn run(ctx: &Ctx, folder: &str, prompt: &str, out: Output) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let group = require_group(&store, folder).await?;
    // A live host owns this home's containers: leave them alone and say
    // where the message should go instead.
    let _lock = HostLock::acquire(&ctx.home, "run").map_err(|e| {
        let via = match HostLock::holder(&ctx.home).and_then(|h| h.api) {
            Some(api) => {
                format!("`g2 chat {folder} --url {api}` or POST {api}/api/groups/{folder}/messages")
            }
            None => "that process".into(),
        };
        anyhow!(
            "{e}.\nNothing was run and no container was touched; send the message through {via}"
        )
    })?;
    let runtime = host::agent_runtime(&ctx.home, &ctx.settings, &Console).await?;
    let (gw, _) = host::gateway(&ctx.home, &ctx.settings, &store)?;
    // The prompt's recall by meaning (the jobs are the host's to run).
    let (root, m) = (ctx.home.root().to_path_buf(), ctx.settings.memory.clone());
    tokio::task::spawn_blocking(move || crate::memory::embed::init(&root, &m)).await?;
    let agents = host::run_agents(&ctx.home, &ctx.settings, store.clone(), runtime, &gw);
    for name in agents.reap().await? {
        eprintln!("removed container {name} left by an earlier host");
    }
    host::reconcile_archives(&ctx.home, &store).await?;
    let report = agents.run_prompt(&group, prompt).await?;
    gw.flush().await;
    out.print(&report, |report| {
        for r in &report.replies {
            println!("{}", inert(r));
        }
        for e in &report.errors {
            eprintln!("agent error: {}", inert(e));
        }
        for a in &report.archives {
            eprintln!("archived {}", inert_name(&a.path));
        }
        Ok(())
    })?;
    Ok(if report.replies.is_empty() { 1 } else { 0 })
}

pub(super) async fn chat(
    ctx: &Ctx,
    folder: String,
    url: Option<String>,
    sender: String,
) -> Result<i32> {
    let url = url.unwrap_or_else(|| format!("http://{}", ctx.settings.api.listen));
    crate::chat::run(crate::chat::ChatOptions {
        url,
        folder,
        sender,
        token: ctx.settings.api.token.clone(),
    })
    .await?;
    Ok(0)
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
