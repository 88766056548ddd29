//! `g2 doctor`: the environment checks; exit code 1 when one fails.
//!
//! While `g2 serve` runs on the home, the checks use the settings the host
//! runs with (`GET /api/host`), not the ones this process would load: its
//! environment may differ from the host's.

use anyhow::Result;

use super::{Ctx, Output};
use crate::config::Settings;
use crate::doctor::Check;
use crate::lock::HostLock;

pub(super) async fn doctor(ctx: &Ctx, out: Output) -> Result<i32> {
    let (settings, whose) = running_host(ctx).await;
    let mut checks = vec![whose];
    checks.extend(crate::doctor::run(&ctx.home, &settings).await);
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

/// The settings to check with, and a line saying whose they are: the
/// running host's when one answers, else this process's.
async fn running_host(ctx: &Ctx) -> (Settings, Check) {
    let own = |detail: String| {
        (
            ctx.settings.clone(),
            Check {
                name: "settings",
                ok: true,
                detail,
            },
        )
    };
    let Some(api) = HostLock::holder(&ctx.home)
        .filter(|h| h.command == "serve")
        .and_then(|h| h.api.map(|a| (h.pid, a)))
    else {
        return own("this home's (no g2 serve is running)".into());
    };
    let (pid, base) = api;
    let mut req = reqwest::Client::new().get(format!("{base}/api/host"));
    if let Some(t) = &ctx.settings.api.token {
        req = req.bearer_auth(t);
    }
    let asked = async {
        let v: serde_json::Value = req
            .send()
            .await
            .ok()?
            .error_for_status()
            .ok()?
            .json()
            .await
            .ok()?;
        serde_json::from_value::<Settings>(v["settings"].clone()).ok()
    };
    match tokio::time::timeout(std::time::Duration::from_secs(5), asked).await {
        Ok(Some(mut s)) => {
            // Shown without its secrets: this home's own are the same.
            s.api.token.clone_from(&ctx.settings.api.token);
            s.store.url.clone_from(&ctx.settings.store.url);
            (
                s,
                Check {
                    name: "settings",
                    ok: true,
                    detail: format!("those of the running g2 serve (pid {pid}, {base})"),
                },
            )
        }
        _ => {
            let (s, mut c) = own(format!(
                "this process's: the running g2 serve (pid {pid}, {base}) did not say its own"
            ));
            c.ok = false;
            (s, c)
        }
    }
}
