//! A throwaway PostgreSQL cluster for tests: `initdb` in a temporary
//! folder, `pg_ctl start` listening on loopback only at a free port, one
//! fresh database per caller ([`Cluster::database`]), and `pg_ctl stop`
//! when the test process ends (a watchdog shell waits for it, so a
//! panicking or killed test binary stops its cluster too).
//!
//! PostgreSQL comes from Debian (`scripts/setup.sh` installs it); its
//! binaries are found under `/usr/lib/postgresql/*/bin` or `G2_PG_BIN`;
//! `G2_PG_OPTIONS` adds server settings (`-c name=value …`).
//! `initdb` will not run as root, so as root the cluster is made and run
//! as the `postgres` user. Shared by the store's suite and the host's
//! integration tests (included with `#[path]`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Cluster {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    next: AtomicU32,
}

/// The PostgreSQL binaries folder, if PostgreSQL is installed.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("G2_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file())
        .collect();
    // The newest major version.
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a PostgreSQL binary, as `postgres` when we are root.
fn run(bin: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// The process's cluster, started on first use; `None` when PostgreSQL
    /// is not installed (in CI that is a failure: the caller checks with
    /// `require`).
    pub fn shared() -> Option<&'static Cluster> {
        static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
        CLUSTER
            .get_or_init(|| bin_dir().map(Cluster::start))
            .as_ref()
    }

    // The watchdog is meant to outlive this process: nobody waits for it.
    #[allow(clippy::zombie_processes)]
    fn start(bin: PathBuf) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("g2-pg-")
            .tempdir()
            .unwrap()
            .keep();
        let data = dir.join("data");
        std::fs::create_dir(&data).unwrap();
        if as_root() {
            let st = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(st.success(), "chown of {} to postgres", dir.display());
        }
        let out = run(
            &bin.join("initdb"),
            &[
                "-D",
                data.to_str().unwrap(),
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--locale=C",
            ],
        );
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        // `G2_PG_OPTIONS`: more server settings, e.g. to log slow statements
        // with their plans while profiling a bench (docs/development.md).
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={} \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 {}",
            dir.display(),
            std::env::var("G2_PG_OPTIONS").unwrap_or_default()
        );
        let log = dir.join("log");
        let out = run(
            &bin.join("pg_ctl"),
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        // Stops the cluster and removes its folder when this process ends,
        // however it ends.
        let pg_ctl = bin.join("pg_ctl");
        let stop = if as_root() {
            format!(
                "runuser -u postgres -- {} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            )
        } else {
            format!(
                "{} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            )
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            dir = dir.display()
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting the cluster's watchdog");
        Cluster {
            port,
            dir,
            bin,
            next: AtomicU32::new(0),
        }
    }

    /// The URL of the cluster's `postgres` database.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A new, empty database; its URL.
    pub fn database(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("g2_{}_{n}", std::process::id());
        let out = run(
            &self.bin.join("psql"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                &format!("CREATE DATABASE {name}"),
            ],
        );
        assert!(
            out.status.success(),
            "creating database {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
