//! A whole turn's cost of g2's hooks: the same scripted turn of the real
//! Claude Code CLI (`claude -p "g2:bash echo one"` on the offline model
//! through `g2 gateway`: one Bash call, then the reply), run with no hooks
//! with the same hooks running `/bin/true` (what Claude Code's own hook
//! machinery costs), and with g2's hooks capturing everything (every event
//! of `HOOK_EVENTS`, the built `g2-agent hook`, registered as the host
//! does), interleaved in one run so all see the same machine. Reports the
//! median and p90 wall time of a turn each way and the differences; and
//! the same hooks with the group's memory on (the workspace's socket is the
//! gateway's group socket, the group holding 200 observations, 20
//! summaries and 500 archives with vectors: the session's block; a prompt's
//! recall is asked by the runner, not run here) against off (no socket). Checks that every hooked turn wrote
//! its hooks' capture events (SessionStart, the Bash call, SessionEnd: a
//! prompt and its reply are captured by the runner, which this bench does
//! not run), and that no hook process is left running afterwards.
//!
//! Needs Claude Code and the agent binary (`scripts/setup.sh`); no Docker:
//! the hooks cost the same inside a container.
//!
//! `cargo bench -p g2-host --bench turn` (`G2_BENCH_TURNS`, default 30 of
//! each).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use g2_core::wire;
use serde_json::{Value, json};

use common::{Gateway, Samples, agent_binary, command, env_or, fmt_dur};

/// One configuration: a Claude Code config folder with or without g2's
/// hooks, and the workspace the hooks write events into.
struct Setup {
    config: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

impl Setup {
    fn new(hooks: Option<&Path>) -> Setup {
        let config = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let mut settings = json!({});
        if let Some(agent) = hooks {
            settings["hooks"] = g2_host::agent::hook_settings(
                &agent.display().to_string(),
                g2_host::agent::HOOK_EVENTS,
            );
        }
        std::fs::write(
            config.path().join("settings.json"),
            serde_json::to_vec_pretty(&settings).unwrap(),
        )
        .unwrap();
        for d in ["group", "ipc/events", "home"] {
            std::fs::create_dir_all(workspace.path().join(d)).unwrap();
        }
        Setup { config, workspace }
    }

    /// One turn, start to exit.
    fn turn(&self, claude: &Path, gateway: &str) -> Duration {
        let ws = self.workspace.path();
        let mut c = command(claude);
        c.args(["-p", "g2:bash echo one"])
            .args(["--permission-mode", "bypassPermissions"])
            .current_dir(ws.join("group"))
            .env("HOME", ws.join("home"))
            .env(wire::ENV_CLAUDE_CONFIG_DIR, self.config.path())
            .env(wire::ENV_WORKSPACE, ws)
            .env("ANTHROPIC_BASE_URL", gateway)
            .env("ANTHROPIC_API_KEY", "placeholder")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            // Outside a container and as root, Claude Code wants to be told
            // it is sandboxed before it skips permissions.
            .env("IS_SANDBOX", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let t = Instant::now();
        let out = c.output().unwrap();
        let d = t.elapsed();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("one"),
            "claude -p failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        d
    }

    /// The capture events the hooks wrote, by kind.
    fn captured(&self) -> Vec<String> {
        let mut kinds = Vec::new();
        for e in std::fs::read_dir(self.workspace.path().join("ipc/events")).unwrap() {
            let v: Value =
                serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
            if v["type"] == "capture" {
                kinds.push(v["event"]["kind"].as_str().unwrap_or("").to_string());
            }
        }
        kinds
    }
}

/// Processes whose command line runs `g2-agent hook`.
fn hook_processes() -> usize {
    let out = Command::new("pgrep")
        .args(["-f", "g2-agent hook"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

fn main() {
    let turns: usize = env_or("G2_BENCH_TURNS", 30);
    let home = tempfile::tempdir().unwrap();
    common::init_home(home.path());
    let claude = g2_host::doctor::find_claude(
        &g2_host::home::Home::new(home.path()).unwrap(),
        &Default::default(),
    )
    .expect("Claude Code not installed: run scripts/setup.sh");
    let agent = agent_binary();
    assert!(
        agent.exists(),
        "{} missing: run scripts/setup.sh",
        agent.display()
    );
    // The group's memory: what the hooks of the memory-on turns are given
    // (observations, summaries, 500 archives with vectors).
    {
        let store =
            g2_host::store::Store::open(&home.path().join("data/g2.db"), Duration::from_secs(5))
                .unwrap();
        let ex: Vec<(String, String)> = (0..1_000)
            .map(|i| {
                (
                    format!(
                        "note {i}: the spare key number {i} is under stone {}",
                        i % 17
                    ),
                    format!("noted, stone {} for key {i}", i % 17),
                )
            })
            .collect();
        common::group_memory(&store, &ex);
        common::random_vectors(&store);
    }
    let gw = Gateway::start(home.path());
    let plain = Setup::new(None);
    let floor = Setup::new(Some(Path::new("/bin/true")));
    let hooked = Setup::new(Some(&agent));
    // Memory on: the workspace's socket is the group's, as in a container.
    let remembering = Setup::new(Some(&agent));
    std::os::unix::fs::symlink(
        home.path().join("data/ipc/main/model.sock"),
        remembering.workspace.path().join("ipc/model.sock"),
    )
    .unwrap();

    // Warm all four (page cache, Claude Code's first-run files).
    for s in [&plain, &floor, &hooked, &remembering] {
        s.turn(&claude, &gw.url);
    }
    let warm_events = hooked.captured().len();

    let (mut without, mut trivial, mut with, mut memory) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..turns {
        without.push(plain.turn(&claude, &gw.url));
        trivial.push(floor.turn(&claude, &gw.url));
        with.push(hooked.turn(&claude, &gw.url));
        memory.push(remembering.turn(&claude, &gw.url));
    }
    let kinds = hooked.captured();
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
    let per_turn = (kinds.len() - warm_events) as f64 / turns as f64;
    // Every turn: its session, its Bash call, its end (its prompt and reply
    // are the runner's to capture, and no runner runs here).
    for k in ["session_start", "tool", "session_end"] {
        assert_eq!(count(k), turns + 1, "{k} events: {kinds:?}");
    }
    assert!(plain.captured().is_empty(), "no hooks, no events");
    let left = hook_processes();
    assert_eq!(left, 0, "hook processes still running");

    let (without, trivial, with, memory) = (
        Samples::of(without),
        Samples::of(trivial),
        Samples::of(with),
        Samples::of(memory),
    );
    let ms = |s: &Samples, p: f64| s.at(p).as_secs_f64() * 1e3;
    println!("a whole turn of claude -p (one Bash call), {turns} of each, interleaved");
    for (name, s) in [
        ("no hooks", &without),
        ("hooks running /bin/true", &trivial),
        ("g2's hooks, full capture", &with),
        ("the same, memory on", &memory),
    ] {
        println!(
            "  {name:<26} p50 {:>9}  p90 {:>9}  (p50 {:>+6.1} ms over no hooks)",
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.9)),
            ms(s, 0.5) - ms(&without, 0.5)
        );
    }
    println!("  capture events per turn {per_turn:.1}; hook processes left running: {left}");
    println!(
        "  memory on against memory off: p50 {:+.1} ms, p90 {:+.1} ms",
        ms(&memory, 0.5) - ms(&with, 0.5),
        ms(&memory, 0.9) - ms(&with, 0.9)
    );
}
