//! The `g2` command line: init, groups, sessions, archive; bad input gets a
//! clear error and changes nothing.

use crate::steps::sorted_keys;
use crate::support::*;

const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";

#[test]
fn init_is_idempotent_and_creates_the_layout() {
    let home = TestHome::new();
    let again = home.ok(&["init"]);
    assert!(again.contains("already registered"), "{again}");
    for p in [
        "data/g2.db",
        "groups/main/CLAUDE.md",
        "groups/global/CLAUDE.md",
        "groups/main/conversations",
        "data/sessions/main/.claude",
        "data/ipc/main",
    ] {
        assert!(home.path().join(p).exists(), "{p} missing");
    }
    let groups = home.json(&["groups", "list"]);
    assert_eq!(groups.as_array().unwrap().len(), 1);
    assert_eq!(groups[0]["folder"], "main");
    assert_eq!(groups[0]["is_main"], true);
    assert_eq!(groups[0]["requires_trigger"], false);
}

#[test]
fn groups_add_list_remove() {
    let home = TestHome::new();
    home.ok(&[
        "groups", "add", "dev-team", "--name", "Dev Team", "--jid", "dev@chat",
    ]);
    // The `family` group, woken only by its trigger.
    home.ok(&[&shared::ADD_FAMILY[..5], &["--trigger", "(?i)^hey bot"]].concat());
    home.ok(&["groups", "add", "open", "--name", "Open", "--no-trigger"]);
    let list = home.json(&["groups", "list"]);
    let by = |f: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|g| g["folder"] == f)
            .unwrap()
            .clone()
    };
    assert_eq!(by("dev-team")["jid"], "dev@chat");
    assert_eq!(by("dev-team")["requires_trigger"], true);
    assert_eq!(by("dev-team")["trigger_pattern"], r"(?i)^@G2\b");
    assert_eq!(by("family")["trigger_pattern"], "(?i)^hey bot");
    assert_eq!(by("open")["requires_trigger"], false);
    // The JSON shape is stable: exactly these keys.
    let open = by("open");
    let keys = sorted_keys(&open);
    assert_eq!(
        keys,
        [
            "added_at",
            "container_config",
            "folder",
            "is_main",
            "jid",
            "name",
            "requires_trigger",
            "trigger_pattern"
        ]
    );
    assert!(home.path().join("groups/dev-team/CLAUDE.md").is_file());

    let err = home.fails(&["groups", "add", "dev-team", "--name", "Again"]);
    assert!(err.contains("registered already"), "{err}");
    let err = home.fails(&["groups", "add", "second", "--name", "Second main", "--main"]);
    assert!(err.contains("only one"), "{err}");
    let err = home.fails(&["groups", "add", "x", "--name", "X", "--trigger", "(oops"]);
    assert!(err.contains("trigger pattern"), "{err}");

    home.ok(&["groups", "remove", "dev-team"]);
    assert!(
        home.path().join("groups/dev-team/CLAUDE.md").is_file(),
        "folder kept"
    );
    let err = home.fails(&["groups", "remove", "dev-team"]);
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn hostile_folder_names_are_refused_and_create_nothing() {
    let home = TestHome::new();
    let outside = home.path().parent().unwrap().to_path_buf();
    let before: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for bad in [
        "../escape",
        "..",
        "a/b",
        "/tmp/abs",
        "global",
        "-dash",
        "sp ace",
        ".hidden",
        "x\u{0}y",
    ] {
        if bad.contains('\0') {
            continue; // argv cannot carry NUL
        }
        let err = home.fails(&["groups", "add", "--name", "Bad", "--", bad]);
        assert!(
            err.contains("invalid group folder") || err.contains("reserved"),
            "{bad:?}: {err}"
        );
        let err = home.fails(&["sessions", "show", "--", bad]);
        assert!(err.contains("error:"), "{bad:?}: {err}");
        let err = home.fails(&["sessions", "set", "--", bad, A]);
        assert!(err.contains("error:"), "{bad:?}: {err}");
    }
    let err = home.fails(&["sessions", "set", "main", "../../../../etc/passwd"]);
    assert!(err.contains("a session id is a UUID"), "{err}");
    let err = home.fails(&["archive", "/dev/null", "--group", "../main"]);
    assert!(err.contains("invalid group folder"), "{err}");
    let after: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        before.len(),
        after.len(),
        "something was created outside the home"
    );
    assert_eq!(home.json(&["groups", "list"]).as_array().unwrap().len(), 1);
}

