//! A group's failing mark: why its last messages could not be answered or
//! sent (the queue gave up, the platform says the chat is gone). Set by
//! the queue's notices and the channels' sending, cleared by the next
//! reply stored, shown by the API and the viewer; one row per group in
//! `router_state` (key `failing:{folder}`).

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::store::{self, Db};

fn failing_key(folder: &str) -> String {
    format!("failing:{folder}")
}

/// Why a group's last messages could not be answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failing {
    pub since: String,
    pub error: String,
}

/// Marks the group failing with `error` (at most 2000 characters kept).
pub fn mark_failing(tx: &Db<'_>, folder: &str, error: &str) -> Result<()> {
    let v = serde_json::to_string(&Failing {
        since: crate::now_rfc3339(),
        error: error.chars().take(2000).collect(),
    })
    .unwrap_or_default();
    store::router_state::set(tx, &failing_key(folder), &v)?;
    Ok(())
}

/// The group answers again: its mark goes.
pub fn clear_failing(tx: &Db<'_>, folder: &str) -> Result<()> {
    store::router_state::delete(tx, &failing_key(folder))
}

/// The group's mark, if it has one.
pub fn failing(conn: &Db<'_>, folder: &str) -> Result<Option<Failing>> {
    let v = store::router_state::get(conn, &failing_key(folder))?;
    Ok(v.and_then(|v| serde_json::from_str(&v).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_read_back_until_cleared() {
        let d = tempfile::tempdir().unwrap();
        let store =
            store::Store::open(&d.path().join("g2.db"), std::time::Duration::from_secs(1)).unwrap();
        store
            .write_blocking(|tx| mark_failing(tx, "fam", "boom"))
            .unwrap();
        assert_eq!(
            store
                .read_blocking(|c| failing(c, "fam"))
                .unwrap()
                .unwrap()
                .error,
            "boom"
        );
        store.write_blocking(|tx| clear_failing(tx, "fam")).unwrap();
        assert_eq!(store.read_blocking(|c| failing(c, "fam")).unwrap(), None);
    }
}
