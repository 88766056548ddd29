//! The agent image, built with no registry: a `FROM scratch` image (the
//! project's top-level `Dockerfile`) over a root filesystem assembled here.
//! What the image holds, and where each piece comes from, is listed in
//! `container/README.md`: the image's own files are `container/rootfs/`
//! (embedded in `g2` at build time; `{uid}` and `{gid}` in them become the
//! agent's ids), the binaries and libraries come from this machine, and
//! the empty folders the mounts land on are made here.
//!
//! The build context is streamed to the engine as a tar while it is
//! written; nothing is staged on disk. The image is tagged [`IMAGE`] and
//! labelled with a digest of its inputs (the Dockerfile, the files of
//! `container/rootfs/`, the ids and the binaries), so an unchanged image
//! is not rebuilt.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use bollard::Docker;
use bytes::Bytes;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use g2_core::wire::{
    AGENT_EXE, CLAUDE_EXE, EXTRA_DIR, GLOBAL_DIR, GROUP_DIR, IPC_DIR, PROJECT_DIR, WORKSPACE,
};

use crate::{Error, Result};

/// The image's name.
pub use crate::config::IMAGE;
/// Label holding the digest of the image's inputs.
pub const INPUTS_LABEL: &str = "g2.inputs";
/// The agent user's name inside the container (as `container/rootfs/etc/passwd` has it).
pub const AGENT_USER: &str = "node";
/// The agent user's home (as `container/rootfs/etc/passwd` has it).
pub use g2_core::wire::AGENT_HOME;

const DOCKERFILE: &str = include_str!("../../../Dockerfile");

/// The files of `container/rootfs/`, by path in the image; `{uid}` and
/// `{gid}` in them are replaced by the agent's ids. Every file of that
/// folder must be listed here (a unit test checks).
const ROOTFS_FILES: &[(&str, &str)] = &[
    (
        "etc/passwd",
        include_str!("../../../container/rootfs/etc/passwd"),
    ),
    (
        "etc/group",
        include_str!("../../../container/rootfs/etc/group"),
    ),
];

/// A `container/rootfs/` file as it goes into the image.
fn render(template: &str, uid: u32, gid: u32) -> String {
    template
        .replace("{uid}", &uid.to_string())
        .replace("{gid}", &gid.to_string())
}
/// The Rust target the static agent is built for.
pub const AGENT_TARGET: &str = "x86_64-unknown-linux-gnu";

/// Everything that goes into the image.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub agent: PathBuf,
    pub claude: PathBuf,
    pub busybox: PathBuf,
    pub bash: PathBuf,
    /// Absolute library paths claude links, as the loader resolves them.
    pub libraries: Vec<PathBuf>,
    pub ca_certificates: Option<PathBuf>,
    pub uid: u32,
    pub gid: u32,
}

/// Whether an ELF file asks for a dynamic loader (a `PT_INTERP` header).
pub fn is_dynamic(path: &Path) -> Result<bool> {
    let b = std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let bad = || Error::Invalid(format!("{} is not a 64-bit ELF executable", path.display()));
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return Err(bad());
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().map_err(|_| bad())?) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > b.len() {
            return Err(bad());
        }
        if u32::from_le_bytes(b[o..o + 4].try_into().map_err(|_| bad())?) == 3 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The libraries a dynamic executable loads, by asking `ldd`.
pub fn libraries_of(exe: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .map_err(|e| Error::io("running ldd (Debian package libc-bin)", e))?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "ldd {}: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut libs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or
        // `/lib64/ld-linux-x86-64.so.2 (0x…)`; the vdso has no file.
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next().unwrap_or(""),
            None => line.split_whitespace().next().unwrap_or(""),
        };
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        } else if line.contains("not found") {
            return Err(Error::Invalid(format!(
                "{}: {}",
                exe.display(),
                line.trim()
            )));
        }
    }
    Ok(libs)
}

/// Finds the busybox-static binary (`scripts/setup.sh` installs it).
pub fn find_busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// Finds the bash-static binary (`scripts/setup.sh` installs it).
pub fn find_bash() -> Option<PathBuf> {
    ["/bin/bash-static", "/usr/bin/bash-static"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The project checkout the running `g2` was built from, if any (holds
/// `Cargo.toml` and `agent-runner/`).
pub fn project_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|d| d.join("Cargo.toml").is_file() && d.join("agent-runner").is_dir())
        .map(Path::to_path_buf)
}

/// Builds the static `g2-agent` with cargo in `project` and returns it;
/// cargo's progress goes to stderr (a first build takes minutes).
/// `scripts/run.sh` builds the same artifact with the same flags.
pub fn build_agent(project: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(project)
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "g2-agent",
            "--target",
            AGENT_TARGET,
        ])
        // With an explicit --target these flags reach only target crates,
        // not build scripts or proc macros.
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .status()
        .map_err(|e| Error::io("running cargo to build g2-agent", e))?;
    if !status.success() {
        return Err(Error::Invalid(format!(
            "building g2-agent failed ({status})"
        )));
    }
    Ok(project
        .join("target")
        .join(AGENT_TARGET)
        .join("release/g2-agent"))
}

