//! The channels' unit tests: plugging in a channel, a platform's batch
//! and its edits (the router's rule wired into the log), a text over the
//! limit on a platform and over HTTP. The log's own (publication order, a
//! listener that falls behind) are in host/src/messages/tests.rs.

use super::*;
use crate::Error;
use std::collections::VecDeque;
use std::sync::Mutex;

pub(super) use crate::messages::tests::store_with_group;

/// A channel of the chats `s:…` that splits on `|` and answers each send
/// from a script (then `Ok`), recording what it sent.
pub(super) struct Scripted {
    pub(super) script: Mutex<VecDeque<SendError>>,
    pub(super) sent: Mutex<Vec<String>>,
}

impl Scripted {
    pub(super) fn new(script: Vec<SendError>) -> Arc<Scripted> {
        Arc::new(Scripted {
            script: Mutex::new(script.into()),
            sent: Mutex::default(),
        })
    }
}

impl Channel for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn owns(&self, jid: &str) -> bool {
        jid.starts_with("s:")
    }
    fn parts(&self, m: &Message) -> Vec<String> {
        m.text.split('|').map(str::to_string).collect()
    }
    fn send<'a>(
        &'a self,
        _m: &'a Message,
        _part: usize,
        text: &'a str,
    ) -> BoxFuture<'a, std::result::Result<String, SendError>> {
        let next = self.script.lock().unwrap().pop_front();
        Box::pin(async move {
            match next {
                Some(e) => Err(e),
                None => {
                    let mut sent = self.sent.lock().unwrap();
                    sent.push(text.to_string());
                    Ok(sent.len().to_string())
                }
            }
        })
    }
}

