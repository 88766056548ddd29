//! Groups, messages, session pointers, router state, tasks, usage,
//! deliveries and the request log: the same rows back on both backends.

use g2_core::validate::GroupFolder;
use g2_settings::GroupContainerConfig;
use g2_store::groups::Group;
use g2_store::messages::Inbound;
use g2_store::{
    Error, deliveries, groups, messages, requests, router_state, sessions, tasks, usage,
};

use super::each;

pub fn group(folder: &str, jid: &str, main: bool) -> Group {
    Group {
        folder: GroupFolder::new(folder.to_string()).unwrap(),
        name: format!("The {folder}"),
        jid: jid.into(),
        trigger_pattern: Some("^@Andy".into()),
        requires_trigger: !main,
        is_main: main,
        container_config: GroupContainerConfig::default(),
        added_at: "2026-01-01T00:00:00.000Z".into(),
    }
}

fn inbound(text: &str, external: Option<&str>) -> Inbound {
    Inbound {
        sender: " alice ".into(),
        sender_name: Some("Alice".into()),
        text: text.into(),
        external_id: external.map(str::to_string),
        thread: None,
        addressed: true,
        attachments: Vec::new(),
    }
}

#[test]
fn groups_are_unique_by_folder_jid_and_main() {
    each(|store| {
        store
            .write_blocking(|tx| {
                groups::add(tx, &group("main", "web:main", true))?;
                groups::add(tx, &group("family", "tg:-100", false))
            })
            .unwrap();
        for (g, why) in [
            (group("main", "web:x", false), "registered already"),
            (group("other", "tg:-100", false), "belongs to group"),
            (group("second", "web:y", true), "main group already"),
        ] {
            let e = store
                .write_blocking(move |tx| groups::add(tx, &g))
                .unwrap_err();
            assert!(matches!(&e, Error::Conflict(m) if m.contains(why)), "{e}");
        }
        let (list, by_jid, main) = store
            .read_blocking(|c| {
                Ok((
                    groups::list(c)?,
                    groups::by_jid(c, "tg:-100")?,
                    groups::main_group(c)?,
                ))
            })
            .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(by_jid, Some(group("family", "tg:-100", false)));
        assert_eq!(
            main.map(|g| g.folder.as_str().to_string()),
            Some("main".into())
        );
        let removed = store
            .write_blocking(|tx| groups::remove(tx, &GroupFolder::new("family")?))
            .unwrap();
        assert_eq!(removed.jid, "tg:-100");
        assert_eq!(
            store.read_blocking(|c| groups::get(c, "family")).unwrap(),
            None
        );
    });
}

