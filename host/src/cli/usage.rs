//! `g2 usage`: the model usage report.

use std::io::Write;

use anyhow::Result;

use super::{Ctx, Output};
use crate::gateway::usage;
use crate::store;
use crate::terminal::inert_name;

pub(super) async fn usage(ctx: &Ctx, group: Option<String>, days: u32, out: Output) -> Result<i32> {
    let store = ctx.store().await?;
    if let Some(g) = &group
        && g != usage::LOCAL_CALLER
    {
        g2_core::validate::any_folder(g)?;
    }
    let since = usage::since(days.max(1));
    let lines = store
        .read(move |c| store::usage::report(c, group.as_deref(), Some(&since)))
        .await?;
    out.print(&lines, |lines| {
        if lines.is_empty() {
            println!("no model requests recorded");
            return Ok(());
        }
        let mut w = std::io::stdout().lock();
        writeln!(
            w,
            "{:<10}  {:<16} {:<7} {:<9} {:<24} {:>8} {:>12} {:>12} {:>6} {:>7}",
            "day",
            "group",
            "purpose",
            "provider",
            "model",
            "requests",
            "input",
            "output",
            "errors",
            "refused"
        )?;
        for l in lines {
            // The offline model spends nothing: no model name or token
            // count that could read as a bill.
            let (model, input, output) = if usage::is_offline(l) {
                ("offline model".into(), "-".into(), "-".into())
            } else {
                (
                    inert_name(&l.model),
                    (l.input_tokens + l.cache_read_tokens + l.cache_creation_tokens).to_string(),
                    l.output_tokens.to_string(),
                )
            };
            writeln!(
                w,
                "{:<10}  {:<16} {:<7} {:<9} {:<24} {:>8} {:>12} {:>12} {:>6} {:>7}",
                inert_name(&l.day),
                inert_name(&l.group),
                l.purpose.as_str(),
                inert_name(&l.provider),
                model,
                l.requests,
                input,
                output,
                l.errors,
                l.refused
            )?;
        }
        if lines.iter().any(usage::is_offline) {
            writeln!(
                w,
                "offline model: answered on this machine, no account, nothing spent"
            )?;
        }
        Ok(())
    })?;
    Ok(0)
}
