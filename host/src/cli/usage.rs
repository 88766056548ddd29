//! `g2 usage`: the model usage report.

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
    let (g, s) = (group.clone(), since.clone());
    let lines = store
        .read(move |c| store::usage::report(c, g.as_deref(), Some(&s)))
        .await?;
    // The group's memory read from outside, by token (`--json` keeps the
    // model report's shape; `g2 mcp calls --json` has these).
    let calls = store
        .read(move |c| store::mcp::report(c, group.as_deref(), Some(&since)))
        .await?;
    out.print(&lines, |lines| {
        if lines.is_empty() {
            println!("no model requests recorded");
        } else {
            model_table(lines)?;
        }
        if !calls.is_empty() {
            println!("\nMCP tool calls (the group's memory read from your own clients, by token):");
            super::mcp::print_calls(&calls)?;
        }
        Ok(())
    })?;
    Ok(0)
}

/// The model requests, one row per day, group, purpose, provider and model.
fn model_table(lines: &[store::usage::Line]) -> Result<()> {
    let mut table = super::output::Table::new(&[5, 6, 7, 8, 9]);
    table.row([
        "day", "group", "purpose", "provider", "model", "requests", "input", "output", "errors",
        "refused",
    ]);
    for l in lines {
        // The offline model spends nothing: no model name or token
        // count that could read as a bill.
        let (model, input, output) = if usage::is_offline(l) {
            ("offline model".into(), "-".into(), "-".into())
        } else {
            (
                inert_name(&l.model).into_owned(),
                (l.input_tokens + l.cache_read_tokens + l.cache_creation_tokens).to_string(),
                l.output_tokens.to_string(),
            )
        };
        table.row([
            inert_name(&l.day).into_owned(),
            inert_name(&l.group).into_owned(),
            l.purpose.as_str().to_string(),
            inert_name(&l.provider).into_owned(),
            model,
            l.requests.to_string(),
            input,
            output,
            l.errors.to_string(),
            l.refused.to_string(),
        ]);
    }
    table.print()?;
    if lines.iter().any(usage::is_offline) {
        println!("offline model: answered on this machine, no account, nothing spent");
    }
    Ok(())
}
