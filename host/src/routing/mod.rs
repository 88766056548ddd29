//! Routing: what comes in, what wakes an agent, and when it runs.
//!
//! Messages come in and go out through the channels (host/src/channels/),
//! which sit above routing: they implement the queue's [`queue::Outlet`];
//! nothing here imports them. Both read and write the message log
//! ([`crate::messages`]), which sits below them. [`rules`] decides what a
//! stored message means for its group (triggers, the prompt, cursors,
//! what an edit may still change); [`notices`] what senders are told when
//! the queue gives up; [`queue`] decides when and where each group's agent
//! runs.

pub mod notices;
pub mod queue;
pub mod rules;