#[tokio::test]
async fn a_new_channel_plugs_in_without_the_router() {
    let (_d, store) = store_with_group("tg", Some("s:42")).await;
    let rec = Scripted::new(Vec::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ch = Channels::new(store.clone())
        .with(rec.clone())
        .with_router(tx);
    let mut live = ch.log().subscribe();
    let m = ch
        .receive(
            &GroupFolder::new("tg").unwrap(),
            Inbound {
                sender: "u".into(),
                sender_name: None,
                text: "hi".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(rx.recv().await.unwrap(), "tg");
    assert_eq!(live.recv().await.unwrap().message.id, m.id);
    let chan: String = store
        .read(|c| {
            c.query_row("SELECT channel FROM chats WHERE jid = 's:42'", (), |r| {
                r.get(0)
            })
        })
        .await
        .unwrap();
    assert_eq!(chan, "scripted");
    let out = ch
        .say("s:42", "Andy", "hello <internal>x</internal>")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.recv().await.unwrap().message.id, out.id);
    // Sent in the background, then marked delivered.
    for _ in 0..100 {
        if store
            .read(|c| store::messages::undelivered(c, 0, 10))
            .await
            .unwrap()
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(rec.sent.lock().unwrap().as_slice(), ["hello"]);
    assert!(
        store
            .read(|c| store::messages::undelivered(c, 0, 10))
            .await
            .unwrap()
            .is_empty(),
        "marked delivered"
    );
    assert!(
        ch.say("s:42", "Andy", "<internal>only</internal>")
            .await
            .unwrap()
            .is_none()
    );
}

/// A store with the group `fam` registered; its chat's jid.
async fn store_with_fam() -> (tempfile::TempDir, Store, String) {
    let (d, store) = store_with_group("fam", None).await;
    (d, store, "local:fam".to_string())
}

#[tokio::test]
async fn a_platform_batch_commits_with_its_mark_once_and_edits_only_what_is_pending() {
    let (_d, store, jid) = store_with_fam().await;
    let ch = Channels::new(store.clone());
    let fam = GroupFolder::new("fam").unwrap();
    let new = |id: &str, text: &str| Intake::New {
        folder: fam.clone(),
        m: Inbound {
            sender: "42".into(),
            sender_name: None,
            text: text.into(),
            external_id: Some(id.into()),
            ..Default::default()
        },
    };
    let mark = |v: &str| {
        Some(Mark {
            key: "test:offset".into(),
            value: v.into(),
        })
    };
    let taken = ch
        .take_in(vec![new("1", "one"), new("2", "two")], mark("3"))
        .await
        .unwrap();
    assert!(matches!(&taken[0], Ok(Taken::Stored(m)) if m.text == "one"));
    let offset = store
        .read(|c| store::router_state::get(c, "test:offset"))
        .await
        .unwrap();
    assert_eq!(offset.as_deref(), Some("3"));
    // Handed in again (a host killed before its mark): stored once.
    let again = ch.take_in(vec![new("2", "two")], mark("3")).await.unwrap();
    assert!(matches!(again[0], Ok(Taken::Duplicate)), "{again:?}");
    // An edit of a pending message replaces its text ...
    let edit = |id: &str, text: &str| Intake::Edit {
        folder: fam.clone(),
        external_id: id.into(),
        text: text.into(),
        addressed: true,
    };
    let e = ch
        .take_in(vec![edit("1", "one, fixed")], None)
        .await
        .unwrap();
    assert!(matches!(e[0], Ok(Taken::Edited)), "{e:?}");
    // ... not one that was answered.
    let seq2 = match &taken[1] {
        Ok(Taken::Stored(m)) => m.seq,
        other => panic!("{other:?}"),
    };
    store
        .write(move |tx| crate::routing::rules::advance(tx, "fam", seq2))
        .await
        .unwrap();
    let e = ch
        .take_in(vec![edit("2", "rewritten")], None)
        .await
        .unwrap();
    assert!(matches!(e[0], Ok(Taken::Unchanged)), "{e:?}");
    let texts: Vec<String> = store
        .read(move |c| store::messages::after(c, &jid, 0, 10))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["one, fixed", "two"]);
    let addressed = store
        .read(|c| store::messages::latest(c, "local:fam", 10))
        .await
        .unwrap()
        .iter()
        .map(|m| m.addressed)
        .collect::<Vec<_>>();
    assert_eq!(addressed, [true, false], "the edit called the assistant");
}

#[tokio::test]
async fn a_text_over_the_limit_is_refused_whole_and_its_platform_chat_told() {
    let (_d, store) = store_with_group("tg", Some("s:42")).await;
    let rec = Scripted::new(Vec::new());
    let ch = Channels::new(store.clone())
        .with(rec.clone())
        .with_text_limit(1024, "Andy");
    let mut live = ch.log().subscribe();
    let tg = GroupFolder::new("tg").unwrap();
    let new = |id: &str, text: String| Intake::New {
        folder: tg.clone(),
        m: Inbound {
            sender: "42".into(),
            sender_name: Some("Ann".into()),
            text,
            external_id: Some(id.into()),
            ..Default::default()
        },
    };
    let edit = |id: &str, text: String| Intake::Edit {
        folder: tg.clone(),
        external_id: id.into(),
        text,
        addressed: false,
    };
    let long = format!("secret-words {}", "x".repeat(1100));
    let taken = ch
        .take_in(
            vec![
                new("1", "short".into()),
                new("2", long.clone()),
                new("3", "x".repeat(1024)),
            ],
            None,
        )
        .await
        .unwrap();
    assert!(matches!(&taken[0], Ok(Taken::Stored(_))), "{taken:?}");
    let notice = match &taken[1] {
        Ok(Taken::Refused(n)) => n.clone(),
        other => panic!("{other:?}"),
    };
    assert!(matches!(&taken[2], Ok(Taken::Stored(_))), "at the limit");
    assert_eq!(
        notice.text,
        messages::too_long(Some("Ann"), messages::Refused::Message, long.len(), 1024)
    );
    assert!(notice.from_bot && notice.sender == "Andy");
    // Published in its place, between the two stored messages.
    let order: Vec<String> = (0..3)
        .map(|_| live.try_recv().map(|l| l.message.text.clone()))
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    assert_eq!(order[1], notice.text, "{order:?}");
    // An edit over the limit of a stored message: unchanged, answered; of
    // one that was refused (not in the log): unchanged, not answered.
    let e = ch
        .take_in(vec![edit("1", long.clone()), edit("2", long.clone())], None)
        .await
        .unwrap();
    let edit_notice = match &e[0] {
        Ok(Taken::Refused(n)) => n.text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        edit_notice.starts_with("An edit from Ann was not passed on"),
        "{edit_notice}"
    );
    assert!(matches!(e[1], Ok(Taken::Unchanged)), "{e:?}");
    // Reported again (Slack sends a mention twice, a webhook is redelivered):
    // answered once.
    let again = ch
        .take_in(vec![new("2", long.clone()), edit("1", long.clone())], None)
        .await
        .unwrap();
    assert!(matches!(again[0], Ok(Taken::Duplicate)), "{again:?}");
    assert!(matches!(again[1], Ok(Taken::Unchanged)), "{again:?}");
    // The outbox sends both notices; nothing of the long text is kept.
    for _ in 0..200 {
        if rec.sent.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        rec.sent.lock().unwrap().as_slice(),
        [notice.text.as_str(), edit_notice.as_str()]
    );
    let all = store
        .read(|c| store::messages::after(c, "s:42", 0, 10))
        .await
        .unwrap();
    assert_eq!(all.len(), 4, "two messages, two notices: {all:?}");
    assert!(all.iter().all(|m| !m.text.contains("secret-words")));
    assert_eq!(all[0].text, "short", "the edit changed nothing");
}

#[tokio::test]
async fn over_http_a_text_over_the_limit_is_an_error_naming_it_and_nothing_is_said() {
    let (_d, store, jid) = store_with_fam().await;
    let ch = Channels::new(store.clone()).with_text_limit(1024, "Andy");
    let fam = GroupFolder::new("fam").unwrap();
    let m = |text: String| Inbound {
        sender: "u".into(),
        sender_name: None,
        text,
        ..Default::default()
    };
    let e = ch.receive(&fam, m("x".repeat(1025))).await.unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("1025 bytes, over the limit of 1024 bytes (channels.max_text_bytes)"),
        "{e}"
    );
    // The same through a batch: refused, no notice in the HTTP log.
    let taken = ch
        .take_in(
            vec![Intake::New {
                folder: fam.clone(),
                m: m("x".repeat(1025)),
            }],
            None,
        )
        .await
        .unwrap();
    assert!(matches!(&taken[0], Err(Error::Invalid(_))), "{taken:?}");
    ch.receive(&fam, m("x".repeat(1024))).await.unwrap();
    let all = store
        .read(move |c| store::messages::after(c, &jid, 0, 10))
        .await
        .unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(ch.max_text(), 1024);
}
