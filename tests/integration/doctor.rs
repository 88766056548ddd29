//! `g2 doctor` reports each part, and fails with a reason when one is missing.

use crate::support::*;

#[test]
fn doctor_reports_every_part() {
    let home = TestHome::new();
    let out = home.g2(&["doctor", "--json"]);
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = checks.as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "settings",
            "database",
            "folders",
            "docker",
            "claude-code",
            "model",
            "embeddings",
            "speech",
            "image",
            "disk",
            "telegram",
            "whatsapp",
            "discord",
            "slack",
            "secrets"
        ]
    );
    let get = |n: &str| checks.iter().find(|c| c["name"] == n).unwrap();
    // The embedding model: where, its dimensions, a self-test.
    let e = get("embeddings")["detail"].as_str().unwrap();
    if require(
        "the embedding model (tools/models)",
        get("embeddings")["ok"] == true,
    ) {
        assert!(
            e.contains("384 dimensions") && e.contains("self-test passed"),
            "{e}"
        );
    }
    // The speech model: where, and that it loads.
    let sp = get("speech")["detail"].as_str().unwrap();
    if require(
        "the speech model (tools/models)",
        get("speech")["ok"] == true,
    ) {
        assert!(
            sp.starts_with("Whisper tiny.en at ") && sp.contains("loaded in"),
            "{sp}"
        );
    }
    // A missing image is not a failure: `g2 run` builds it.
    assert_eq!(get("image")["ok"], true, "{}", get("image"));
    assert_eq!(get("database")["ok"], true, "{}", get("database"));
    assert_eq!(get("folders")["ok"], true, "{}", get("folders"));
    // Each group's use against its quota.
    let disk = get("disk")["detail"].as_str().unwrap();
    assert!(
        get("disk")["ok"] == true
            && disk.contains("main ")
            && disk.contains("/2048 MB, ")
            && disk.contains("/200000 files"),
        "{disk}"
    );
    // Who enforces the quotas: this machine's filesystem has no project
    // quotas, so g2's own count does.
    let (fs, _, on) =
        g2_host::container::disk::project_quotas(&home.path().join("groups")).unwrap();
    let said = if on {
        format!("{fs} on ")
    } else {
        format!("no project quotas on {fs} at ")
    };
    assert!(disk.contains(&said), "{disk}");
    assert!(
        disk.contains("g2 counts each group's files itself (at most 20 % of a core)"),
        "{disk}"
    );
    // And whether it sees files deleted while held open (the suite runs as root).
    let held = g2_host::container::disk::Sight::of_self().describe();
    assert!(disk.contains(&format!("; {held}")), "{disk}");
    std::fs::write(home.path().join("groups/main/big.bin"), vec![1u8; 3 << 20]).unwrap();
    let (_, disk) = doctor_check(&home, &[("G2_CONTAINER__DISK_MB", "2")], "disk");
    assert_eq!(disk["ok"], false, "{disk}");
    let many = home.g2_with(
        &["doctor", "--json"],
        &[("G2_CONTAINER__MAX_GROUP_FILES", "2")],
    );
    let many = String::from_utf8(many.stdout).unwrap();
    assert!(many.contains("over its limit of 2"), "{many}");
    assert!(
        disk["detail"]
            .as_str()
            .unwrap()
            .contains("over its disk quota of 2 MB"),
        "{disk}"
    );

    let docker_ok = get("docker")["ok"] == true;
    let claude_ok = get("claude-code")["ok"] == true;
    if require("the Docker engine", docker_ok) {
        assert!(get("docker")["detail"].as_str().unwrap().contains("API 1."));
    }
    if require("Claude Code", claude_ok) {
        let detail = get("claude-code")["detail"].as_str().unwrap();
        assert!(
            detail.contains(g2_host::CLAUDE_CODE_VERSION.trim()),
            "{detail}"
        );
    }
    // No key in g2's environment (the test strips ANTHROPIC_*): offline.
    assert_eq!(get("model")["ok"], true);
    assert!(
        get("model")["detail"]
            .as_str()
            .unwrap()
            .starts_with("offline"),
        "{}",
        get("model")
    );
    assert_eq!(out.status.success(), docker_ok && claude_ok);
}

/// Runs `g2 doctor --json` with `env`: its output and the check `name`.
fn doctor_check(
    home: &TestHome,
    env: &[(&str, &str)],
    name: &str,
) -> (std::process::Output, serde_json::Value) {
    let out = home.g2_with(&["doctor", "--json"], env);
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = named(&checks, name).clone();
    (out, check)
}

/// `check` failed, its detail saying `says`.
fn fails_saying(check: &serde_json::Value, says: &str) {
    assert_eq!(check["ok"], false, "{check}");
    assert!(check["detail"].as_str().unwrap().contains(says), "{check}");
}

