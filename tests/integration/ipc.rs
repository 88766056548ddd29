//! The IPC authorization matrix (`docs/protocol.md`, "Authorization"), row by row, for the main
//! group and another group, plus every forbidden cross-group attempt.
//! Requests are files in a group's IPC folder, served by the host's real
//! `RequestServer` against a real database; the source group is the folder.

use g2_core::wire::{Action, TaskResponse};
use g2_host::requests::RequestServer;

use crate::steps::{session_of, set_session};
use crate::support::*;

struct Fixture {
    home: TestHome,
    server: RequestServer,
    n: std::cell::Cell<u32>,
}

impl Fixture {
    fn new() -> Fixture {
        let home = TestHome::new();
        home.ok(&["groups", "add", "family", "--name", "Family"]);
        home.ok(&["groups", "add", "work", "--name", "Work"]);
        let server = RequestServer::new(home.home(), home.store(), home.sessions(), home.links());
        Fixture {
            home,
            server,
            n: std::cell::Cell::new(0),
        }
    }

    /// Writes a request into `folder`'s IPC folder, lets the host serve it,
    /// and returns the response.
    async fn ask(&self, folder: &str, action: Action) -> TaskResponse {
        let id = self.put(folder, action);
        self.server.drain(&gf(folder)).await;
        let path = self
            .home
            .path()
            .join(format!("data/ipc/{folder}/responses/{id}.json"));
        let r: TaskResponse = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        std::fs::remove_file(path).unwrap();
        r
    }

    /// Writes a request into `folder`'s IPC folder; returns its id.
    fn put(&self, folder: &str, action: Action) -> String {
        self.n.set(self.n.get() + 1);
        let id = format!("req-{}", self.n.get());
        put_request(self.home.path(), folder, &id, action);
        id
    }

    async fn ok(&self, folder: &str, action: Action) -> String {
        let r = self.ask(folder, action).await;
        assert!(r.ok, "{folder}: {r:?}");
        r.text
    }

    async fn refused(&self, folder: &str, action: Action) {
        let r = self.ask(folder, action).await;
        assert!(
            !r.ok && r.text.starts_with("not allowed:"),
            "{folder}: {r:?}"
        );
    }

    fn count(&self, sql: &str) -> i64 {
        self.home
            .store()
            .read_blocking(|c| c.query_row(sql, (), |r| r.get(0)))
            .unwrap()
    }

    fn bot_messages(&self, jid: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM messages WHERE chat_jid = '{jid}' AND is_bot = 1"
        ))
    }

    fn refusals(&self, folder: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM ipc_log WHERE group_folder = '{folder}' AND outcome = 'refused'"
        ))
    }
}

fn send(text: &str, to: Option<&str>) -> Action {
    Action::SendMessage {
        text: text.into(),
        chat_jid: to.map(Into::into),
    }
}

fn schedule(for_group: Option<&str>) -> Action {
    Action::ScheduleTask {
        prompt: "Water the plants".into(),
        schedule_type: "cron".into(),
        schedule_value: "0 9 * * *".into(),
        timezone: Some("Europe/Berlin".into()),
        context_mode: None,
        group_folder: for_group.map(Into::into),
    }
}

fn register(folder: &str) -> Action {
    Action::RegisterGroup {
        folder: folder.into(),
        name: "New".into(),
        jid: None,
        trigger: None,
        requires_trigger: None,
    }
}

