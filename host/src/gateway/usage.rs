//! Model usage accounting: one row per request the gateway answered or
//! refused, and the sums behind per-group daily budgets and `g2 usage`.
//! The rows and their statements are `store::usage`'s.
//!
//! Invariant: a row's `caller` comes from the listener the request arrived
//! on (a group's socket, or [`LOCAL_CALLER`] for loopback TCP), never from
//! anything in the request.

pub use crate::store::usage::{LOCAL_CALLER, Line, Outcome, Purpose, Record, Tokens, since, today};
