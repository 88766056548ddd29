use serde_json::{Value, json};

use super::*;

const ME: u64 = 900;
const CHANNEL: u64 = 1_234_567_890_123;

fn user(id: u64, name: &str, bot: bool) -> Value {
    json!({ "id": id.to_string(), "username": name, "discriminator": "0",
            "global_name": null, "avatar": null, "bot": bot, "public_flags": 0 })
}

/// A MESSAGE_CREATE's `d`, with every field Discord sends.
fn message(id: u64, author: Value, content: &str, extra: Value) -> DcMessage {
    let mut v = json!({
        "id": id.to_string(), "channel_id": CHANNEL.to_string(), "guild_id": "77",
        "author": author, "content": content, "timestamp": "2026-11-26T10:00:00.000000+00:00",
        "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [],
        "mention_roles": [], "attachments": [], "embeds": [], "pinned": false, "type": 0,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).expect("a message as Discord sends it")
}

fn groups() -> HashMap<String, GroupFolder> {
    HashMap::from([(format!("dc:{CHANNEL}"), GroupFolder::new("club").unwrap())])
}

fn taken(d: Decision) -> Inbound {
    match d {
        Decision::Take(Intake::New { m, .. }) => m,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_mention_of_the_bot_addresses_it_and_reads_as_a_name() {
    let m = message(
        1,
        user(5, "ann", false),
        &format!("<@{ME}> what did <@6> say?"),
        json!({ "mentions": [user(ME, "g2bot", true), user(6, "bob", false)],
                "member": { "nick": "Annie", "roles": [], "joined_at": null, "deaf": false, "mute": false, "flags": 0 } }),
    );
    let m = taken(classify(&m, false, ME, &groups()));
    assert!(m.addressed);
    assert_eq!(m.text, "@g2 what did @bob say?");
    assert_eq!(m.sender, "5");
    assert_eq!(m.sender_name.as_deref(), Some("Annie"));
    assert_eq!(m.external_id.as_deref(), Some("1"));
}

#[test]
fn other_messages_are_context_and_replies_to_the_bot_address_it() {
    let plain = message(2, user(5, "ann", false), "just chatting", json!({}));
    assert!(!taken(classify(&plain, false, ME, &groups())).addressed);
    let reply = message(
        3,
        user(5, "ann", false),
        "and then?",
        json!({ "type": 19, "referenced_message": serde_json::to_value(message(1, user(ME, "g2bot", true), "earlier", json!({}))).unwrap() }),
    );
    assert!(taken(classify(&reply, false, ME, &groups())).addressed);
    // A direct message (no server) always addresses the bot.
    let mut dm = message(4, user(5, "ann", false), "hi", json!({}));
    dm.guild_id = None;
    assert!(taken(classify(&dm, false, ME, &groups())).addressed);
}

#[test]
fn bots_system_messages_and_strangers_are_not_stored() {
    let own = message(5, user(ME, "g2bot", true), "my answer", json!({}));
    assert_eq!(
        classify(&own, false, ME, &groups()),
        Decision::Skip("the bot's own message")
    );
    let other = message(6, user(8, "otherbot", true), "beep", json!({}));
    assert_eq!(
        classify(&other, false, ME, &groups()),
        Decision::Skip("another bot's message")
    );
    let pin = message(7, user(5, "ann", false), "", json!({ "type": 6 }));
    assert_eq!(
        classify(&pin, false, ME, &groups()),
        Decision::Skip("a system message")
    );
    let elsewhere = message(
        8,
        user(5, "ann", false),
        "hi",
        json!({ "channel_id": "42" }),
    );
    assert_eq!(
        classify(&elsewhere, false, ME, &groups()),
        Decision::Unregistered(Jid(42))
    );
}

#[test]
fn attachments_are_named_and_edits_replace_text() {
    let m = message(
        9,
        user(5, "ann", false),
        "look",
        json!({ "attachments": [{ "id": "1", "filename": "cat.png", "size": 10, "url": "https://x/cat.png",
                                  "proxy_url": "https://x/cat.png", "content_type": "image/png" }] }),
    );
    assert_eq!(
        taken(classify(&m, false, ME, &groups())).text,
        "look\n[image: cat.png]"
    );
    let edit = message(
        10,
        user(5, "ann", false),
        &format!("<@{ME}> fixed"),
        json!({ "mentions": [user(ME, "g2bot", true)] }),
    );
    assert_eq!(
        classify(&edit, true, ME, &groups()),
        Decision::Take(Intake::Edit {
            folder: GroupFolder::new("club").unwrap(),
            external_id: "10".into(),
            text: "@g2 fixed".into(),
            addressed: true,
        })
    );
}

#[test]
fn a_stored_session_reads_back() {
    let s = Saved {
        id: "abc".into(),
        seq: 42,
        resume_url: "wss://gateway-us-east1-b.discord.gg".into(),
    };
    let back: Saved = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
    assert!(fatal_reason(Some(4014)).contains("Message Content"));
}