/// The check `name` among doctor's `--json` checks.
fn named<'a>(checks: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn doctor_names_the_provider_and_the_key_source_never_the_key() {
    let home = TestHome::new();
    let key = "sk-ant-doctor-test-0123456789";
    let run = |env: &[(&str, &str)]| {
        let (out, model) = doctor_check(&home, env, "model");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(key));
        assert!(!String::from_utf8_lossy(&out.stderr).contains(key));
        model
    };
    let m = run(&[("ANTHROPIC_API_KEY", key)]);
    assert_eq!(m["ok"], true);
    assert!(
        m["detail"].as_str().unwrap().contains(
            "anthropic at https://api.anthropic.com (ANTHROPIC_API_KEY from the environment)"
        ),
        "{m}"
    );

    std::fs::write(
        home.path().join(".env"),
        format!("# host secrets\nANTHROPIC_API_KEY={key}\n"),
    )
    .unwrap();
    let m = run(&[("G2_MODEL", "claude-x")]);
    assert!(m["detail"].as_str().unwrap().contains(".env"), "{m}");
    assert!(
        m["detail"]
            .as_str()
            .unwrap()
            .ends_with("model pinned to claude-x"),
        "{m}"
    );

    let m = run(&[("G2_PROVIDER", "offline")]);
    assert!(m["detail"].as_str().unwrap().starts_with("offline"), "{m}");

    std::fs::remove_file(home.path().join(".env")).unwrap();
    fails_saying(&run(&[("G2_PROVIDER", "anthropic")]), "ANTHROPIC_API_KEY");
}

#[test]
fn doctor_explains_an_uninitialised_home() {
    let home = TestHome::empty();
    let out = home.g2(&["doctor"]);
    assert!(!out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let db = text.lines().find(|l| l.starts_with("database")).unwrap();
    assert!(db.contains("FAIL") && db.contains("g2 init"), "{db}");
    let folders = text.lines().find(|l| l.starts_with("folders")).unwrap();
    assert!(
        folders.contains("FAIL") && folders.contains("g2 init"),
        "{folders}"
    );
}

#[test]
fn doctor_names_a_claude_path_that_does_not_run() {
    let home = TestHome::new();
    let missing = home.path().join("no-such-claude");
    std::fs::write(
        home.path().join("g2.toml"),
        format!("[claude_code]\npath = {:?}\n", missing.to_str().unwrap()),
    )
    .unwrap();
    let (out, c) = doctor_check(&home, &[], "claude-code");
    assert!(!out.status.success());
    fails_saying(&c, "does not run");
}

#[test]
fn init_writes_private_settings_and_doctor_fails_on_readable_secrets() {
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::new();
    let toml = home.path().join("g2.toml");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&toml),
        0o600,
        "g2 init writes g2.toml for its owner only"
    );
    let secrets = || {
        let (out, c) = doctor_check(&home, &[], "secrets");
        (out.status.success(), c)
    };
    // Passed, its detail starting with how many credentials are held.
    let passes_holding = |held: &str| {
        let (_, c) = secrets();
        assert_eq!(c["ok"], true, "{c}");
        assert!(c["detail"].as_str().unwrap().starts_with(held), "{c}");
    };
    let token = "tok-doctor-0123456789";
    std::fs::write(&toml, format!("[api]\ntoken = \"{token}\"\n")).unwrap();
    passes_holding("1 credential held");
    // Readable by everyone: the doctor fails, saying what to do, never the token.
    std::fs::set_permissions(&toml, std::fs::Permissions::from_mode(0o644)).unwrap();
    let env = home.path().join(".env");
    std::fs::write(
        &env,
        "TELEGRAM_BOT_TOKEN=123456:AAexampleexampleexampleexample12345\n",
    )
    .unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o604)).unwrap();
    let (ok, c) = secrets();
    assert!(!ok, "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        c["ok"] == false
            && detail.contains(
                "g2.toml holds api.token and every user can read it (mode 644): chmod 600"
            )
            && detail.contains(".env holds secrets and every user can read it (mode 604)")
            && !detail.contains(token),
        "{c}"
    );
    // The store's password written into store.url: named, never shown.
    let pw = "hunter2-pw-0123";
    std::fs::write(
        &toml,
        format!("[store]\nurl = \"postgres://g2:{pw}@127.0.0.1:9/g2\"\n"),
    )
    .unwrap();
    let (_, c) = secrets();
    let detail = c["detail"].as_str().unwrap();
    assert!(
        c["ok"] == false
            && detail.contains("store.url holds the PostgreSQL password")
            && !detail.contains(pw),
        "{c}"
    );
    std::fs::write(&toml, format!("[api]\ntoken = \"{token}\"\n")).unwrap();
    // An existing file is left as it is by init, which warns.
    let out = home.g2(&["init"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("warning: "),
        "{out:?}"
    );
    assert_eq!(mode(&toml), 0o644);
    std::fs::set_permissions(&toml, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    passes_holding("2 credentials held");
}

/// Beside a running `g2 serve`, doctor reports with the host's settings,
/// not the ones its own environment would give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_running_hosts_settings() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let own: serde_json::Value =
        serde_json::from_slice(&home.g2(&["doctor", "--json"]).stdout).unwrap();
    let disk = |v: &serde_json::Value| named(v, "disk")["detail"].as_str().unwrap().to_string();
    assert!(!disk(&own).contains("/7 MB"), "{own}");
    let s = serve(&home, &[("G2_CONTAINER__DISK_MB", "7")]);
    let out = home.g2(&["doctor", "--json"]);
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &checks[0];
    assert_eq!(first["name"], "settings");
    assert!(
        first["detail"]
            .as_str()
            .unwrap()
            .contains("running g2 serve"),
        "{checks}"
    );
    assert!(disk(&checks).contains("/7 MB"), "{checks}");
    drop(s);
}