impl Inputs {
    /// Checks every input: the agent is static, claude's libraries resolve.
    pub fn gather(agent: PathBuf, claude: &Path) -> Result<Self> {
        if is_dynamic(&agent)? {
            return Err(Error::Invalid(format!(
                "{} is dynamically linked; build it with RUSTFLAGS='-C target-feature=+crt-static' --target {AGENT_TARGET}",
                agent.display()
            )));
        }
        let claude = std::fs::canonicalize(claude)
            .map_err(|e| Error::io(format!("{}", claude.display()), e))?;
        let busybox = find_busybox()
            .ok_or_else(|| Error::NotFound("busybox (run scripts/setup.sh)".into()))?;
        if is_dynamic(&busybox)? {
            return Err(Error::Invalid(format!(
                "{} is not busybox-static",
                busybox.display()
            )));
        }
        let bash = find_bash()
            .ok_or_else(|| Error::NotFound("bash-static (run scripts/setup.sh)".into()))?;
        if is_dynamic(&bash)? {
            return Err(Error::Invalid(format!(
                "{} is not statically linked",
                bash.display()
            )));
        }
        let libraries = libraries_of(&claude)?;
        let ca = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
        let (uid, gid) = crate::home::agent_ids();
        Ok(Inputs {
            agent,
            claude,
            busybox,
            bash,
            libraries,
            ca_certificates: ca.is_file().then_some(ca),
            uid,
            gid,
        })
    }

    /// A digest of everything the image is made of.
    pub fn digest(&self) -> Result<String> {
        let mut h = Sha256::new();
        h.update(DOCKERFILE.as_bytes());
        for (path, body) in ROOTFS_FILES {
            h.update(format!("{path}:{}:", body.len()));
            h.update(body.as_bytes());
        }
        h.update(format!("{}:{}", self.uid, self.gid));
        h.update(std::fs::read(&self.agent).map_err(|e| Error::io("reading g2-agent", e))?);
        // Large files: identity by path, size and modification time.
        for p in [&self.claude, &self.busybox, &self.bash]
            .into_iter()
            .chain(&self.libraries)
            .chain(&self.ca_certificates)
        {
            let m = std::fs::metadata(p).map_err(|e| Error::io(format!("{}", p.display()), e))?;
            h.update(format!(
                "{}:{}:{:?}",
                p.display(),
                m.len(),
                m.modified().ok()
            ));
        }
        Ok(format!("{:x}", h.finalize()))
    }

