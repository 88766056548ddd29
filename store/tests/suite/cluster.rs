//! Hosts and leases: one holder at a time by the database's clock, a new
//! generation for every new holder, fencing inside the write it guards.

use std::time::Duration;

use g2_store::{Error, leases, router_state};

use super::each;

#[test]
fn a_lease_is_one_hosts_until_it_expires_and_fences_the_old_holder() {
    each(|store| {
        let a = store
            .write_blocking(|tx| leases::acquire(tx, "fam", "a", 400))
            .unwrap()
            .expect("a free lease is taken");
        assert_eq!((a.host_id.as_str(), a.generation), ("a", 1));
        assert!(a.expires_ms - a.acquired_ms == 400, "{a:?}");
        // Another host cannot take it; its holder renews it, same generation.
        assert_eq!(
            store
                .write_blocking(|tx| leases::acquire(tx, "fam", "b", 400))
                .unwrap(),
            None
        );
        let again = store
            .write_blocking(|tx| leases::acquire(tx, "fam", "a", 400))
            .unwrap()
            .unwrap();
        assert_eq!(again.generation, 1);
        assert!(again.expires_ms >= a.expires_ms);
        store
            .write_blocking(|tx| leases::fence(tx, "fam", "a", 1))
            .unwrap();

        // Expired: the next host takes it with the next generation; the old
        // holder is fenced and its renewal holds nothing.
        std::thread::sleep(Duration::from_millis(450));
        let b = store
            .write_blocking(|tx| leases::acquire(tx, "fam", "b", 10_000))
            .unwrap()
            .expect("an expired lease is taken");
        assert_eq!((b.host_id.as_str(), b.generation), ("b", 2));
        let err = store
            .write_blocking(|tx| leases::fence(tx, "fam", "a", 1))
            .unwrap_err();
        assert!(matches!(err, Error::Fenced { generation: 1, .. }), "{err}");
        assert!(
            store
                .write_blocking(|tx| leases::renew(tx, "a", 10_000))
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .write_blocking(|tx| leases::renew(tx, "b", 10_000))
                .unwrap(),
            [leases::Lease {
                expires_ms: store
                    .read_blocking(|c| leases::get(c, "fam"))
                    .unwrap()
                    .unwrap()
                    .expires_ms,
                ..b.clone()
            }]
        );

        // Released: it expires now and keeps its generation; a stale
        // release changes nothing.
        assert!(
            !store
                .write_blocking(|tx| leases::release(tx, "fam", "a", 1))
                .unwrap()
        );
        assert!(
            store
                .write_blocking(|tx| leases::release(tx, "fam", "b", 2))
                .unwrap()
        );
        let err = store
            .write_blocking(|tx| leases::fence(tx, "fam", "b", 2))
            .unwrap_err();
        assert!(matches!(err, Error::Fenced { .. }), "{err}");
        let a3 = store
            .write_blocking(|tx| leases::acquire(tx, "fam", "a", 10_000))
            .unwrap()
            .unwrap();
        assert_eq!(a3.generation, 3);
    });
}

#[test]
fn an_expired_lease_nobody_took_is_still_its_holders() {
    each(|store| {
        let a = store
            .write_blocking(|tx| leases::acquire(tx, "fam", "a", 200))
            .unwrap()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // Its writes pass (nobody else acted on the group) and its renewal
        // keeps the generation.
        store
            .write_blocking(|tx| leases::fence(tx, "fam", "a", a.generation))
            .unwrap();
        let renewed = store
            .write_blocking(|tx| leases::renew(tx, "a", 10_000))
            .unwrap();
        assert_eq!(renewed.len(), 1);
        assert_eq!(renewed[0].generation, a.generation);
        assert!(
            store
                .write_blocking(|tx| leases::acquire(tx, "fam", "b", 10_000))
                .unwrap()
                .is_none(),
            "renewed, it is not free"
        );
    });
}

#[test]
fn a_fenced_write_keeps_nothing() {
    each(|store| {
        store
            .write_blocking(|tx| leases::acquire(tx, "fam", "a", 10_000))
            .unwrap()
            .unwrap();
        let err = store
            .write_blocking(|tx| {
                router_state::set(tx, "cursor:fam", "7")?;
                leases::fence(tx, "fam", "b", 1)
            })
            .unwrap_err();
        assert!(matches!(err, Error::Fenced { .. }), "{err}");
        assert_eq!(
            store
                .read_blocking(|c| router_state::get(c, "cursor:fam"))
                .unwrap(),
            None
        );
        store
            .write_blocking(|tx| {
                router_state::set(tx, "cursor:fam", "7")?;
                leases::fence(tx, "fam", "a", 1)
            })
            .unwrap();
        assert_eq!(
            store
                .read_blocking(|c| router_state::get(c, "cursor:fam"))
                .unwrap()
                .as_deref(),
            Some("7")
        );
    });
}

