//! Routing: what comes in, what wakes an agent, and when it runs.
//!
//! Messages come in and go out through [`crate::channels`]; [`messages`]
//! is the message log; [`rules`] decides what a stored message means for its group
//! (triggers, the prompt, cursors); [`queue`] decides when and where each
//! group's agent runs.

pub mod messages;
pub mod notices;
pub mod queue;
pub mod rules;
