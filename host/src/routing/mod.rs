//! Routing: what comes in, what wakes an agent, and when it runs.
//!
//! [`channels`] takes messages in and publishes them; [`messages`] is the
//! message log; [`rules`] decides what a stored message means for its group
//! (triggers, the prompt, cursors); [`queue`] decides when and where each
//! group's agent runs.

pub mod channels;
pub mod messages;
pub mod notices;
pub mod queue;
pub mod rules;