#[test]
fn of_many_hosts_asking_at_once_exactly_one_gets_each_lease() {
    each(|store| {
        let won: Vec<Vec<String>> = std::thread::scope(|s| {
            let hands: Vec<_> = (0..6)
                .map(|h| {
                    s.spawn(move || {
                        let host = format!("h{h}");
                        (0..5)
                            .filter_map(|g| {
                                let name = format!("g{g}");
                                store
                                    .write_blocking(|tx| leases::acquire(tx, &name, &host, 10_000))
                                    .unwrap()
                                    .map(|_| name)
                            })
                            .collect()
                    })
                })
                .collect();
            hands.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<String> = won.concat();
        all.sort();
        assert_eq!(all, ["g0", "g1", "g2", "g3", "g4"], "{won:?}");
        let rows = store.read_blocking(leases::list).unwrap();
        assert!(rows.iter().all(|l| l.generation == 1), "{rows:?}");
    });
}

#[test]
fn hosts_join_beat_and_leave_and_a_leaving_hosts_leases_expire_at_once() {
    each(|store| {
        let t0 = store
            .write_blocking(|tx| leases::join(tx, "a", "http://127.0.0.1:1"))
            .unwrap();
        store
            .write_blocking(|tx| leases::join(tx, "b", "http://127.0.0.1:2"))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let t1 = store
            .write_blocking(|tx| leases::beat(tx, "a", true))
            .unwrap();
        assert!(t1 > t0, "the database's clock moves: {t0} {t1}");
        let hosts = store.read_blocking(leases::hosts).unwrap();
        assert_eq!(
            hosts
                .iter()
                .map(|h| (
                    h.host_id.as_str(),
                    h.api.as_str(),
                    h.stopping,
                    h.seen_ms == t1
                ))
                .collect::<Vec<_>>(),
            [
                ("a", "http://127.0.0.1:1", true, true),
                ("b", "http://127.0.0.1:2", false, false)
            ]
        );
        store
            .write_blocking(|tx| leases::acquire(tx, "fam", "a", 60_000))
            .unwrap()
            .unwrap();
        // Rejoining under its name: the lease stays, at a new generation.
        store
            .write_blocking(|tx| leases::join(tx, "a", "http://127.0.0.1:3"))
            .unwrap();
        let err = store
            .write_blocking(|tx| leases::fence(tx, "fam", "a", 1))
            .unwrap_err();
        assert!(matches!(err, Error::Fenced { .. }), "{err}");
        store
            .write_blocking(|tx| leases::fence(tx, "fam", "a", 2))
            .unwrap();
        store.write_blocking(|tx| leases::leave(tx, "a")).unwrap();
        assert_eq!(
            store
                .read_blocking(leases::hosts)
                .unwrap()
                .iter()
                .map(|h| h.host_id.as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
        let b = store
            .write_blocking(|tx| leases::acquire(tx, "fam", "b", 60_000))
            .unwrap()
            .expect("a left host's lease is free at once");
        assert_eq!(b.generation, 3);
    });
}

#[test]
fn stored_messages_are_announced_to_other_stores_once_committed() {
    use g2_store::messages::{self, Inbound};
    use g2_store::notify::{self, Notice};
    let sqlite = &super::backends()[0];
    assert!(
        sqlite.store.listen(notify::MESSAGES).is_none(),
        "SQLite: one host"
    );
    let Some(cluster) = crate::pg_cluster::Cluster::shared() else {
        assert!(!super::in_ci(), "PostgreSQL is required in CI");
        return;
    };
    // Two hosts' stores on one database: each hears the other's.
    let url = cluster.database();
    let open = || g2_store::Store::open_postgres(&url, Duration::from_secs(5)).unwrap();
    let (here, there) = (open(), open());
    let mut rx = here.listen(notify::MESSAGES).unwrap();
    let next = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<Notice>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(n) = rx.try_recv() {
                return Some(n);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    assert_eq!(next(&mut rx), Some(Notice::Missed), "listening");
    let m = Inbound {
        sender: "alice".into(),
        sender_name: None,
        text: "hi".into(),
        external_id: None,
        thread: None,
        addressed: true,
        attachments: Vec::new(),
    };
    // Rolled back: nobody hears of it. Its own: not told back.
    let failed = there.write_blocking(|tx| {
        messages::insert_inbound(tx, "http:fam", "http", &m)?;
        Err::<(), _>(Error::Invalid("rolled back".into()))
    });
    assert!(failed.is_err());
    here.write_blocking(|tx| messages::insert_inbound(tx, "http:own", "http", &m))
        .unwrap();
    // Two in one transaction, and a reply: each payload once.
    there
        .write_blocking(|tx| {
            messages::insert_inbound(tx, "http:fam", "http", &m)?;
            messages::insert_inbound(tx, "http:fam", "http", &m)?;
            messages::insert_outbound(tx, "http:fam", "Andy", "hello", None, true)?;
            Ok(())
        })
        .unwrap();
    assert_eq!(next(&mut rx), Some(Notice::Payload("in http:fam".into())));
    assert_eq!(next(&mut rx), Some(Notice::Payload("out http:fam".into())));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(rx.try_recv().ok(), None, "nothing else");
}

#[test]
fn a_host_whose_presence_ended_has_its_leases_ended_by_the_others() {
    let sqlite = &super::backends()[0];
    assert!(sqlite.store.presence("a").is_none(), "SQLite: one host");
    sqlite
        .store
        .write_blocking(|tx| leases::join(tx, "a", ""))
        .unwrap();
    assert!(sqlite.store.read_blocking(leases::hosts).unwrap()[0].present);
    let Some(cluster) = crate::pg_cluster::Cluster::shared() else {
        assert!(!super::in_ci(), "PostgreSQL is required in CI");
        return;
    };
    // Host a's and host b's stores on one database.
    let url = cluster.database();
    let open = || g2_store::Store::open_postgres(&url, Duration::from_secs(5)).unwrap();
    let (a, b) = (open(), open());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut present = a.presence("a").unwrap();
    assert!(rt.block_on(present.held_within(Duration::from_secs(5))));
    // A second process under the same host id waits for the first.
    let mut twin = b.presence("a").unwrap();
    assert!(!rt.block_on(twin.held_within(Duration::from_millis(1500))));
    drop(twin);
    let _b_present = b.presence("b").unwrap();
    a.write_blocking(|tx| leases::join(tx, "a", "")).unwrap();
    b.write_blocking(|tx| leases::join(tx, "b", "")).unwrap();
    a.write_blocking(|tx| leases::acquire(tx, "fam", "a", 60_000))
        .unwrap()
        .unwrap();
    let presence_of = |host: &str| {
        b.read_blocking(leases::hosts)
            .unwrap()
            .into_iter()
            .find(|h| h.host_id == host)
            .unwrap()
            .present
    };
    assert!(presence_of("a"));
    // What b's heartbeat does: end the leases of the other hosts gone.
    let expire_absent = || {
        b.write_blocking(|tx| {
            let hosts = leases::hosts(tx)?;
            let others: Vec<&str> = leases::absent(&hosts)
                .into_iter()
                .filter(|h| *h != "b")
                .collect();
            Ok(leases::expire_hosts(tx, &others)?
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<String>>())
        })
    };
    assert_eq!(
        expire_absent().unwrap(),
        Vec::<String>::new(),
        "a is present: its lease stands"
    );
    // a's process ends: its lock goes with its connection.
    drop(present);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while presence_of("a") {
        assert!(std::time::Instant::now() < deadline, "a still present");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(expire_absent().unwrap(), ["a"]);
    let taken = b
        .write_blocking(|tx| leases::acquire(tx, "fam", "b", 60_000))
        .unwrap()
        .expect("a gone host's lease is free before it runs out");
    assert_eq!(taken.generation, 2);
    let err = a
        .write_blocking(|tx| leases::fence(tx, "fam", "a", 1))
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
}

#[test]
fn a_transaction_left_open_by_a_stopped_host_is_ended_and_holds_no_one() {
    // PostgreSQL only: SQLite has one writer per file, and no host of
    // another process shares it.
    let Some(cluster) = super::pg_cluster::Cluster::shared() else {
        assert!(!super::in_ci(), "PostgreSQL is required in CI");
        return;
    };
    let url = cluster.database();
    let busy = Duration::from_millis(300);
    let a = g2_store::Store::open_postgres(&url, busy).unwrap();
    let b = g2_store::Store::open_postgres(&url, busy).unwrap();
    // Host a takes the lease row, then stops inside its transaction (as a
    // paused process would) far longer than the server lets it idle.
    let stopped = std::thread::spawn(move || {
        a.write_blocking(|tx| {
            leases::acquire(tx, "fam", "a", 100)?;
            std::thread::sleep(Duration::from_secs(3));
            leases::acquire(tx, "other", "a", 100)
        })
    });
    std::thread::sleep(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let mut refused = Vec::new();
    let got = loop {
        match b.write_blocking(|tx| leases::acquire(tx, "fam", "b", 10_000)) {
            Ok(l) => break l,
            Err(e) => refused.push(e.to_string()),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still held: {refused:?}"
        );
    };
    // The row lock was waited for (at most the lock timeout each time, with
    // the server's own words), then released when the server ended a's
    // transaction: a's lease was never committed, so b takes the first.
    assert!(
        refused.iter().all(|e| e.contains("lock timeout")),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        got.map(|l| (l.host_id, l.generation)),
        Some(("b".into(), 1))
    );
    assert!(
        stopped.join().unwrap().is_err(),
        "a's transaction was ended"
    );
}
