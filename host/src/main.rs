//! `g2`: the command line of the g2 host (host/src/cli/). Logs go to
//! stderr, filtered by `G2_LOG` (default `warn`).

fn main() {
    g2_host::memory::embed::use_every_core();
    let filter = tracing_subscriber::EnvFilter::try_from_env("G2_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A closed span prints its duration: only the turn trace's spans,
    // which are off unless `G2_LOG` enables `g2::turn` at debug.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr);
    // One JSON object per line for log collectors; text for people.
    if std::env::var("G2_LOG_FORMAT").is_ok_and(|f| f == "json") {
        logs.json().init();
    } else {
        logs.init();
    }
    // Only a test build has fail points (g2-host's dev-dependency turns
    // them on): its crash tests name where to stop (`FAILPOINTS`).
    if fail::has_failpoints()
        && let Ok(points) = std::env::var("FAILPOINTS")
    {
        tracing::warn!(points, "fail points set");
        std::mem::forget(fail::FailScenario::setup());
    }
    g2_host::cli::main()
}
