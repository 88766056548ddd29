//! The per-stage trace of a turn (`docs/development.md`, "Tracing a
//! turn"): one `tracing` event per stage under [`TARGET`] (`g2::turn`),
//! off unless the log asks for it (`G2_LOG=warn,g2::turn=debug`). The
//! stage names are `g2_core::trace`'s; the container's stamps come in its
//! reply frame and are logged here as they are read.

use g2_core::trace::{Stage, Trace};
pub use g2_core::trace::{TARGET, now_us};

/// Whether turns are traced (the container is then asked for its stamps).
pub fn on() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

/// What else a stage may say.
#[derive(Debug, Default, Clone, Copy)]
pub struct Detail<'a> {
    /// When it happened, if not now (the container's stamps).
    pub at_us: Option<u64>,
    /// The hook's event, for the hook stages.
    pub hook: Option<&'a str>,
    /// How long the stage's work took (`events_taken`).
    pub took_us: Option<u64>,
    /// The memory answer missed the hook's deadline.
    pub late: Option<bool>,
    /// The chat, where the group is not known (`published`).
    pub chat: Option<&'a str>,
}

/// Records `stage` for `group`, keyed by a message's `seq` where known
/// (the batch's last message, or the reply).
pub fn stamp(stage: Stage, group: &str, seq: Option<i64>) {
    record(stage, Some(group), seq, Detail::default());
}

/// Records one stage: the one place the trace's events are made.
pub fn record(stage: Stage, group: Option<&str>, seq: Option<i64>, d: Detail<'_>) {
    if !on() {
        return;
    }
    tracing::debug!(
        target: TARGET,
        group,
        stage = stage.as_str(),
        at_us = d.at_us.unwrap_or_else(now_us),
        seq,
        hook = d.hook,
        took_us = d.took_us,
        late = d.late,
        chat = d.chat,
        "{}",
        stage.as_str()
    );
}

/// Logs the stamps a container sent with its reply (already checked:
/// known container stages, known hooks, bounded).
pub fn container(group: &str, trace: &Trace) {
    for s in &trace.0 {
        if let Some(stage) = s.stage() {
            let d = Detail {
                at_us: Some(s.at_us),
                hook: s.hook.as_deref(),
                ..Detail::default()
            };
            record(stage, Some(group), None, d);
        }
    }
}
