//! `g2 mcp`: the tokens a user's own MCP clients reach a group's memory
//! with (`/mcp`, docs/mcp.md), and the calls made with them.

use anyhow::Result;
use clap::Subcommand;
use serde_json::json;

use g2_core::validate::GroupFolder;

use super::{Ctx, Output};
use crate::mcp::tokens::{self, Scope, TokenRow};
use crate::store;
use crate::terminal::inert_name;

#[derive(Subcommand)]
pub(super) enum McpCmd {
    /// Issue, list and revoke tokens.
    #[command(subcommand)]
    Tokens(TokensCmd),
    /// The tool calls made with tokens, per day, group, token and tool.
    Calls {
        /// Only this group.
        #[arg(long)]
        group: Option<String>,
        /// How many days back, today included.
        #[arg(long, default_value_t = 30)]
        days: u32,
        #[command(flatten)]
        out: Output,
    },
}

#[derive(Subcommand)]
pub(super) enum TokensCmd {
    /// Issue a token for one group; it is printed once and kept only as a hash.
    Create {
        /// The group whose memory the token reads.
        folder: String,
        /// The token may also remember and forget.
        #[arg(long)]
        write: bool,
        /// A name to know it by in lists and usage (default: the group and the time).
        #[arg(long)]
        name: Option<String>,
        /// It stops working after this many days (default: never).
        #[arg(long)]
        expires: Option<u32>,
        #[command(flatten)]
        out: Output,
    },
    /// List tokens (never the tokens themselves).
    List {
        /// Only this group's.
        #[arg(long)]
        group: Option<String>,
        #[command(flatten)]
        out: Output,
    },
    /// Revoke a token by its id (from list): its next call is refused.
    Revoke { id: i64 },
}

pub(super) async fn run(ctx: &Ctx, cmd: McpCmd) -> Result<i32> {
    let store = ctx.store().await?;
    match cmd {
        McpCmd::Tokens(TokensCmd::Create {
            folder,
            write,
            name,
            expires,
            out,
        }) => {
            let folder = GroupFolder::new(folder)?;
            let scope = if write { Scope::Write } else { Scope::Read };
            let issued = tokens::issue(&store, &folder, name.as_deref(), scope, expires).await?;
            let value = json!({ "token": issued.token, "details": issued.row });
            out.print(&value, |_| {
                println!("{}", issued.token);
                eprintln!(
                    "token {} ({}) for group {}, {} scope{}: shown this once; g2 keeps only its hash.",
                    issued.row.id,
                    inert_name(&issued.row.name),
                    issued.row.group,
                    issued.row.scope,
                    issued
                        .row
                        .expires_at
                        .as_deref()
                        .map(|at| format!(", expires {at}"))
                        .unwrap_or_default()
                );
                // Listening on every address, the host is still this one.
                let at = ctx.settings.api.listen.replace("0.0.0.0", "127.0.0.1");
                eprintln!(
                    "connect: claude mcp add --transport http g2-{} http://{at}/mcp --header \"Authorization: Bearer <the token>\" (behind a TLS proxy: its https:// URL)",
                    issued.row.group
                );
                Ok(())
            })?;
        }
        McpCmd::Tokens(TokensCmd::List { group, out }) => {
            let group = group.map(GroupFolder::new).transpose()?;
            let rows = tokens::list(&store, group.as_ref()).await?;
            out.print(&rows, |rows| print_tokens(rows))?;
        }
        McpCmd::Tokens(TokensCmd::Revoke { id }) => {
            let row = tokens::revoke(&store, id).await?;
            println!(
                "revoked token {} ({}) of group {}",
                row.id,
                inert_name(&row.name),
                row.group
            );
        }
        McpCmd::Calls { group, days, out } => {
            if let Some(g) = &group {
                g2_core::validate::any_folder(g)?;
            }
            let since = crate::gateway::usage::since(days.max(1));
            let lines = store
                .read(move |c| store::mcp::report(c, group.as_deref(), Some(&since)))
                .await?;
            out.print(&lines, |lines| print_calls(lines))?;
        }
    }
    Ok(0)
}

fn print_tokens(rows: &[TokenRow]) -> Result<()> {
    if rows.is_empty() {
        println!("no MCP tokens (g2 mcp tokens create <folder>)");
        return Ok(());
    }
    let mut table = super::output::Table::new(&[0]);
    table.row([
        "id",
        "group",
        "name",
        "token",
        "scope",
        "created",
        "expires",
        "state",
        "last used",
    ]);
    let day = |at: &Option<String>| {
        at.as_deref()
            .map_or("-".into(), |a| a.chars().take(10).collect())
    };
    let now = crate::now_rfc3339();
    for r in rows {
        let state = tokens::state(r, &now);
        table.row([
            r.id.to_string(),
            r.group.clone(),
            inert_name(&r.name).into_owned(),
            format!("{}…", r.prefix),
            r.scope.clone(),
            day(&Some(r.created_at.clone())),
            day(&r.expires_at),
            state.into(),
            day(&r.last_used_at),
        ]);
    }
    table.print()
}

pub(super) fn print_calls(lines: &[store::mcp::CallLine]) -> Result<()> {
    if lines.is_empty() {
        println!("no MCP tool calls recorded");
        return Ok(());
    }
    let mut table = super::output::Table::new(&[4, 5, 6, 7]);
    table.row([
        "day",
        "group",
        "token",
        "tool",
        "calls",
        "refused",
        "failed",
        "ms (mean)",
    ]);
    for l in lines {
        table.row([
            l.day.clone(),
            l.group.clone(),
            inert_name(&l.token).into_owned(),
            l.tool.clone(),
            l.calls.to_string(),
            l.refused.to_string(),
            l.failed.to_string(),
            (l.total_duration_ms / l.calls.max(1)).to_string(),
        ]);
    }
    table.print()
}
