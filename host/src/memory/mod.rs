//! Memory capture, the host's side: what happened in each group's agent
//! sessions — sessions, one batch per prompt, one activity per tool call —
//! kept consistent whatever happened to the agent or the host.
//!
//! The API boundary: [`recovery`] (the jobs that bring interrupted capture
//! to a consistent state, and retention); [`jobs`] starts the background
//! jobs of `g2 serve` together. The rows and their statements are
//! in `store::memory`; what reaches them was stripped of private spans and
//! redacted first (`g2_core::privacy`).

pub mod attach;
pub mod context;
pub mod embed;
pub mod extract;
pub mod forget;
pub mod ingest;
pub mod jobs;
pub mod process;
pub mod recall;
pub mod recovery;
pub mod remember;
pub mod shown;
#[cfg(test)]
mod testing;
pub mod vectors;
