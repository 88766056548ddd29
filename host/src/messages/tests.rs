//! The log's unit tests against the real store: publication order under
//! concurrent writers, a listener that falls behind, an edit within the
//! router's bound. The channels' wiring of it is tested in
//! host/src/channels/tests.rs.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;

use super::*;
use crate::groups;

/// The hooks of a host whose one channel is HTTP: nothing is answered in
/// a chat, and the router has settled its groups' chats up to `settled`.
#[derive(Default)]
struct Http {
    settled: AtomicI64,
}

impl Hooks for Http {
    fn channel(&self, _chat_jid: &str) -> &'static str {
        "http"
    }
    fn answers_in_chat(&self, _chat_jid: &str) -> bool {
        false
    }
    fn refused(&self, _notice: &Message) {}
    fn settled(&self, _tx: &Db<'_>, _folder: &str) -> Result<i64> {
        Ok(self.settled.load(Ordering::SeqCst))
    }
}

/// A fresh store with one group registered (its jid, else the default);
/// the channels' tests start from it too.
pub(crate) async fn store_with_group(
    folder: &str,
    jid: Option<&str>,
) -> (tempfile::TempDir, Store) {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(&d.path().join("g2.db"), Duration::from_secs(5)).unwrap();
    let g = groups::NewGroup {
        folder: folder.into(),
        name: folder.to_uppercase(),
        jid: jid.map(str::to_string),
        ..Default::default()
    }
    .into_group("Andy")
    .unwrap();
    store
        .write(move |tx| store::groups::add(tx, &g))
        .await
        .unwrap();
    (d, store)
}

/// A fresh store with the group `fam` registered, its log and its chat's
/// jid.
async fn log_with_fam(hooks: Arc<Http>) -> (tempfile::TempDir, Store, Log, String) {
    let (d, store) = store_with_group("fam", None).await;
    let log = Log::new(store.clone(), hooks);
    (d, store, log, "local:fam".to_string())
}

/// What the channels do with an assistant's message in an HTTP chat:
/// stored as delivered, published, cleaned.
async fn say(log: &Log, store: &Store, jid: &str, text: &str) {
    let m = super::say(store, jid, "Andy", text, true)
        .await
        .unwrap()
        .unwrap();
    log.publish().await.unwrap();
    log.clean_delivered(m).await;
}

fn from(sender: String, text: String) -> Inbound {
    Inbound {
        sender,
        sender_name: None,
        text,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_posts_and_replies_are_published_in_seq_order() {
    let (_d, store, log, jid) = log_with_fam(Arc::default()).await;
    let mut live = log.subscribe();
    let follow = log.follow(jid.clone(), None);
    let mut tasks = Vec::new();
    for p in 0..8 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..100 {
                log.receive(
                    &GroupFolder::new("fam").unwrap(),
                    from(format!("u{p}"), format!("{i}")),
                )
                .await
                .unwrap();
            }
        }));
    }
    let (log2, store2, j2) = (log.clone(), store.clone(), jid.clone());
    tasks.push(tokio::spawn(async move {
        for i in 0..50 {
            say(&log2, &store2, &j2, &format!("reply {i}")).await;
        }
    }));
    for t in tasks {
        t.await.unwrap();
    }
    let mut seqs = Vec::new();
    while seqs.len() < 850 {
        seqs.push(live.recv().await.unwrap().message.seq);
    }
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "published out of order"
    );
    let followed: Vec<i64> = follow.take(850).map(|l| l.message.seq).collect().await;
    assert_eq!(followed, seqs);
    let stored = store
        .read(move |c| store::messages::after(c, &jid, 0, 1000))
        .await
        .unwrap();
    assert_eq!(stored.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
    // An unknown group is refused; nothing is stored for it.
    let none = log
        .receive(
            &GroupFolder::new("nobody").unwrap(),
            from("u".into(), "x".into()),
        )
        .await;
    assert!(matches!(none, Err(Error::NotFound(_))), "{none:?}");
    assert_eq!(
        store.read(store::messages::last_seq).await.unwrap(),
        *seqs.last().unwrap()
    );
}

#[tokio::test]
async fn a_listener_that_falls_behind_is_closed_and_resumes_from_the_store() {
    let (_d, store, log, jid) = log_with_fam(Arc::default()).await;
    let mut slow = std::pin::pin!(log.follow(jid.clone(), None));
    let n = LISTENER_BUFFER + 10;
    for i in 0..n {
        say(&log, &store, &jid, &format!("m{i}")).await;
    }
    // Let the sequencer publish everything (the last `say` is stored).
    let mut probe = log.subscribe();
    say(&log, &store, &jid, "last").await;
    while probe.recv().await.unwrap().message.text != "last" {}
    // Nothing skipped silently: the stream ends instead.
    assert!(slow.next().await.is_none());
    let resumed: Vec<String> = log
        .follow(jid.clone(), Some(0))
        .take(n + 1)
        .map(|l| l.message.text.clone())
        .collect()
        .await;
    assert_eq!(resumed.len(), n + 1);
    assert_eq!(resumed[0], "m0");
    assert_eq!(resumed[n], "last");
}

#[tokio::test]
async fn an_edit_changes_only_what_the_router_has_not_settled() {
    let hooks = Arc::new(Http::default());
    let (_d, store, log, jid) = log_with_fam(hooks.clone()).await;
    let fam = GroupFolder::new("fam").unwrap();
    let new = |id: &str, text: &str| {
        let mut m = from("42".into(), text.into());
        m.external_id = Some(id.into());
        Intake::New {
            folder: fam.clone(),
            m,
        }
    };
    let taken = log
        .take_in(vec![new("1", "one"), new("2", "two")], None)
        .await
        .unwrap();
    let seq1 = match &taken[0] {
        Ok(Taken::Stored(m)) => m.seq,
        other => panic!("{other:?}"),
    };
    let edit = |id: &str, text: &str| Intake::Edit {
        folder: fam.clone(),
        external_id: id.into(),
        text: text.into(),
        addressed: false,
    };
    // The router has settled the first: only the second may change; an
    // empty text changes nothing.
    hooks.settled.store(seq1, Ordering::SeqCst);
    let e = log
        .take_in(
            vec![
                edit("1", "one, fixed"),
                edit("2", " "),
                edit("2", "two, fixed"),
            ],
            None,
        )
        .await
        .unwrap();
    assert!(matches!(e[0], Ok(Taken::Unchanged)), "{e:?}");
    assert!(matches!(e[1], Ok(Taken::Unchanged)), "{e:?}");
    assert!(matches!(e[2], Ok(Taken::Edited)), "{e:?}");
    let texts: Vec<String> = after(&store, &jid, 0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["one", "two, fixed"]);
}
