//! The connection type itself: transactions, values, missing rows.

use g2_store::{Error, Optional, Result, params};

use super::each;

#[test]
fn a_failed_write_leaves_nothing() {
    each(|store| {
        let r: Result<()> = store.write_blocking(|tx| {
            tx.execute(
                "INSERT INTO router_state (key, value) VALUES ('k', 'v')",
                (),
            )?;
            Err(Error::Invalid("boom".into()))
        });
        assert!(r.is_err());
        let n: i64 = store
            .read_blocking(|c| c.query_row("SELECT count(*) FROM router_state", (), |r| r.get(0)))
            .unwrap();
        assert_eq!(n, 0);
    });
}

#[test]
fn concurrent_writers_all_commit() {
    each(|store| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..24 {
                let s = store.clone();
                tasks.push(tokio::spawn(async move {
                    s.write(move |tx| {
                        // Read, then write what was read: serialised writers
                        // never lose an increment.
                        let n: i64 = tx
                            .query_row("SELECT value FROM router_state WHERE key = 'n'", (), |r| {
                                r.get::<String>(0)
                            })
                            .optional()?
                            .map_or(0, |v| v.parse().unwrap());
                        tx.execute(
                            "INSERT INTO router_state (key, value) VALUES ('n', ?1)
                             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            [(n + 1).to_string()],
                        )?;
                        tx.execute(
                            "INSERT INTO router_state (key, value) VALUES (?1, 'v')",
                            [format!("k{i}")],
                        )?;
                        Ok(())
                    })
                    .await
                }));
            }
            for t in tasks {
                t.await.unwrap().unwrap();
            }
        });
        let (n, keys): (String, i64) = store
            .read_blocking(|c| {
                Ok((
                    c.query_row("SELECT value FROM router_state WHERE key = 'n'", (), |r| {
                        r.get(0)
                    })?,
                    c.query_row(
                        "SELECT count(*) FROM router_state WHERE key <> 'n'",
                        (),
                        |r| r.get(0),
                    )?,
                ))
            })
            .unwrap();
        assert_eq!((n.as_str(), keys), ("24", 24));
    });
}

#[test]
fn values_convert_the_same_on_both() {
    each(|store| {
        let got = store
            .write_blocking(|tx| {
                for row in [
                    params!["a", 5_000_000_000i64, 7u64, 200u16, true],
                    params!["a", 1i64, 1u64, 500u16, false],
                ] {
                    tx.execute(
                        "INSERT INTO model_usage (caller, provider, model, input_tokens,
                           duration_ms, status, outcome, streamed, started_at, day)
                         VALUES (?1, 'p', 'm', ?2, ?3, ?4, 'ok', ?5, 't', 'd')",
                        row,
                    )?;
                }
                // sum() of a bigint is numeric on PostgreSQL: read as i64.
                let sum: i64 = tx.query_row(
                    "SELECT coalesce(sum(input_tokens), 0) FROM model_usage WHERE caller = ?1",
                    ["a"],
                    |r| r.get(0),
                )?;
                let flags: Vec<bool> =
                    tx.query_all("SELECT streamed FROM model_usage ORDER BY id", (), |r| {
                        r.get(0)
                    })?;
                let none: Option<String> = tx
                    .query_row(
                        "SELECT caller FROM model_usage WHERE caller = 'nobody'",
                        (),
                        |r| r.get(0),
                    )
                    .optional()?;
                let null: Option<i64> = tx.query_row(
                    "SELECT max(id) FROM model_usage WHERE caller = 'nobody'",
                    (),
                    |r| r.get(0),
                )?;
                Ok((sum, flags, none, null))
            })
            .unwrap();
        assert_eq!(got, (5_000_000_001, vec![true, false], None, None));
    });
}

#[test]
fn a_missing_row_is_an_error_unless_optional() {
    each(|store| {
        let r: Result<i64> = store.read_blocking(|c| {
            c.query_row("SELECT 1 FROM router_state WHERE key = 'x'", (), |r| {
                r.get(0)
            })
        });
        assert!(matches!(r, Err(Error::NoRow)), "{r:?}");
    });
}

#[test]
fn a_column_of_the_wrong_kind_names_itself() {
    each(|store| {
        let r: Result<i64> =
            store.read_blocking(|c| c.query_row("SELECT 'text'", (), |r| r.get(0)));
        match r {
            Err(Error::Column { index: 0, why }) => assert!(why.contains("text"), "{why}"),
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn the_schema_version_is_reported() {
    each(|store| {
        let (ok, version) = store.read_blocking(g2_store::quick_check).unwrap();
        assert_eq!(ok, "ok");
        assert!(version >= 1, "{version}");
    });
}

#[test]
fn a_guarded_store_refuses_every_write_its_guard_refuses() {
    each(|store| {
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let o = open.clone();
        // The guard reads in the write's own transaction, as a lease check does.
        let guarded = store.guarded(std::sync::Arc::new(move |tx| {
            let _: i64 = tx.query_row("SELECT count(*) FROM router_state", (), |r| r.get(0))?;
            if o.load(std::sync::atomic::Ordering::SeqCst) {
                Ok(())
            } else {
                Err(Error::Fenced {
                    name: "fam".into(),
                    generation: 1,
                })
            }
        }));
        let put = |s: &g2_store::Store, k: &str| {
            let k = k.to_string();
            s.write_blocking(move |tx| {
                tx.execute(
                    "INSERT INTO router_state (key, value) VALUES (?1, 'v')",
                    params![k],
                )
            })
        };
        put(&guarded, "a").unwrap();
        open.store(false, std::sync::atomic::Ordering::SeqCst);
        let err = put(&guarded, "b").unwrap_err();
        assert!(matches!(err, Error::Fenced { .. }), "{err}");
        // The unguarded store and reads through the guarded one go on.
        put(store, "c").unwrap();
        let keys: Vec<String> = guarded
            .read_blocking(|c| {
                g2_store::query_all(c, "SELECT key FROM router_state ORDER BY key", (), |r| {
                    r.get(0)
                })
            })
            .unwrap();
        assert_eq!(keys, ["a", "c"]);
    });
}
