//! Model usage accounting: one row per request the gateway answered or
//! refused, and the sums behind per-group daily budgets and `g2 usage`.
//! The rows and their statements are `store::usage`'s.
//!
//! Invariant: a row's `caller` comes from the listener the request arrived
//! on (a group's socket, or [`LOCAL_CALLER`] for loopback TCP), never from
//! anything in the request.

pub use crate::store::usage::{LOCAL_CALLER, Line, Outcome, Purpose, Record, Tokens, since, today};

use crate::Result;
use crate::store::{self, Store};

/// Whether a usage line is the built-in offline model's: it costs
/// nothing, and its token counts are the gateway's estimates, not spend,
/// so reports show it as such rather than as tokens.
pub fn is_offline(line: &Line) -> bool {
    line.provider == super::offline::NAME
}

/// Usage by day, caller, purpose, provider and model since `since` (a
/// day), of one group or of all.
pub async fn report(store: &Store, group: Option<&str>, since: &str) -> Result<Vec<Line>> {
    let (group, since) = (group.map(str::to_string), since.to_string());
    store
        .read(move |c| store::usage::report(c, group.as_deref(), Some(&since)))
        .await
}