#[test]
fn messages_keep_order_duplicates_and_delivery() {
    each(|store| {
        let (a, dup, b, out) = store
            .write_blocking(|tx| {
                let a =
                    messages::insert_inbound(tx, "tg:1", "telegram", &inbound("hi", Some("7")))?;
                let dup =
                    messages::insert_inbound(tx, "tg:1", "telegram", &inbound("hi", Some("7")))?;
                let b = messages::insert_inbound(tx, "tg:1", "telegram", &inbound("there", None))?;
                let a_seq = a.as_ref().unwrap().seq;
                let out =
                    messages::insert_outbound(tx, "tg:1", "Andy", "hello", Some(a_seq), false)?;
                Ok((a.unwrap(), dup, b.unwrap(), out))
            })
            .unwrap();
        assert!(dup.is_none(), "the same platform id is stored once");
        assert!(a.seq < b.seq && b.seq < out.seq);
        assert_eq!(a.sender, "alice");
        assert!(out.from_bot && out.reply_to == Some(a.seq));
        let edited = store
            .write_blocking(move |tx| messages::edit_pending(tx, "tg:1", "7", "hi!", true, 0))
            .unwrap();
        assert!(edited);
        let (undelivered, latest, last, reference) = store
            .read_blocking(move |c| {
                Ok((
                    messages::undelivered_in(c, "tg:1", 10)?,
                    messages::latest(c, "tg:1", 10)?,
                    messages::last_seq(c)?,
                    messages::reference(c, a.seq)?,
                ))
            })
            .unwrap();
        assert_eq!(
            undelivered.iter().map(|m| m.seq).collect::<Vec<_>>(),
            [out.seq]
        );
        assert_eq!(latest.len(), 3);
        assert_eq!(latest.iter().find(|m| m.seq == a.seq).unwrap().text, "hi!");
        assert_eq!(last, out.seq);
        assert_eq!(reference.unwrap().external_id.as_deref(), Some("7"));
        let id = out.id.clone();
        store
            .write_blocking(move |tx| messages::mark_delivered(tx, &id, None))
            .unwrap();
        let after = store
            .read_blocking(|c| messages::inbound_after(c, "tg:1", 0, 10))
            .unwrap();
        assert_eq!(
            after.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["hi!", "there"]
        );
        // Pending messages are taken oldest first; a prompt's end newest
        // first; a passed-over message is marked and its sender not named.
        let c = store
            .write_blocking(|tx| {
                messages::insert_inbound(tx, "tg:1", "telegram", &inbound("third", None))
            })
            .unwrap()
            .unwrap();
        let (bs, cs) = (b.seq, c.seq);
        let (oldest, end, bots, marked, senders) = store
            .write_blocking(move |tx| {
                Ok((
                    messages::inbound_after(tx, "tg:1", 0, 2)?,
                    messages::inbound_upto(tx, "tg:1", 0, bs, 1)?,
                    messages::mark_passed_over(tx, "tg:1", bs, cs)?,
                    messages::mark_passed_over(tx, "tg:1", 0, bs)?,
                    messages::inbound_senders(tx, "tg:1", 0, cs)?,
                ))
            })
            .unwrap();
        assert_eq!(
            oldest.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["hi!", "there"]
        );
        assert_eq!(end.iter().map(|m| m.seq).collect::<Vec<_>>(), [b.seq]);
        assert_eq!(
            (bots, marked),
            (0, 1),
            "the assistant's messages are not marked"
        );
        assert_eq!(senders, ["alice"]);
        let log = store
            .read_blocking(|c| messages::after(c, "tg:1", 0, 10))
            .unwrap();
        assert_eq!(
            log.iter()
                .filter(|m| m.passed_over)
                .map(|m| m.seq)
                .collect::<Vec<_>>(),
            [a.seq]
        );
        assert!(
            store
                .read_blocking(move |c| messages::inbound_senders(c, "tg:1", 0, a.seq))
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .read_blocking(|c| messages::undelivered(c, 0, 10))
                .unwrap()
                .is_empty()
        );
    });
}

#[test]
fn a_message_keeps_its_files() {
    use g2_core::media::{Attachment, Kind};
    each(|store| {
        let voice = Attachment {
            kind: Kind::Voice,
            name: "note.ogg".into(),
            path: Some("media/2026-11-28/a1-note.ogg".into()),
            content_type: "audio/ogg".into(),
            bytes: 5120,
            seconds: Some(12),
            note: None,
        };
        let m = Inbound {
            attachments: vec![voice.clone()],
            ..inbound("[voice 0:12] we meet at noon", None)
        };
        let stored = store
            .write_blocking(move |tx| messages::insert_inbound(tx, "tg:9", "telegram", &m))
            .unwrap()
            .unwrap();
        assert_eq!(stored.attachments, std::slice::from_ref(&voice));
        let log = store
            .read_blocking(|c| messages::after(c, "tg:9", 0, 10))
            .unwrap();
        assert_eq!(log[0].attachments, [voice]);
        let plain = store
            .write_blocking(|tx| {
                messages::insert_inbound(tx, "tg:9", "telegram", &inbound("hi", None))
            })
            .unwrap()
            .unwrap();
        assert!(plain.attachments.is_empty());
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("attachments").is_none(), "{json}");
    });
}

#[test]
fn session_pointers_bump_generations_and_keep_history() {
    each(|store| {
        let g = GroupFolder::new("main").unwrap();
        let g2 = g.clone();
        let entry = store
            .write_blocking(move |tx| {
                let p0 = sessions::pointer(tx, &g2)?;
                assert_eq!((p0.generation, p0.session_id.as_deref()), (0, None));
                let p1 = sessions::write(tx, &p0, Some("s-1"), Some("2026-01-01T00:00:00.000Z"))?;
                assert_eq!(p1.generation, 1);
                let e = sessions::insert_history(tx, &p1, "s-1", "first")?;
                sessions::write(tx, &p1, None, None)?;
                Ok(e)
            })
            .unwrap();
        let (p, history, one) = store
            .read_blocking(move |c| {
                Ok((
                    sessions::pointer(c, &g)?,
                    sessions::history(c, "main")?,
                    sessions::history_entry(c, "other", entry.id)?,
                ))
            })
            .unwrap();
        assert_eq!((p.generation, p.session_id), (2, None));
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].name, "first");
        assert!(one.is_none(), "another group's bookmark is not found");
    });
}