#[test]
fn sessions_through_the_cli() {
    let home = TestHome::new();
    home.ok(&["groups", "add", "dev", "--name", "Dev"]);
    let err = home.fails(&["sessions", "set", "nogroup", A]);
    assert!(err.contains("not registered"), "{err}");

    home.ok(&["sessions", "set", "dev", A]);
    assert_eq!(home.ok(&["sessions", "show", "dev"]).trim(), A);
    let p = home.json(&["sessions", "show", "dev"]);
    assert_eq!(p["session_id"], A);
    assert_eq!(p["generation"], 1);

    home.place_transcript("dev", A, &fixture("spotter-short.jsonl"));
    let cleared = home.json(&["sessions", "clear", "dev", "--name", "Phoenix trouble"]);
    assert_eq!(cleared["history"]["name"], "Phoenix trouble");
    let path = cleared["archive"]["path"].as_str().unwrap();
    assert!(path.starts_with("groups/dev/conversations/") && path.ends_with("-phoenix-trouble.md"));
    assert_eq!(cleared["archive"]["trigger"], "clear");
    let md = std::fs::read_to_string(home.path().join(path)).unwrap();
    assert!(md.contains("**User**: mix phx.server doesnt seem to start"));
    assert!(
        home.ok(&["sessions", "show", "dev"])
            .contains("no active session")
    );

    let history = home.json(&["sessions", "history", "dev"]);
    assert_eq!(history.as_array().unwrap().len(), 1);
    let id = history[0]["id"].as_i64().unwrap();
    let keys = sorted_keys(&history[0]);
    assert_eq!(
        keys,
        [
            "archived_at",
            "created_at",
            "group",
            "id",
            "name",
            "session_id"
        ]
    );

    // A history id of another group is not found, and changes nothing.
    let err = home.fails(&["sessions", "resume", "main", &id.to_string()]);
    assert!(err.contains("not found"), "{err}");

    let resumed = home.json(&["sessions", "resume", "dev", &id.to_string()]);
    assert_eq!(resumed["pointer"]["session_id"], A);
    assert!(
        home.json(&["sessions", "history", "dev"])
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Clearing with no transcript on disk still bookmarks the session.
    home.ok(&["sessions", "clear", "dev", "--name", "Again"]);
    let out = home.json(&["sessions", "history", "dev"]);
    assert_eq!(out[0]["name"], "Again");
}

#[test]
fn archive_never_overwrites() {
    let home = TestHome::new();
    let f = fixture("spotter-short.jsonl");
    // The same conversation archived again and again under one title.
    let same = [
        "archive",
        f.to_str().unwrap(),
        "--group",
        "main",
        "--name",
        "Same name",
    ];
    let first = home.ok(&same);
    let original = std::fs::read_to_string(first.trim()).unwrap();
    let second = home.ok(&same);
    let third = home.json(&same);
    assert!(first.trim().ends_with("-same-name.md"));
    assert!(second.trim().ends_with("-same-name-2.md"));
    assert!(third["path"].as_str().unwrap().ends_with("-same-name-3.md"));
    assert_eq!(std::fs::read_to_string(first.trim()).unwrap(), original);
    // Only the three archives, no temp files.
    let names: Vec<String> = home
        .archives("main")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with('.')));

    // A file deleted by hand keeps its row (and its search entry); the name
    // is not reused, the next archive of that title still lands.
    std::fs::remove_file(first.trim()).unwrap();
    let fourth = home.json(&same);
    assert!(
        fourth["path"]
            .as_str()
            .unwrap()
            .ends_with("-same-name-4.md"),
        "{fourth}"
    );
    let rows = crate::meaning::count(&home.store(), "SELECT count(*) FROM conversation_archives");
    assert_eq!(rows, 4);
}

#[test]
fn foreign_g2_variables_are_not_settings() {
    let home = TestHome::new();
    let out = home.g2_with(
        &["groups", "list"],
        &[
            ("G2_SKIP_DOCKER", "1"),
            ("G2_FIXTURES", "/nowhere"),
            ("G2_SETUP_QUIET", "1"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A typo inside a known section is still an error.
    let out = home.g2_with(
        &["groups", "list"],
        &[("G2_ARCHIVE__MAX_MESAGE_CHARS", "5")],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_mesage_chars"));
}

#[test]
fn concurrent_archives_of_one_name_all_land() {
    let home = TestHome::new();
    let f = fixture("spotter-short.jsonl");
    let children: Vec<_> = (0..8)
        .map(|_| {
            home.command(
                &[
                    "archive",
                    f.to_str().unwrap(),
                    "--group",
                    "main",
                    "--name",
                    "Race",
                ],
                &[],
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut paths: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 8, "two archives got one file");
    let rows = crate::meaning::count(&home.store(), "SELECT count(*) FROM conversation_archives");
    assert_eq!(rows, 8);
}

#[test]
fn settings_file_and_environment_apply() {
    let home = TestHome::new();
    std::fs::write(home.path().join("g2.toml"), "assistant_name = \"Andy\"\n").unwrap();
    let out = home.ok(&[
        "archive",
        fixture("spotter-short.jsonl").to_str().unwrap(),
        "--group",
        "main",
    ]);
    let md = std::fs::read_to_string(out.trim()).unwrap();
    assert!(md.contains("**Andy**: "), "{md}");
    std::fs::write(home.path().join("g2.toml"), "no_such_setting = 1\n").unwrap();
    let err = home.fails(&["groups", "list"]);
    assert!(err.contains("no_such_setting"), "{err}");
}
