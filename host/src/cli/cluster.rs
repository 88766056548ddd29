//! `g2 cluster status`: the hosts sharing this home's store and who owns
//! each group (docs/cluster.md).

use std::io::Write;

use anyhow::Result;
use clap::Subcommand;

use super::{Ctx, Output};
use crate::cluster::status;
use crate::terminal::inert_name;

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// The hosts (last heartbeat, groups held) and each group's owner
    /// (lease generation, age, time left).
    Status {
        #[command(flatten)]
        out: Output,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: ClusterCmd) -> Result<i32> {
    match cmd {
        ClusterCmd::Status { out } => {
            let store = ctx.store().await?;
            let s = status::read(&store, ctx.settings.cluster.lease_secs).await?;
            out.print(&s, print)?;
            Ok(0)
        }
    }
}

fn secs(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn print(s: &status::Status) -> Result<()> {
    let mut w = std::io::stdout().lock();
    if s.hosts.is_empty() {
        writeln!(w, "no host has joined (g2 serve joins when it starts)")?;
    } else {
        writeln!(
            w,
            "{:<24} {:<28} {:>10} {:<9} {:>6}",
            "host", "api", "seen", "state", "groups"
        )?;
        for h in &s.hosts {
            let state = match (h.live, h.stopping, h.present) {
                (_, true, _) => "stopping",
                (true, ..) => "live",
                (false, _, false) => "gone",
                (false, _, true) => "silent",
            };
            writeln!(
                w,
                "{:<24} {:<28} {:>10} {:<9} {:>6}",
                inert_name(&h.host_id),
                inert_name(&h.api),
                format!("{} ago", secs(h.seen_ago_ms)),
                state,
                h.groups
            )?;
        }
    }
    writeln!(w)?;
    writeln!(
        w,
        "{:<24} {:<24} {:>10} {:>10} {:>10}",
        "group", "owner", "generation", "held", "expires in"
    )?;
    for g in &s.groups {
        let dash = || "-".to_string();
        writeln!(
            w,
            "{:<24} {:<24} {:>10} {:>10} {:>10}",
            inert_name(&g.name),
            g.host_id
                .as_deref()
                .map_or_else(dash, |h| inert_name(h).into_owned()),
            g.generation.map_or_else(dash, |n| n.to_string()),
            g.held_ms.map_or_else(dash, secs),
            g.expires_in_ms.map_or_else(dash, secs),
        )?;
    }
    Ok(())
}
