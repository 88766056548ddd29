//! The `g2` command line: the clap definitions and a handler per command
//! group, each a thin layer over the library (the host's wiring is in
//! [`crate::host`]). This is the binary's edge: handlers return
//! `anyhow::Result` and print; an error becomes `error: …` and exit code 1.
//! Every `--json` goes through [`Output::print`].

mod archive;
mod backup;
mod cluster;
mod doctor;
mod groups;
mod image;
mod init;
mod live;
mod mcp;
mod memory;
mod migrate;
mod output;
mod serve;
mod sessions;
mod usage;

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use clap::{Parser, Subcommand};

use crate::config::Settings;
use crate::home::Home;
use crate::sessions::SessionManager;
use crate::store::Store;
use g2_core::validate::GroupFolder;

pub use output::Output;

/// Whose hits a search shows (`g2 search`, `g2 memory search`), and how
/// many.
#[derive(clap::Args)]
pub struct Scope {
    /// Only this group's (default: every group's).
    #[arg(long)]
    pub group: Option<String>,
    /// Most hits to show.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
}

#[derive(Parser)]
#[command(
    name = "g2",
    version,
    about = "g2: a self-hosted memory host for AI agents in chat groups"
)]
pub struct Cli {
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
    Groups(groups::GroupsCmd),
    /// Show and change a group's active session and its history.
    #[command(subcommand)]
    Sessions(sessions::SessionsCmd),
    /// What the memory layer captured of a group's agent sessions.
    #[command(subcommand)]
    Memory(memory::MemoryCmd),
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
    /// Tokens for your own MCP clients (Claude Desktop, Claude Code, Cursor)
    /// to read one group's memory at /mcp, and the calls made with them.
    #[command(subcommand)]
    Mcp(mcp::McpCmd),
    /// Full-text search over conversation archives, best first.
    Search {
        /// Words or a question to find (any word finds; archives holding all rank first; `word*` matches a prefix).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        #[command(flatten)]
        scope: Scope,
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
    Image(image::ImageCmd),
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
    /// Several hosts on one store: who runs which group.
    #[command(subcommand)]
    Cluster(cluster::ClusterCmd),
    /// Copy this home's SQLite store into an empty PostgreSQL database
    /// (docs/postgres.md); the SQLite file is left as it is.
    Migrate {
        /// The database: postgres://user@host:port/database (the password
        /// from PGPASSWORD).
        #[arg(long)]
        to: String,
        #[command(flatten)]
        out: Output,
    },
    /// Copy this home (store, groups' folders, sessions, settings without
    /// secrets) into one new file, while it runs or not (docs/backup.md).
    Backup {
        /// The backup file to create (`.tar.zst`).
        file: PathBuf,
        #[command(flatten)]
        out: Output,
    },
    /// Put a backup back into an empty home (--home), checked against its
    /// manifest.
    Restore {
        /// The backup file.
        file: PathBuf,
        #[command(flatten)]
        out: Output,
    },
    /// Check the database, folders, Docker engine, Claude Code and model provider.
    Doctor {
        #[command(flatten)]
        out: Output,
    },
}

/// Parses the arguments, runs the command and exits with its code (an
/// error is printed as `error: …`, code 1). Exits while the runtime is
/// still up: tasks blocked on stdin or a watcher would hold its drop.
pub fn main() -> ! {
    let cli = Cli::parse();
    // reqwest is built without a bundled crypto provider: ring's, once,
    // for every client a command makes (`g2 chat`, the running host's API).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        // Stdout's reader has gone (`g2 … | head`): nothing to say.
        Err(e) if output::broken_pipe(&e) => std::process::exit(0),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

/// Runs one command; returns its exit code.
pub async fn run(cli: Cli) -> Result<i32> {
    let mut home = Home::new(&cli.home)?;
    if let Some(file) = &cli.config {
        home = home.with_settings_file(file);
    }
    let settings = Settings::load(home.root(), cli.config.as_deref())?;
    crate::zone::configure(&settings.memory);
    let home = home.with_runtime_dir(settings.cluster.runtime_dir.as_deref());
    let ctx = Ctx { home, settings };
    match cli.command {
        Command::Init => init::init(&ctx).await,
        Command::Groups(cmd) => groups::run(&ctx, cmd).await,
        Command::Sessions(cmd) => sessions::run(&ctx, cmd).await,
        Command::Memory(cmd) => memory::run(&ctx, cmd).await,
        Command::Mcp(cmd) => mcp::run(&ctx, cmd).await,
        Command::Archive {
            transcript,
            group,
            name,
            out,
        } => archive::archive(&ctx, transcript, &group, name, out).await,
        Command::Search {
            query,
            scope: Scope { group, limit },
            out,
        } => archive::search(&ctx, query.join(" "), group, limit, out).await,
        Command::Gateway { listen } => serve::gateway(&ctx, listen).await,
        Command::Serve { listen } => serve::serve(&ctx, listen).await,
        Command::Chat {
            folder,
            url,
            sender,
        } => serve::chat(&ctx, folder, url, sender).await,
        Command::Image(cmd) => image::run(&ctx, cmd).await,
        Command::Run {
            folder,
            prompt,
            out,
        } => serve::run(&ctx, &folder, &prompt.join(" "), out).await,
        Command::Usage { group, days, out } => usage::usage(&ctx, group, days, out).await,
        Command::Cluster(cmd) => cluster::run(&ctx, cmd).await,
        Command::Migrate { to, out } => migrate::migrate(&ctx, to, out).await,
        Command::Backup { file, out } => backup::backup(&ctx, file, out).await,
        Command::Restore { file, out } => backup::restore(&ctx, file, out).await,
        Command::Doctor { out } => doctor::doctor(&ctx, out).await,
    }
}

/// The home and settings every command starts from.
struct Ctx {
    home: Home,
    settings: Settings,
}

impl Ctx {
    async fn store(&self) -> Result<Store> {
        Ok(crate::host::open_store(&self.home, &self.settings).await?)
    }

    fn sessions(&self, store: &Store) -> SessionManager {
        crate::host::sessions(&self.home, &self.settings, store)
    }
}

/// The host's notes go to stderr, its results to stdout.
struct Console;

impl crate::host::Report for Console {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }

    fn result(&self, line: &str) {
        println!("{line}");
    }
}

/// The registered group, or an error that says how to list them.
/// The group a command-line argument names: the folder is checked here,
/// where it comes in, and the group must be registered.
async fn require_group(store: &Store, folder: &str) -> Result<crate::groups::Group> {
    let folder = GroupFolder::new(folder)?;
    crate::groups::require(store, &folder)
        .await
        .map_err(|e| match e {
            crate::Error::NotFound(_) => {
                anyhow!(
                    "group {:?} is not registered (see `g2 groups list`)",
                    folder.as_str()
                )
            }
            e => e.into(),
        })
}
