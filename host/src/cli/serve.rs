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
    // Listened for before anything starts: a stop asked while the host
    // starts ends the start where it is (the process exits; what was done
    // is in the store or taken up by the next start).
    let mut stop = std::pin::pin!(shutdown_signal());
    let start = Host::start(&ctx.home, &ctx.settings, listen.as_deref(), &Console);
    let host = tokio::select! {
        host = start => host?,
        () = &mut stop => {
            tracing::info!(target: "g2", "stopped while starting");
            return Ok(0);
        }
    };
    println!("provider  {}", host.provider());
    println!("api       http://{}", host.api_address());
    println!("groups    {} sockets", host.group_sockets().await);
    println!("{}", ready_line(ctx, host.api_address()).await);
    stop.await;
    host.stop().await;
    Ok(0)
}

/// The one line that says the host answers, and what to do next: the
/// viewer's address, how to chat with the main group and how to stop.
async fn ready_line(ctx: &Ctx, api: std::net::SocketAddr) -> String {
    let main = match ctx.store().await {
        Ok(store) => store
            .read(crate::store::groups::main_group)
            .await
            .ok()
            .flatten(),
        Err(_) => None,
    };
    let folder = main.map_or_else(|| "main".to_string(), |g| g.folder.to_string());
    let url = format!("http://{api}");
    // `g2 chat` goes to `api.listen` unless told otherwise.
    let chat = if api.to_string() == ctx.settings.api.listen {
        format!("g2 chat {folder}")
    } else {
        format!("g2 chat {folder} --url {url}")
    };
    format!("g2 is ready: viewer {url}/ (chat: {chat}; stop: Ctrl-C)")
}

pub(super) async fn gateway(ctx: &Ctx, listen: Option<String>) -> Result<i32> {
    let stop = shutdown_signal();
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let (gw, choice) = host::gateway(&ctx.home, &ctx.settings, &store)?;
    // Per-prompt recall by meaning, as under `g2 serve`: the model, and the
    // jobs that embed what the groups' memory holds.
    let embedder =
        crate::memory::embed::serve(ctx.home.root(), &ctx.settings.memory, &store).await?;
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
    stop.await;
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

/// Ctrl-C (SIGINT) or SIGTERM. The handlers are installed when this is
/// called, not when it is first awaited: from then on a signal no longer
/// kills the process outright.
fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    async move {
        tokio::select! {
            () = received(term.as_mut()) => {}
            () = received(int.as_mut()) => {}
        }
    }
}

/// The signal's next delivery; never, when it could not be listened for.
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}