fn task_id(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with("task-"))
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_main_to_any_chat_others_only_their_own() {
    let f = Fixture::new();
    // main: own chat, another group's chat; unknown chats are not invented.
    f.ok("main", send("to main", None)).await;
    f.ok("main", send("to family", Some("local:family"))).await;
    let r = f
        .ask("main", send("to nowhere", Some("local:nowhere")))
        .await;
    assert!(!r.ok && r.text.contains("not found"), "{r:?}");
    // family: its own chat, by default or by name.
    f.ok("family", send("family here", None)).await;
    f.ok("family", send("family again", Some("local:family")))
        .await;
    // Forbidden: family into main's or work's chat.
    f.refused("family", send("psst", Some("local:main"))).await;
    f.refused("family", send("psst", Some("local:work"))).await;
    assert_eq!(f.bot_messages("local:main"), 1);
    assert_eq!(f.bot_messages("local:family"), 3);
    assert_eq!(f.bot_messages("local:work"), 0);
    assert_eq!(f.refusals("family"), 2);
    // Internal notes are removed from what an agent sends.
    f.ok("work", send("ok <internal>hidden</internal>", None))
        .await;
    let text: String = f
        .home
        .store()
        .read_blocking(|c| {
            c.query_row(
                "SELECT content FROM messages WHERE chat_jid = 'local:work'",
                (),
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(text, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_main_for_any_group_others_only_their_own() {
    let f = Fixture::new();
    let main_task = task_id(&f.ok("main", schedule(None)).await);
    let family_by_main = task_id(&f.ok("main", schedule(Some("family"))).await);
    let family_own = task_id(&f.ok("family", schedule(None)).await);
    let work_own = task_id(&f.ok("work", schedule(Some("work"))).await);
    let r = f.ask("main", schedule(Some("nobody"))).await;
    assert!(!r.ok && r.text.contains("not found"), "{r:?}");
    // Forbidden: scheduling for another group.
    f.refused("family", schedule(Some("main"))).await;
    f.refused("family", schedule(Some("work"))).await;
    // The task lands in the target group with the target's chat.
    let (g, jid): (String, String) = f
        .home
        .store()
        .read_blocking(|c| {
            c.query_row(
                "SELECT group_folder, chat_jid FROM scheduled_tasks WHERE id = ?1",
                [&family_by_main],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .unwrap();
    assert_eq!((g.as_str(), jid.as_str()), ("family", "local:family"));

    // Listing: main sees every task, others only theirs.
    let all = f.ok("main", Action::ListTasks {}).await;
    for id in [&main_task, &family_by_main, &family_own, &work_own] {
        assert!(all.contains(id.as_str()), "{all}");
    }
    let mine = f.ok("family", Action::ListTasks {}).await;
    assert!(
        mine.contains(&family_own)
            && mine.contains(&family_by_main)
            && !mine.contains(&main_task)
            && !mine.contains(&work_own),
        "{mine}"
    );

    // Pause / resume / cancel: main on any group's task, others on their own.
    f.ok(
        "main",
        Action::PauseTask {
            task_id: family_own.clone(),
        },
    )
    .await;
    f.ok(
        "family",
        Action::ResumeTask {
            task_id: family_own.clone(),
        },
    )
    .await;
    f.ok(
        "family",
        Action::PauseTask {
            task_id: family_by_main.clone(),
        },
    )
    .await;
    for action in [
        Action::PauseTask {
            task_id: main_task.clone(),
        },
        Action::ResumeTask {
            task_id: work_own.clone(),
        },
        Action::CancelTask {
            task_id: main_task.clone(),
        },
        Action::CancelTask {
            task_id: work_own.clone(),
        },
    ] {
        f.refused("family", action).await;
    }
    f.ok(
        "main",
        Action::CancelTask {
            task_id: work_own.clone(),
        },
    )
    .await;
    let status = |id: &str| -> String {
        let id = id.to_string();
        f.home
            .store()
            .read_blocking(move |c| {
                c.query_row(
                    "SELECT status FROM scheduled_tasks WHERE id = ?1",
                    [&id],
                    |r| r.get(0),
                )
            })
            .unwrap()
    };
    assert_eq!(status(&main_task), "active", "untouched by family");
    assert_eq!(status(&family_own), "active");
    assert_eq!(status(&family_by_main), "paused");
    assert_eq!(status(&work_own), "cancelled");
    assert_eq!(f.refusals("family"), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_and_refreshing_groups_is_for_main_only() {
    let f = Fixture::new();
    f.refused("family", register("sneaky")).await;
    f.refused("family", Action::RefreshGroups {}).await;
    assert_eq!(
        f.count("SELECT COUNT(*) FROM registered_groups WHERE folder = 'sneaky'"),
        0
    );
    let r = f.ok("main", register("garden")).await;
    assert!(r.contains("garden"), "{r}");
    assert!(f.home.path().join("groups/garden/CLAUDE.md").exists());
    let r = f.ask("main", register("../etc")).await;
    assert!(!r.ok, "{r:?}");
    let r = f.ask("main", register("garden")).await;
    assert!(!r.ok && r.text.contains("already"), "{r:?}");
    f.ok("main", Action::RefreshGroups {}).await;
    let groups: serde_json::Value = serde_json::from_slice(
        &std::fs::read(f.home.path().join("data/ipc/main/available_groups.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(groups.as_array().unwrap().len(), 4);
    assert!(
        !f.home
            .path()
            .join("data/ipc/family/available_groups.json")
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_tools_act_on_the_source_group_only() {
    let f = Fixture::new();
    let sessions = f.home.sessions();
    let work_id = "11111111-2222-4333-8444-555555555555";
    set_session(&sessions, "work", work_id).await;
    // Main has no more say over another group's sessions than anyone.
    for folder in ["main", "family"] {
        let r = f
            .ask(folder, Action::ClearSession { name: "x".into() })
            .await;
        assert!(
            !r.ok && r.text.contains(&format!("group \"{folder}\"")),
            "{r:?}"
        );
        assert_eq!(
            f.ok(folder, Action::ListSessions {}).await,
            "No earlier sessions."
        );
    }
    // A forged payload naming another group is refused and logged.
    let dir = f.home.path().join("data/ipc/family/tasks");
    let before = f.refusals("family");
    for (i, field) in ["groupFolder", "group_folder", "group"].iter().enumerate() {
        for action in [
            r#""type":"clear_session","name":"y""#,
            r#""type":"list_sessions""#,
            r#""type":"resume_session","historyId":1"#,
        ] {
            let id = format!("x{i}{}", action.len());
            std::fs::write(
                dir.join(format!("{id}.json")),
                format!(r#"{{"requestId":"{id}",{action},"{field}":"work"}}"#),
            )
            .unwrap();
            f.server.drain(&gf("family")).await;
            let r: TaskResponse = serde_json::from_slice(
                &std::fs::read(
                    f.home
                        .path()
                        .join(format!("data/ipc/family/responses/{id}.json")),
                )
                .unwrap(),
            )
            .unwrap();
            assert!(!r.ok && r.text.contains("never on work"), "{r:?}");
        }
    }
    assert_eq!(f.refusals("family"), before + 9);
    assert_eq!(
        session_of(&sessions, "work").await.as_deref(),
        Some(work_id)
    );
    // Naming its own group is harmless.
    std::fs::write(
        dir.join("own.json"),
        br#"{"requestId":"own","type":"list_sessions","groupFolder":"family"}"#,
    )
    .unwrap();
    f.server.drain(&gf("family")).await;
    assert!(
        f.home
            .path()
            .join("data/ipc/family/responses/own.json")
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_folders_and_bad_files_get_nothing() {
    let f = Fixture::new();
    // An IPC folder without a registered group has no rights.
    f.refused("stray", send("hello", None)).await;
    f.refused("stray", Action::ListTasks {}).await;
    // messages/ carries send_message only; junk goes to errors/ with a reason.
    let dir = f.home.path().join("data/ipc/family/messages");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("m1.json"),
        br#"{"requestId":"m1","type":"register_group","folder":"x","name":"X"}"#,
    )
    .unwrap();
    std::fs::write(dir.join("m2.json"), b"{ not json").unwrap();
    std::fs::write(dir.join("m3.json"), vec![b'x'; 2 << 20]).unwrap();
    f.server.drain(&gf("family")).await;
    let errors = f.home.path().join("data/ipc/family/errors");
    assert!(
        std::fs::read_to_string(errors.join("m1.json.reason.txt"))
            .unwrap()
            .contains("does not belong in messages/")
    );
    assert!(
        std::fs::read_to_string(errors.join("m2.json.reason.txt"))
            .unwrap()
            .contains("not a valid request")
    );
    assert!(errors.join("m3.json").exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "every file was claimed"
    );
    assert_eq!(
        f.count(
            "SELECT COUNT(*) FROM ipc_log WHERE group_folder = 'family' AND outcome = 'failed'"
        ),
        3
    );
    assert_eq!(f.count("SELECT COUNT(*) FROM registered_groups"), 3);
}

/// A snapshot of a host folder: every file's name and bytes.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_planted_in_the_ipc_folder_are_never_followed() {
    use std::os::unix::fs::symlink;
    let f = Fixture::new();
    // Host folders the agent would like the host to work in.
    let host = tempfile::tempdir().unwrap();
    for d in ["tasks", "messages", "errors", "responses"] {
        std::fs::create_dir_all(host.path().join(d)).unwrap();
        std::fs::write(
            host.path().join(d).join("host.json"),
            br#"{"requestId":"h","type":"list_sessions"}"#,
        )
        .unwrap();
    }
    let before = snapshot(&host.path().join("tasks"));
    let ipc = f.home.path().join("data/ipc/family");
    f.ok("family", Action::ListTasks {}).await;
    for d in ["tasks", "messages", "errors", "responses"] {
        let _ = std::fs::remove_dir_all(ipc.join(d));
        symlink(host.path().join(d), ipc.join(d)).unwrap();
    }
    // A request file that is itself a link, in a real folder.
    f.server.drain(&gf("family")).await;
    symlink(
        host.path().join("tasks/host.json"),
        ipc.join("tasks/linked.json"),
    )
    .unwrap();
    f.server.drain(&gf("family")).await;
    // The group still works.
    f.ok("family", Action::ListTasks {}).await;
    for d in ["tasks", "messages", "errors", "responses"] {
        assert!(
            !std::fs::symlink_metadata(ipc.join(d))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{d} is a real folder again"
        );
        assert_eq!(
            snapshot(&host.path().join(d)).len(),
            1,
            "{d}: nothing created or removed in the host folder"
        );
    }
    assert_eq!(
        snapshot(&host.path().join("tasks")),
        before,
        "host files unchanged"
    );
    assert!(
        !ipc.join("responses/h.json").exists(),
        "the host's request was never served"
    );
    let reason = std::fs::read_to_string(ipc.join("errors/linked.json.reason.txt")).unwrap();
    assert!(reason.contains("link"), "{reason}");
    assert!(
        std::fs::symlink_metadata(ipc.join("errors/linked.json"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "kept as the link it was"
    );
    // Every attempt is recorded.
    let mut recorded = 0;
    for _ in 0..100 {
        recorded = f.count("SELECT COUNT(*) FROM ipc_log WHERE group_folder = 'family' AND action = 'link' AND outcome = 'refused'");
        if recorded >= 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        recorded >= 5,
        "4 folders and 1 file recorded, got {recorded}"
    );
}

/// Several hosts on one store (docs/cluster.md): a host serves a group's
/// requests only while the store says it holds the group's lease, even
/// when it still believes it does (a host paused past its lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_served_only_while_the_store_gives_this_host_the_lease() {
    use g2_host::store::leases;
    let mut f = Fixture::new();
    let settings = g2_host::config::ClusterSettings {
        host_id: Some("host-a".into()),
        lease_secs: 60,
        ..Default::default()
    };
    let nothing: g2_host::cluster::Hook = std::sync::Arc::new(|_| {});
    let member = g2_host::cluster::start(f.home.store(), &settings, "", nothing.clone(), nothing)
        .await
        .unwrap();
    f.server = f.server.clone().with_leases(member.leases().clone());
    // Alone, host-a holds every group: family's request is served.
    f.ok("family", schedule(None)).await;
    let tasks = "SELECT count(*) FROM scheduled_tasks";
    assert_eq!(f.count(tasks), 1);
    // host-b takes family's lease in the store; host-a has not heard yet.
    f.home
        .store()
        .write_blocking(|tx| {
            let g = leases::get(tx, "family")?.unwrap().generation;
            leases::release(tx, "family", "host-a", g)?;
            leases::acquire(tx, "family", "host-b", 60_000)
        })
        .unwrap()
        .unwrap();
    let id = f.put("family", schedule(None));
    f.server.drain(&gf("family")).await;
    let dir = f.home.path().join("data/ipc/family");
    assert!(
        !dir.join(format!("responses/{id}.json")).exists(),
        "host-a answered a request of host-b's group"
    );
    assert!(
        dir.join(format!("tasks/{id}.json")).exists(),
        "the request waits for its group's owner"
    );
    assert_eq!(f.count(tasks), 1, "nothing scheduled by host-a");
    // Its other groups are still its own.
    f.ok("work", schedule(None)).await;
    assert_eq!(f.count(tasks), 2);
    member.stop().await;
}
