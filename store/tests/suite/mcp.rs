//! MCP tokens and their calls: the same rows back on both backends.

use g2_store::mcp::{self, Call, NewToken};

use super::each;

fn new<'a>(group: &'a str, name: &'a str, hash: &'a str) -> NewToken<'a> {
    NewToken {
        group,
        name,
        hash,
        prefix: "g2mcp_abc",
        scope: "read",
        expires_at: Some("2027-01-01T00:00:00.000Z"),
    }
}

#[test]
fn tokens_are_found_by_hash_listed_by_group_revoked_once_and_their_calls_counted() {
    each(|store| {
        let (a, b) = store
            .write_blocking(|tx| {
                Ok((
                    mcp::insert_token(tx, &new("family", "laptop", "h1"))?,
                    mcp::insert_token(tx, &new("work", "cursor", "h2"))?,
                ))
            })
            .unwrap();
        // A hash is one token's.
        let dup = store.write_blocking(|tx| mcp::insert_token(tx, &new("work", "again", "h1")));
        assert!(dup.is_err(), "{dup:?}");

        let found = store
            .read_blocking(|c| mcp::token_by_hash(c, "h1"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (found.id, found.group.as_str(), found.name.as_str()),
            (a, "family", "laptop")
        );
        assert_eq!(
            found.expires_at.as_deref(),
            Some("2027-01-01T00:00:00.000Z")
        );
        assert!(found.revoked_at.is_none() && found.last_used_at.is_none());
        assert!(
            store
                .read_blocking(|c| mcp::token_by_hash(c, "h3"))
                .unwrap()
                .is_none()
        );

        let all = store.read_blocking(|c| mcp::tokens(c, None)).unwrap();
        assert_eq!(all.iter().map(|t| t.id).collect::<Vec<_>>(), [a, b]);
        let work = store
            .read_blocking(|c| mcp::tokens(c, Some("work")))
            .unwrap();
        assert_eq!(work.iter().map(|t| t.id).collect::<Vec<_>>(), [b]);

        let first = store.write_blocking(|tx| mcp::revoke(tx, b)).unwrap();
        assert!(first.revoked_at.is_some());
        let again = store.write_blocking(|tx| mcp::revoke(tx, b));
        assert!(
            matches!(again, Err(g2_store::Error::Conflict(_))),
            "once: {again:?}"
        );
        let unknown = store.write_blocking(|tx| mcp::revoke(tx, 999));
        assert!(
            matches!(unknown, Err(g2_store::Error::NotFound(_))),
            "{unknown:?}"
        );
        let revoked = store
            .read_blocking(move |c| mcp::token(c, b))
            .unwrap()
            .unwrap();
        assert!(revoked.revoked_at.is_some());

        for outcome in ["ok", "ok", "refused"] {
            store
                .write_blocking(|tx| {
                    mcp::record_call(
                        tx,
                        &Call {
                            group: "family",
                            token_id: a,
                            token_name: "laptop",
                            tool: "memory_search",
                            outcome,
                            duration_ms: 7,
                        },
                    )
                })
                .unwrap();
        }
        let used = store
            .read_blocking(move |c| mcp::token(c, a))
            .unwrap()
            .unwrap();
        assert!(used.last_used_at.is_some());
        let lines = store
            .read_blocking(|c| mcp::report(c, Some("family"), None))
            .unwrap();
        assert_eq!(lines.len(), 1);
        let l = &lines[0];
        assert_eq!(
            (
                l.token.as_str(),
                l.tool.as_str(),
                l.calls,
                l.refused,
                l.failed,
                l.total_duration_ms
            ),
            ("laptop", "memory_search", 3, 1, 0, 21)
        );
        assert!(
            store
                .read_blocking(|c| mcp::report(c, Some("work"), None))
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .read_blocking(|c| mcp::report(c, None, Some("2999-01-01")))
                .unwrap()
                .is_empty()
        );
    });
}
