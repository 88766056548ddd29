//! `g2 doctor`: the environment checks; exit code 1 when one fails.

use anyhow::Result;

use super::{Ctx, Output};

pub(super) async fn doctor(ctx: &Ctx, out: Output) -> Result<i32> {
    let checks = crate::doctor::run(&ctx.home, &ctx.settings).await;
    out.print(&checks, |checks| {
        for c in checks {
            println!(
                "{:<12} {}  {}",
                c.name,
                if c.ok { "ok  " } else { "FAIL" },
                c.detail
            );
        }
        Ok(())
    })?;
    Ok(if checks.iter().all(|c| c.ok) { 0 } else { 1 })
}