    /// Writes the build context (Dockerfile + rootfs/) as a tar.
    pub fn write_context(&self, out: impl Write, digest: &str) -> std::io::Result<()> {
        let mut tar = tar::Builder::new(out);
        tar.follow_symlinks(true);
        let text =
            |tar: &mut tar::Builder<_>, path: &str, body: &str, mode: u32| -> std::io::Result<()> {
                let mut h = tar::Header::new_gnu();
                h.set_size(body.len() as u64);
                h.set_mode(mode);
                h.set_mtime(0);
                h.set_entry_type(tar::EntryType::Regular);
                tar.append_data(&mut h, path, body.as_bytes())
            };
        let dir = |tar: &mut tar::Builder<_>,
                   path: &str,
                   mode: u32,
                   uid: u32,
                   gid: u32|
         -> std::io::Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_mode(mode);
            h.set_uid(uid as u64);
            h.set_gid(gid as u64);
            h.set_mtime(0);
            h.set_entry_type(tar::EntryType::Directory);
            tar.append_data(&mut h, path, std::io::empty())
        };
        let file =
            |tar: &mut tar::Builder<_>, from: &Path, to: &str, mode: u32| -> std::io::Result<()> {
                let mut f = std::fs::File::open(from)?;
                let mut h = tar::Header::new_gnu();
                h.set_size(f.metadata()?.len());
                h.set_mode(mode);
                h.set_mtime(0);
                h.set_entry_type(tar::EntryType::Regular);
                tar.append_data(&mut h, to, &mut f)
            };
        let link = |tar: &mut tar::Builder<_>, path: &str, target: &str| -> std::io::Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_mode(0o777);
            h.set_mtime(0);
            h.set_entry_type(tar::EntryType::Symlink);
            tar.append_link(&mut h, path, target)
        };

        text(
            &mut tar,
            "Dockerfile",
            &format!("{DOCKERFILE}LABEL {INPUTS_LABEL}=\"{digest}\"\n"),
            0o644,
        )?;
        for d in [
            "rootfs",
            "rootfs/bin",
            "rootfs/etc",
            "rootfs/etc/ssl",
            "rootfs/etc/ssl/certs",
            "rootfs/usr",
            "rootfs/usr/bin",
            "rootfs/usr/local",
            "rootfs/usr/local/bin",
            "rootfs/home",
        ] {
            dir(&mut tar, d, 0o755, 0, 0)?;
        }
        // The mount points (docs/protocol.md, "Mounts").
        for d in [WORKSPACE, GLOBAL_DIR, IPC_DIR, PROJECT_DIR, EXTRA_DIR] {
            dir(&mut tar, &format!("rootfs{d}"), 0o755, 0, 0)?;
        }
        dir(&mut tar, "rootfs/tmp", 0o1777, 0, 0)?;
        dir(
            &mut tar,
            &format!("rootfs{AGENT_HOME}"),
            0o755,
            self.uid,
            self.gid,
        )?;
        dir(
            &mut tar,
            &format!("rootfs{GROUP_DIR}"),
            0o755,
            self.uid,
            self.gid,
        )?;
        file(&mut tar, &self.agent, &format!("rootfs{AGENT_EXE}"), 0o755)?;
        file(
            &mut tar,
            &self.claude,
            &format!("rootfs{CLAUDE_EXE}"),
            0o755,
        )?;
        file(&mut tar, &self.busybox, "rootfs/bin/busybox", 0o755)?;
        file(&mut tar, &self.bash, "rootfs/bin/bash", 0o755)?;
        for applet in busybox_applets(&self.busybox) {
            if applet != "busybox" && applet != "bash" {
                link(&mut tar, &format!("rootfs/bin/{applet}"), "busybox")?;
            }
        }
        link(&mut tar, "rootfs/usr/bin/env", "/bin/busybox")?;
        let mut dirs = BTreeMap::new();
        for lib in &self.libraries {
            let mut acc = String::from("rootfs");
            if let Some(parent) = lib.parent() {
                for c in parent.components().skip(1) {
                    acc.push('/');
                    acc.push_str(&c.as_os_str().to_string_lossy());
                    dirs.entry(acc.clone()).or_insert(());
                }
            }
        }
        for d in dirs.keys() {
            dir(&mut tar, d, 0o755, 0, 0)?;
        }
        for lib in &self.libraries {
            file(&mut tar, lib, &format!("rootfs{}", lib.display()), 0o755)?;
        }
        if let Some(ca) = &self.ca_certificates {
            file(
                &mut tar,
                ca,
                "rootfs/etc/ssl/certs/ca-certificates.crt",
                0o644,
            )?;
        }
        for (path, body) in ROOTFS_FILES {
            text(
                &mut tar,
                &format!("rootfs/{path}"),
                &render(body, self.uid, self.gid),
                0o644,
            )?;
        }
        tar.finish()
    }
}

fn busybox_applets(busybox: &Path) -> Vec<String> {
    Command::new(busybox)
        .arg("--list")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_else(|_| vec!["sh".into()])
}

/// The digest label of the current image, if there is one.
pub async fn current_digest(docker: &Docker) -> Option<String> {
    let img = docker.inspect_image(IMAGE).await.ok()?;
    img.config?.labels?.get(INPUTS_LABEL).cloned()
}

/// What a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Built {
    /// The image with these inputs existed already.
    UpToDate(String),
    Built(String),
}

/// Builds the image unless one with the same inputs exists. `progress`
/// receives the engine's build output line by line.
pub async fn build(
    docker: &Docker,
    inputs: Inputs,
    force: bool,
    mut progress: impl FnMut(&str),
) -> Result<Built> {
    let digest = {
        let i = inputs.clone();
        tokio::task::spawn_blocking(move || i.digest()).await??
    };
    if !force && current_digest(docker).await.as_deref() == Some(digest.as_str()) {
        return Ok(Built::UpToDate(digest));
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(8);
    let d = digest.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let w = ChannelWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let r = inputs.write_context(w, &d);
        if let Err(e) = &r {
            let _ = tx.blocking_send(Err(std::io::Error::new(e.kind(), e.to_string())));
        }
        r
    });
    let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let opts = bollard::query_parameters::BuildImageOptionsBuilder::default()
        .t(IMAGE)
        .rm(true)
        .forcerm(true)
        .build();
    let mut stream = docker.build_image(opts, None, Some(bollard::body_try_stream(body)));
    let mut failure = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(s) = info.stream.as_deref() {
                    for l in s.lines().filter(|l| !l.trim().is_empty()) {
                        progress(l);
                    }
                }
                if let Some(e) = info.error_detail.and_then(|d| d.message) {
                    failure = Some(e);
                }
            }
            Err(e) => failure = Some(e.to_string()),
        }
    }
    writer
        .await?
        .map_err(|e| Error::io("writing the image build context", e))?;
    if let Some(e) = failure {
        return Err(Error::Docker(format!("image build failed: {e}")));
    }
    Ok(Built::Built(digest))
}

const CHUNK: usize = 1 << 20;

/// `Write` into a channel of 1 MiB chunks (the request body of the build).
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the engine stopped reading the build context",
            )
        })
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Drop for ChannelWriter {
    fn drop(&mut self) {
        let _ = self.send();
    }
}

#[cfg(test)]
mod tests;
