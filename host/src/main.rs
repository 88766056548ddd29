//! `g2`: the command line of the g2 host (host/src/cli/). Logs go to
//! stderr, filtered by `G2_LOG` (default `warn`).

fn main() {
    quiet_on_closed_stdout();
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

/// `println!` panics when stdout's reader has gone (`g2 … | head`): the
/// command ends there, quietly and with status 0, as it does when such an
/// error is returned (`cli::main`).
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}
