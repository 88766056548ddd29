//! `g2-agent`: the process that runs inside each group's container and
//! drives Claude Code.
//!
//! - `g2-agent run` is the container's entrypoint ([`run`]).
//! - `g2-agent hook <event>` is what the group's Claude Code hooks call
//!   ([`hook`]).
//! - `g2-agent mcp` is the `g2` MCP server with the agent's tools ([`mcp`]).
//!
//! It holds no secret and needs none: the model is reached through the
//! group's gateway socket ([`proxy`]).

mod capture;
mod hook;
mod inbox;
mod inject;
mod mcp;
mod paths;
mod prompt;
mod proxy;
mod run;
mod trace;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "g2-agent", version, about = "g2's in-container agent runner")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the group's agent: container input on stdin, frames on stdout.
    Run,
    /// Handle a Claude Code hook event (input on stdin); always exits 0.
    Hook { event: String },
    /// The `g2` MCP server (stdio) with the agent's g2 tools.
    Mcp,
}

fn main() {
    let cli = Cli::parse();
    let paths = paths::Paths::from_env();
    let code = match cli.command {
        Cmd::Run => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(run::run(paths))
        }
        Cmd::Hook { event } => hook::run(&paths, &event),
        Cmd::Mcp => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(mcp::serve(paths))
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_hook_command_is_a_hook() {
        // The host registers `wire::AGENT_EXE` with `wire::hook_args` in
        // settings.json.
        let args = g2_core::wire::hook_args(g2_core::wire::PRE_COMPACT);
        let cli = Cli::try_parse_from(
            std::iter::once(g2_core::wire::AGENT_EXE).chain(args.iter().map(String::as_str)),
        )
        .unwrap();
        assert!(matches!(cli.command, Cmd::Hook { event } if event == "PreCompact"));
    }
}
