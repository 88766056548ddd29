//! `g2`: the command line of the g2 host. Each subcommand is a thin layer
//! over the `g2_host` library; errors become `error: …` and exit code 1.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use g2_host::archives::{self, Trigger};
use g2_host::config::Settings;
use g2_host::container::image;
use g2_host::gateway::Gateway;
use g2_host::gateway::usage;
use g2_host::groups::{self, NewGroup};
use g2_host::home::Home;
use g2_host::sessions::SessionManager;
use g2_host::store;
use g2_host::store::Store;
use g2_host::terminal::{inert, inert_name};
use g2_host::{doctor, search};

#[derive(Parser)]
#[command(
    name = "g2",
    version,
    about = "g2: a self-hosted memory host for AI agents in chat groups"
)]
struct Cli {
    /// The home directory holding groups/ and data/.
    #[arg(long, global = true, env = "G2_HOME", default_value = ".")]
    home: PathBuf,
    /// Settings file (default: {home}/g2.toml when it exists).
    #[arg(long, global = true, env = "G2_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the folders, the database, and the main and global groups.
    Init,
    /// Register, list and remove chat groups.
    #[command(subcommand)]
    Groups(GroupsCmd),
    /// Show and change a group's active session and its history.
    #[command(subcommand)]
    Sessions(SessionsCmd),
    /// Archive a Claude Code transcript to markdown; prints the file's path.
    Archive {
        /// The transcript (`.jsonl`).
        transcript: PathBuf,
        /// The group whose conversations/ folder gets the archive.
        #[arg(long)]
        group: String,
        /// Title (default: Claude Code's summary, else the first prompt).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        out: Output,
    },
    /// Full-text search over conversation archives, best first.
    Search {
        /// Words to find (all must match; `word*` matches a prefix).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Only this group's archives.
        #[arg(long)]
        group: Option<String>,
        /// Most hits to show.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        out: Output,
    },
    /// Run the host: the HTTP API and channels, the router and group queue
    /// (agents in containers), the IPC watcher, the scheduler and every
    /// group's model gateway socket. Removes containers an earlier host
    /// left and answers messages it left unanswered.
    Serve {
        /// Address of the HTTP API (default: api.listen, 127.0.0.1:4170).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Talk to a group from this terminal through a running `g2 serve`:
    /// each line is a message; replies are printed as they arrive.
    Chat {
        folder: String,
        /// Where g2 serve listens (default: http:// + api.listen).
        #[arg(long)]
        url: Option<String>,
        /// Who you are in the chat.
        #[arg(long, default_value = "terminal")]
        sender: String,
    },
    /// Run the model gateway alone: the Anthropic Messages API on a loopback
    /// TCP address and on each registered group's socket. Point any Claude
    /// Code at it with ANTHROPIC_BASE_URL.
    Gateway {
        /// Loopback address to listen on (default: gateway.listen, 127.0.0.1:4180).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Send one message to a group's agent (in its container) and print the
    /// reply; the group's session pointer follows the agent's session.
    Run {
        folder: String,
        /// The message.
        #[arg(required = true, num_args = 1..)]
        prompt: Vec<String>,
        #[command(flatten)]
        out: Output,
    },
    /// The agent image.
    #[command(subcommand)]
    Image(ImageCmd),
    /// Model usage per day, group and model, newest first.
    Usage {
        /// Only this group (`@local` for the loopback listener).
        #[arg(long)]
        group: Option<String>,
        /// How many days back, today included.
        #[arg(long, default_value_t = 30)]
        days: u32,
        #[command(flatten)]
        out: Output,
    },
    /// Check the database, folders, Docker engine, Claude Code and model provider.
    Doctor {
        #[command(flatten)]
        out: Output,
    },
}

#[derive(Args, Clone, Copy)]
struct Output {
    /// Print JSON (the shapes are documented in the README).
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum ImageCmd {
    /// Assemble the root filesystem and build the image (skipped when an
    /// image with the same inputs exists).
    Build {
        /// A static g2-agent to use (default: build it with cargo in this checkout).
        #[arg(long)]
        agent: Option<PathBuf>,
        /// Build even when the image is up to date.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand)]
enum GroupsCmd {
    /// Register a group (and create its folder).
    Add {
        folder: String,
        #[arg(long)]
        name: String,
        /// Chat id (default: local:{folder}).
        #[arg(long)]
        jid: Option<String>,
        /// Regex a message must match to wake the agent (default: ^@{assistant}).
        #[arg(long, conflicts_with = "no_trigger")]
        trigger: Option<String>,
        /// Every message wakes the agent.
        #[arg(long)]
        no_trigger: bool,
        /// This is the main (admin) group.
        #[arg(long)]
        main: bool,
    },
    /// List registered groups.
    List {
        #[command(flatten)]
        out: Output,
    },
    /// Unregister a group (its folder, sessions and archives stay).
    Remove { folder: String },
}

#[derive(Subcommand)]
enum SessionsCmd {
    /// The group's active session.
    Show {
        folder: String,
        #[command(flatten)]
        out: Output,
    },
    /// Make a session the group's active one.
    Set { folder: String, session_id: String },
    /// Earlier sessions of the group, newest first.
    History {
        folder: String,
        #[command(flatten)]
        out: Output,
    },
    /// Archive the active session's transcript, bookmark it, remove the pointer.
    Clear {
        folder: String,
        #[arg(long)]
        name: String,
        #[command(flatten)]
        out: Output,
    },
    /// Make an earlier session active again.
    Resume {
        folder: String,
        history_id: i64,
        /// Bookmark (and archive) the active session under this name first.
        #[arg(long)]
        save_as: Option<String>,
        #[command(flatten)]
        out: Output,
    },
}

struct Ctx {
    home: Home,
    settings: Settings,
}

impl Ctx {
    async fn store(&self) -> Result<Store> {
        Store::open_async(
            self.home.db_path(),
            Duration::from_millis(self.settings.store.busy_timeout_ms),
        )
        .await
        .with_context(|| format!("opening {}", self.home.db_path().display()))
    }

    fn sessions(&self, store: &Store) -> SessionManager {
        SessionManager::new(
            store.clone(),
            self.home.clone(),
            self.settings.archive_options(),
        )
    }
}

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("G2_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // One JSON object per line for log collectors; text for people.
    if std::env::var("G2_LOG_FORMAT").is_ok_and(|f| f == "json") {
        logs.json().init();
    } else {
        logs.init();
    }
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn run(cli: Cli) -> Result<i32> {
    let home = Home::new(&cli.home)?;
    let settings = Settings::load(home.root(), cli.config.as_deref())?;
    let ctx = Ctx { home, settings };
    match cli.command {
        Command::Init => init(&ctx).await,
        Command::Groups(cmd) => groups_cmd(&ctx, cmd).await,
        Command::Sessions(cmd) => sessions_cmd(&ctx, cmd).await,
        Command::Archive {
            transcript,
            group,
            name,
            out,
        } => {
            let store = ctx.store().await?;
            require_group(&store, &group).await?;
            archives::require_transcript(&transcript)?;
            let (rec, stats) = archives::archive_transcript(
                &ctx.home,
                &store,
                ctx.settings.archive_options(),
                &group,
                transcript,
                name,
                Trigger::Manual,
            )
            .await?;
            if out.json {
                print_json(&rec)?;
            } else {
                println!("{}", ctx.home.root().join(&rec.path).display());
                if stats.malformed + stats.oversized > 0 {
                    eprintln!(
                        "note: skipped {} malformed and {} oversized lines",
                        stats.malformed, stats.oversized
                    );
                }
            }
            Ok(0)
        }
        Command::Search {
            query,
            group,
            limit,
            out,
        } => {
            let store = ctx.store().await?;
            let q = query.join(" ");
            let hits = store
                .read(move |c| search::search(c, &q, group.as_deref(), limit))
                .await?;
            if out.json {
                print_json(&hits)?;
            } else if hits.is_empty() {
                println!("no matches");
            } else {
                let mut w = std::io::stdout().lock();
                for (i, h) in hits.iter().enumerate() {
                    writeln!(
                        w,
                        "{}. [{}] {}  ({})",
                        i + 1,
                        inert_name(&h.group),
                        inert_name(&h.name),
                        inert_name(&h.created_at[..10.min(h.created_at.len())])
                    )?;
                    writeln!(
                        w,
                        "   {}",
                        inert_name(&ctx.home.root().join(&h.path).display().to_string())
                    )?;
                    writeln!(w, "   {}", inert(&h.snippet))?;
                }
            }
            Ok(0)
        }
        Command::Gateway { listen } => gateway_cmd(&ctx, listen).await,
        Command::Serve { listen } => serve_cmd(&ctx, listen).await,
        Command::Chat {
            folder,
            url,
            sender,
        } => {
            let url = url.unwrap_or_else(|| format!("http://{}", ctx.settings.api.listen));
            g2_host::chat::run(g2_host::chat::ChatOptions {
                url,
                folder,
                sender,
                token: ctx.settings.api.token.clone(),
            })
            .await?;
            Ok(0)
        }
        Command::Image(ImageCmd::Build { agent, force }) => image_build(&ctx, agent, force).await,
        Command::Run {
            folder,
            prompt,
            out,
        } => run_cmd(&ctx, &folder, &prompt.join(" "), out).await,
        Command::Usage { group, days, out } => {
            let store = ctx.store().await?;
            if let Some(g) = &group
                && g != usage::LOCAL_CALLER
            {
                g2_core::validate::any_folder(g)?;
            }
            let since = (chrono::Utc::now() - chrono::Duration::days(i64::from(days.max(1)) - 1))
                .format("%Y-%m-%d")
                .to_string();
            let lines = store
                .read(move |c| store::usage::report(c, group.as_deref(), Some(&since)))
                .await?;
            if out.json {
                print_json(&lines)?;
            } else if lines.is_empty() {
                println!("no model requests recorded");
            } else {
                let mut w = std::io::stdout().lock();
                writeln!(
                    w,
                    "{:<10}  {:<16} {:<9} {:<24} {:>8} {:>12} {:>12} {:>6} {:>7}",
                    "day",
                    "group",
                    "provider",
                    "model",
                    "requests",
                    "input",
                    "output",
                    "errors",
                    "refused"
                )?;
                for l in lines {
                    writeln!(
                        w,
                        "{:<10}  {:<16} {:<9} {:<24} {:>8} {:>12} {:>12} {:>6} {:>7}",
                        inert_name(&l.day),
                        inert_name(&l.group),
                        inert_name(&l.provider),
                        inert_name(&l.model),
                        l.requests,
                        l.input_tokens + l.cache_read_tokens + l.cache_creation_tokens,
                        l.output_tokens,
                        l.errors,
                        l.refused
                    )?;
                }
            }
            Ok(0)
        }
        Command::Doctor { out } => {
            let checks = doctor::run(&ctx.home, &ctx.settings).await;
            if out.json {
                print_json(&checks)?;
            } else {
                for c in &checks {
                    println!(
                        "{:<12} {}  {}",
                        c.name,
                        if c.ok { "ok  " } else { "FAIL" },
                        c.detail
                    );
                }
            }
            Ok(if checks.iter().all(|c| c.ok) { 0 } else { 1 })
        }
    }
}

async fn serve_cmd(ctx: &Ctx, listen: Option<String>) -> Result<i32> {
    use g2_host::requests::Links;
    use g2_host::routing::{channels::Channels, queue};
    use g2_host::tasks::scheduler;
    ctx.home.ensure_layout()?;

    let addr: std::net::SocketAddr = listen
        .unwrap_or_else(|| ctx.settings.api.listen.clone())
        .parse()
        .context("api listen address: use IP:PORT")?;
    g2_host::api::check_bind(&addr, ctx.settings.api.token.as_deref())?;
    let store = ctx.store().await?;
    let (gw, choice) = Gateway::new(&ctx.settings.gateway, &ctx.home, store.clone())?;
    // Before any container is reaped or socket bound: one host per home.
    let mut lock = g2_host::lock::HostLock::acquire(&ctx.home, "serve")?;
    let runtime = agent_runtime(ctx).await?;
    let (queue, inbox) = queue::channel();
    let tasks_changed = std::sync::Arc::new(tokio::sync::Notify::new());
    let channels = Channels::new(store.clone()).with_router(queue.wake_sender());
    let closer = queue.clone();
    let links = Links {
        channels: channels.clone(),
        assistant_name: ctx.settings.assistant_name.clone(),
        session_changed: Some(std::sync::Arc::new(move |f: &str| closer.close(f))),
        tasks_changed: Some(tasks_changed.clone()),
    };
    let sessions = ctx.sessions(&store);
    let agents = std::sync::Arc::new(g2_host::agent::Agents::new(
        ctx.home.clone(),
        ctx.settings.clone(),
        store.clone(),
        sessions.clone(),
        std::sync::Arc::new(runtime),
        gw.clone(),
    ));
    for name in agents.reap().await? {
        tracing::warn!(container = %name, "removed a container left by an earlier host");
    }
    // Every group's requests, including what an earlier host left unanswered.
    let requests =
        g2_host::requests::RequestServer::new(ctx.home.clone(), store.clone(), sessions, links)
            .watch_all()?;
    let sockets: Vec<_> = group_sockets(ctx, &gw, &store)
        .await?
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let worker = queue::Queue::spawn(
        inbox,
        &queue,
        agents.clone(),
        store.clone(),
        channels.clone(),
        Some(tasks_changed.clone()),
    );
    let schedule = scheduler::start(store.clone(), queue.clone(), tasks_changed).await?;
    channels.redeliver().await?;
    // Messages stored but not answered before a crash are routed again.
    let groups = store.read(store::groups::list).await?;
    for g in &groups {
        queue.wake(&g.folder);
    }
    let api = g2_host::api::Api {
        home: ctx.home.clone(),
        store: store.clone(),
        sessions: agents.sessions().clone(),
        assistant_name: ctx.settings.assistant_name.clone(),
        provider: choice.kind.as_str().to_string(),
        token: ctx.settings.api.token.clone(),
        channels,
        queue: Some(queue.clone()),
        container: ctx.settings.container.clone(),
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    println!("provider  {}", choice.reason);
    lock.set_api(&format!("http://{}", listener.local_addr()?))?;
    println!("api       http://{}", listener.local_addr()?);
    println!("groups    {} sockets", sockets.len());
    tracing::info!(addr = %listener.local_addr()?, groups = groups.len(), "serving");
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let limits = g2_host::http::Limits::from(&ctx.settings.api);
    let server = tokio::spawn(g2_host::http::serve(
        listener,
        api.router(),
        limits,
        async move { stopped.notified().await },
    ));
    shutdown_signal().await;
    stop.notify_one();
    // Open streams (SSE) never end by themselves: the server closes them
    // after its grace period (http::SHUTDOWN_GRACE).
    let _ = server.await;
    tracing::info!("shutting down: closing containers");
    schedule.stop().await;
    queue.shutdown().await;
    requests.stop().await;
    worker.abort();
    stop_gateway(gw, sockets).await;
    Ok(0)
}

/// Serves every registered group's gateway socket; (folder, listener).
async fn group_sockets(
    ctx: &Ctx,
    gw: &Gateway,
    store: &Store,
) -> Result<Vec<(String, g2_host::gateway::Listening)>> {
    let mut sockets = Vec::new();
    for g in store.read(store::groups::list).await? {
        let l = gw.listen_group(&ctx.home, &g.folder).await?;
        sockets.push((g.folder, l));
    }
    Ok(sockets)
}

/// Stops the listeners, then waits for the last usage rows.
async fn stop_gateway(gw: Gateway, listeners: Vec<g2_host::gateway::Listening>) {
    for l in listeners {
        l.stop().await;
    }
    gw.flush().await;
}

async fn gateway_cmd(ctx: &Ctx, listen: Option<String>) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let (gw, choice) = Gateway::new(&ctx.settings.gateway, &ctx.home, store.clone())?;
    let addr = listen.unwrap_or_else(|| ctx.settings.gateway.listen.clone());
    let tcp = gw.listen_tcp(&addr).await?;
    println!("provider  {}", choice.reason);
    // Before any group socket is replaced: one host per home.
    let _lock = g2_host::lock::HostLock::acquire(&ctx.home, "gateway")?;
    println!("listening {}", tcp.address);
    let mut sockets = Vec::new();
    for (folder, l) in group_sockets(ctx, &gw, &store).await? {
        println!("group     {folder} {}", l.address);
        sockets.push(l);
    }
    println!(
        "try       ANTHROPIC_BASE_URL={} ANTHROPIC_API_KEY=unused CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude",
        tcp.address
    );
    shutdown_signal().await;
    sockets.push(tcp);
    stop_gateway(gw, sockets).await;
    Ok(0)
}

/// The Docker engine, with the agent image built if there is none yet.
async fn agent_runtime(ctx: &Ctx) -> Result<g2_host::container::docker::DockerRuntime> {
    let runtime = g2_host::container::docker::DockerRuntime::connect()
        .await
        .context("the Docker engine does not answer (scripts/setup.sh starts one)")?;
    if image::current_digest(runtime.docker()).await.is_none() {
        eprintln!("no agent image yet; building it");
        image_build(ctx, None, false).await?;
    }
    Ok(runtime)
}

async fn run_cmd(ctx: &Ctx, folder: &str, prompt: &str, out: Output) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    require_group(&store, folder).await?;
    // A live host owns this home's containers: leave them alone and say
    // where the message should go instead.
    let _lock = g2_host::lock::HostLock::acquire(&ctx.home, "run").map_err(|e| {
        let via = match g2_host::lock::HostLock::holder(&ctx.home).and_then(|h| h.api) {
            Some(api) => {
                format!("`g2 chat {folder} --url {api}` or POST {api}/api/groups/{folder}/messages")
            }
            None => "that process".into(),
        };
        anyhow!(
            "{e}.\nNothing was run and no container was touched; send the message through {via}"
        )
    })?;
    let runtime = agent_runtime(ctx).await?;
    let (gw, _) = Gateway::new(&ctx.settings.gateway, &ctx.home, store.clone())?;
    let sessions = ctx.sessions(&store);
    // Only the message log: no queue or scheduler runs here.
    let links = g2_host::requests::Links {
        channels: g2_host::routing::channels::Channels::new(store.clone()),
        assistant_name: ctx.settings.assistant_name.clone(),
        session_changed: None,
        tasks_changed: None,
    };
    let requests = g2_host::requests::RequestServer::new(
        ctx.home.clone(),
        store.clone(),
        sessions.clone(),
        links,
    );
    let agents = g2_host::agent::Agents::new(
        ctx.home.clone(),
        ctx.settings.clone(),
        store,
        sessions,
        std::sync::Arc::new(runtime),
        gw.clone(),
    )
    .with_run_watch(std::sync::Arc::new(move |folder: &str| {
        requests.watch(folder)
    }));
    for name in agents.reap().await? {
        eprintln!("removed container {name} left by an earlier host");
    }
    let report = agents.run_prompt(folder, prompt).await?;
    gw.flush().await;
    if out.json {
        print_json(&report)?;
    } else {
        for r in &report.replies {
            println!("{}", inert(r));
        }
        for e in &report.errors {
            eprintln!("agent error: {}", inert(e));
        }
        for a in &report.archives {
            eprintln!("archived {}", inert_name(&a.path));
        }
    }
    Ok(if report.replies.is_empty() { 1 } else { 0 })
}

async fn image_build(ctx: &Ctx, agent: Option<PathBuf>, force: bool) -> Result<i32> {
    let claude = doctor::find_claude(&ctx.home, &ctx.settings)
        .context("Claude Code not found (run scripts/setup.sh or set claude_code.path)")?;
    let agent = match agent {
        Some(a) => a,
        None => {
            let root = image::project_root().context(
                "this g2 was not built from a checkout; pass --agent with a static g2-agent binary",
            )?;
            eprintln!(
                "building the static g2-agent (cargo, --target {})…",
                image::AGENT_TARGET
            );
            tokio::task::spawn_blocking(move || image::build_agent(&root)).await??
        }
    };
    let inputs =
        tokio::task::spawn_blocking(move || image::Inputs::gather(agent, &claude)).await??;
    let docker = bollard::Docker::connect_with_defaults()?
        .negotiate_version()
        .await
        .context("no Docker engine answers (run scripts/setup.sh)")?;
    let started = std::time::Instant::now();
    let outcome = image::build(&docker, inputs, force, |line| eprintln!("  {line}")).await?;
    match outcome {
        image::Built::UpToDate(d) => {
            println!("{} is up to date (inputs {})", image::IMAGE, &d[..12])
        }
        image::Built::Built(d) => println!(
            "built {} in {:.1} s (inputs {})",
            image::IMAGE,
            started.elapsed().as_secs_f64(),
            &d[..12]
        ),
    }
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

async fn init(ctx: &Ctx) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let main = NewGroup {
        folder: "main".into(),
        name: "Main".into(),
        is_main: true,
        ..Default::default()
    }
    .into_group(&ctx.settings.assistant_name)?;
    let created = store
        .write(move |tx| match store::groups::main_group(tx)? {
            Some(existing) => Ok((existing, false)),
            None => {
                store::groups::add(tx, &main)?;
                Ok((main, true))
            }
        })
        .await?;
    ctx.home
        .ensure_group(&created.0.folder, &created.0.name, true)?;
    println!("home      {}", ctx.home.root().display());
    println!("database  {}", ctx.home.db_path().display());
    println!(
        "main      groups/{}/ ({})",
        created.0.folder,
        if created.1 {
            "registered"
        } else {
            "already registered"
        }
    );
    println!("global    groups/global/CLAUDE.md");
    Ok(0)
}

async fn require_group(store: &Store, folder: &str) -> Result<groups::Group> {
    groups::require(store, folder).await.map_err(|e| match e {
        g2_host::Error::NotFound(_) => {
            anyhow!("group {folder:?} is not registered (see `g2 groups list`)")
        }
        e => e.into(),
    })
}

async fn groups_cmd(ctx: &Ctx, cmd: GroupsCmd) -> Result<i32> {
    let store = ctx.store().await?;
    match cmd {
        GroupsCmd::Add {
            folder,
            name,
            jid,
            trigger,
            no_trigger,
            main,
        } => {
            let new = NewGroup {
                folder,
                name,
                jid,
                trigger_pattern: trigger,
                requires_trigger: no_trigger.then_some(false),
                is_main: main,
            };
            let group =
                groups::register(&store, &ctx.home, new, &ctx.settings.assistant_name).await?;
            println!(
                "registered {} (groups/{}/)",
                inert_name(&group.name),
                group.folder
            );
        }
        GroupsCmd::List { out } => {
            let all = store.read(store::groups::list).await?;
            if out.json {
                print_json(&all)?;
            } else if all.is_empty() {
                println!("no groups (run `g2 init`)");
            } else {
                for g in all {
                    let trigger = if g.requires_trigger {
                        g.trigger_pattern.unwrap_or_default()
                    } else {
                        "(no trigger)".into()
                    };
                    println!(
                        "{:<20} {:<24} {:<28} {}{}",
                        g.folder,
                        inert_name(&g.name),
                        inert_name(&g.jid),
                        inert_name(&trigger),
                        if g.is_main { "  [main]" } else { "" }
                    );
                }
            }
        }
        GroupsCmd::Remove { folder } => {
            let g = store
                .write(move |tx| store::groups::remove(tx, &folder))
                .await?;
            println!(
                "removed {} (groups/{}/ and its sessions are kept)",
                inert_name(&g.name),
                g.folder
            );
        }
    }
    Ok(0)
}

async fn sessions_cmd(ctx: &Ctx, cmd: SessionsCmd) -> Result<i32> {
    let store = ctx.store().await?;
    let sessions = ctx.sessions(&store);
    match cmd {
        SessionsCmd::Show { folder, out } => {
            let p = sessions.get(&folder).await?;
            if out.json {
                print_json(&p)?;
            } else {
                match &p.session_id {
                    Some(id) => println!("{id}"),
                    None => println!("no active session (generation {})", p.generation),
                }
            }
        }
        SessionsCmd::Set { folder, session_id } => {
            require_group(&store, &folder).await?;
            let p = sessions.get(&folder).await?;
            let p = sessions.set(&folder, &session_id, p.generation).await?;
            println!(
                "{} is the active session of {folder}",
                p.session_id.unwrap_or_default()
            );
        }
        SessionsCmd::History { folder, out } => {
            let h = sessions.history(&folder).await?;
            if out.json {
                print_json(&h)?;
            } else if h.is_empty() {
                println!("no earlier sessions");
            } else {
                for e in h {
                    println!(
                        "{:>5}  {}  {}  {}",
                        e.id,
                        inert_name(&e.archived_at[..10.min(e.archived_at.len())]),
                        e.session_id,
                        inert_name(&e.name)
                    );
                }
            }
        }
        SessionsCmd::Clear { folder, name, out } => {
            require_group(&store, &folder).await?;
            let p = sessions.get(&folder).await?;
            let cleared = sessions.clear(&folder, &name, p.generation).await?;
            if out.json {
                print_json(&cleared)?;
            } else {
                println!(
                    "cleared session {} as history #{} {:?}",
                    cleared.history.session_id, cleared.history.id, cleared.history.name
                );
                match &cleared.archive {
                    Some(a) => println!("archived to {}", ctx.home.root().join(&a.path).display()),
                    None => println!("no transcript on disk; nothing archived"),
                }
            }
        }
        SessionsCmd::Resume {
            folder,
            history_id,
            save_as,
            out,
        } => {
            require_group(&store, &folder).await?;
            let p = sessions.get(&folder).await?;
            let r = sessions
                .resume(&folder, history_id, p.generation, save_as.as_deref())
                .await?;
            if out.json {
                print_json(&r)?;
            } else {
                if let Some(s) = &r.saved {
                    println!(
                        "saved session {} as history #{} {:?}",
                        s.session_id, s.id, s.name
                    );
                }
                println!(
                    "{} is the active session of {folder}",
                    r.pointer.session_id.unwrap_or_default()
                );
            }
        }
    }
    Ok(0)
}

fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let mut w = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut w, value)?;
    writeln!(w)?;
    Ok(())
}
