//! Routing: what comes in, what wakes an agent, and when it runs.
//!
//! Messages come in and go out through the channels (host/src/channels/),
//! which sit above routing: they call [`rules`] and implement the queue's
//! [`queue::Outlet`]; nothing here imports them. [`messages`] is the
//! message log; [`rules`] decides what a stored message means for its
//! group (triggers, the prompt, cursors, what an edit changes); [`notices`]
//! what senders are told when the queue gives up; [`queue`] decides when
//! and where each group's agent runs.

pub mod messages;
pub mod notices;
pub mod queue;
pub mod rules;
