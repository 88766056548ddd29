//! `g2 doctor` reports each part, and fails with a reason when one is missing.

use crate::support::*;

#[test]
fn doctor_reports_every_part() {
    let home = TestHome::new();
    let out = home.g2(&["doctor", "--json"]);
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = checks.as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["database", "folders", "docker", "claude-code"]);
    let get = |n: &str| checks.iter().find(|c| c["name"] == n).unwrap();
    assert_eq!(get("database")["ok"], true, "{}", get("database"));
    assert_eq!(get("folders")["ok"], true, "{}", get("folders"));

    let docker_ok = get("docker")["ok"] == true;
    let claude_ok = get("claude-code")["ok"] == true;
    if require("the Docker engine", docker_ok) {
        assert!(get("docker")["detail"].as_str().unwrap().contains("API 1."));
    }
    if require("Claude Code", claude_ok) {
        let detail = get("claude-code")["detail"].as_str().unwrap();
        assert!(detail.contains(g2_host::CLAUDE_CODE_VERSION.trim()), "{detail}");
    }
    assert_eq!(out.status.success(), docker_ok && claude_ok);
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
    assert!(folders.contains("FAIL") && folders.contains("g2 init"), "{folders}");
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
    let out = home.g2(&["doctor", "--json"]);
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = v.as_array().unwrap().iter().find(|c| c["name"] == "claude-code").unwrap();
    assert_eq!(c["ok"], false);
    assert!(c["detail"].as_str().unwrap().contains("does not run"), "{c}");
}