#[test]
fn router_state_tasks_usage_deliveries_and_requests() {
    each(|store| {
        store
            .write_blocking(|tx| {
                router_state::set(tx, "cursor", "1")?;
                router_state::set(tx, "cursor", "2")?;
                let task = tasks::Task {
                    id: "t1".into(),
                    group_folder: GroupFolder::new("main")?,
                    chat_jid: "web:main".into(),
                    prompt: "report".into(),
                    schedule_type: "once".into(),
                    schedule_value: "2026-01-01T00:00:00Z".into(),
                    timezone: "UTC".into(),
                    context_mode: "isolated".into(),
                    next_run: Some("2026-01-01T00:00:00.000Z".into()),
                    last_run: None,
                    last_result: None,
                    status: "active".into(),
                    created_at: "2025-12-31T00:00:00.000Z".into(),
                };
                tasks::insert(tx, &task)?;
                for (caller, tokens) in [("main", 10u64), ("main", 5), ("other", 100)] {
                    usage::insert(
                        tx,
                        &usage::Record {
                            caller: caller.into(),
                            purpose: usage::Purpose::Agent,
                            provider: "offline".into(),
                            model: "m".into(),
                            tokens: usage::Tokens {
                                input: tokens,
                                output: 1,
                                ..Default::default()
                            },
                            duration_ms: 3,
                            status: 200,
                            outcome: usage::Outcome::Ok,
                            streamed: true,
                            started_at: "2026-01-02T00:00:00.000Z".into(),
                            day: "2026-01-02".into(),
                        },
                    )?;
                }
                let m = messages::insert_outbound(tx, "tg:1", "Andy", "a reply", None, false)?;
                deliveries::set(tx, &m.id, 0, deliveries::State::Sent, Some("ext-1"), None)?;
                deliveries::set(tx, &m.id, 1, deliveries::State::Sending, None, None)?;
                requests::log(tx, "main", Some("r1"), "send_message", "ok", "")?;
                requests::log(tx, "main", Some("r2"), "link", "refused", "no")?;
                Ok(())
            })
            .unwrap();
        // Tasks: due, claimed once, run, completed.
        let (due, claimed_twice) = store
            .write_blocking(|tx| {
                let due = tasks::due(tx, "2026-01-02T00:00:00.000Z", 10)?;
                let first = tasks::claim(tx, "t1", "host-a:1", "2026-01-02T00:00:00.000Z", None)?;
                let second = tasks::claim(tx, "t1", "host-b:1", "2026-01-02T00:00:00.000Z", None)?;
                assert_eq!(tasks::claimed(tx, Some("host-a"))?.len(), 1);
                assert!(tasks::claimed(tx, Some("host-b"))?.is_empty());
                tasks::log_run(
                    tx,
                    "t1",
                    "2026-01-02T00:00:00.000Z",
                    12,
                    "success",
                    Some("done"),
                    None,
                )?;
                tasks::end_run(tx, "t1", "2026-01-02T00:00:00.000Z", "done")?;
                Ok((due.len(), first && !second))
            })
            .unwrap();
        assert_eq!((due, claimed_twice), (1, true));
        let (state, task, runs, tokens, report, receipts, log, known) = store
            .write_blocking(|tx| {
                let receipt = deliveries::receipt(tx, "ext-1", "read", None)?;
                let late = deliveries::receipt(tx, "ext-1", "delivered", None)?;
                assert!(receipt.is_some() && late.is_some());
                Ok((
                    router_state::get(tx, "cursor")?,
                    tasks::get(tx, "t1")?.unwrap(),
                    tasks::runs(tx, "t1", 5)?,
                    usage::tokens_on(tx, "main", "2026-01-02", None)?,
                    usage::report(tx, None, Some("2026-01-01"))?,
                    receipt
                        .map(|(m, _)| deliveries::receipt_of(tx, &m, 0))
                        .transpose()?,
                    requests::list(tx, "main", 10)?,
                    requests::known_chat(tx, "tg:1")?,
                ))
            })
            .unwrap();
        assert_eq!(state.as_deref(), Some("2"));
        assert_eq!((task.status.as_str(), task.next_run), ("completed", None));
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].duration_ms, 12);
        assert_eq!(tokens, 17);
        assert_eq!(report.len(), 2, "{report:?}");
        assert_eq!(report.iter().map(|l| l.requests).sum::<u64>(), 3);
        assert_eq!(
            receipts,
            Some(Some("read".into())),
            "a late receipt does not go back"
        );
        assert_eq!(
            log.iter()
                .map(|e| e.request_id.as_deref())
                .collect::<Vec<_>>(),
            [Some("r2"), Some("r1")]
        );
        assert_eq!(log[1].detail, None, "an empty detail is stored as NULL");
        assert!(known);
    });
}
