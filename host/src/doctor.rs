//! `g2 doctor`: checks what g2 needs and says, for each part, ok or why not.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::config::Settings;
use crate::home::Home;

/// Why a check failed, in words for the person running `g2 doctor`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Problem(pub String);

impl Problem {
    fn from_error(e: impl std::fmt::Display) -> Self {
        Problem(e.to_string())
    }
}

/// One check's outcome. Also the stable `--json` shape.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// What was found, or why the check failed.
    pub detail: String,
}

impl Check {
    fn new(name: &'static str, r: Result<String, Problem>) -> Self {
        match r {
            Ok(detail) => Check {
                name,
                ok: true,
                detail,
            },
            Err(Problem(detail)) => Check {
                name,
                ok: false,
                detail,
            },
        }
    }
}

pub async fn run(home: &Home, settings: &Settings) -> Vec<Check> {
    let db = {
        let (home, settings) = (home.clone(), settings.clone());
        let timeout = Duration::from_millis(settings.store.busy_timeout_ms);
        tokio::task::spawn_blocking(move || check_database(&home, &settings, timeout))
            .await
            .unwrap_or_else(|e| Err(Problem::from_error(e)))
    };
    let claude = {
        let (home, settings) = (home.clone(), settings.clone());
        tokio::task::spawn_blocking(move || check_claude(&home, &settings))
            .await
            .unwrap_or_else(|e| Err(Problem::from_error(e)))
    };
    vec![
        Check::new("database", db),
        Check::new("folders", check_folders(home)),
        Check::new("docker", check_docker().await),
        Check::new("claude-code", claude),
        Check::new("model", check_model(home, settings)),
        Check::new("embeddings", {
            let (root, m) = (home.root().to_path_buf(), settings.memory.clone());
            tokio::task::spawn_blocking(move || check_embeddings(&root, &m))
                .await
                .unwrap_or_else(|e| Err(Problem::from_error(e)))
        }),
        Check::new("speech", {
            let (root, m) = (home.root().to_path_buf(), settings.media.clone());
            tokio::task::spawn_blocking(move || check_speech(&root, &m))
                .await
                .unwrap_or_else(|e| Err(Problem::from_error(e)))
        }),
        Check::new("image", check_image(settings).await),
        Check::new("disk", check_disk(home, settings).await),
        Check::new("telegram", check_telegram(home, settings).await),
        Check::new("whatsapp", check_whatsapp(home, settings).await),
        Check::new("discord", check_discord(home, settings).await),
        Check::new("slack", check_slack(home, settings).await),
        Check::new("secrets", check_secrets(home, settings)),
    ]
}

/// Each group's disk use against its quota, and the host's free space
/// against its reserve; a group over its quota (or a host below its
/// reserve) fails the check.
async fn check_disk(home: &Home, settings: &Settings) -> Result<String, Problem> {
    let (home, settings) = (home.clone(), settings.clone());
    tokio::task::spawn_blocking(move || {
        const MB: u64 = 1024 * 1024;
        if default_sqlite(&settings.store.url) && !home.db_path().exists() {
            return Ok("no groups yet (no database)".to_string());
        }
        let store = crate::store::Store::open_url(
            &settings.store.url,
            &home.db_path(),
            Duration::from_millis(settings.store.busy_timeout_ms),
        )
        .map_err(Problem::from_error)?;
        let groups = store
            .read_blocking(crate::store::groups::list)
            .map_err(Problem::from_error)?;
        let free = crate::container::disk::host_free_bytes(&home);
        let mut parts = vec![format!(
            "{} MB free (reserve {} MB)",
            free / MB,
            settings.container.disk_reserve_mb
        )];
        parts.push(quota_enforcement(&home, &settings));
        let mut over = Vec::new();
        for g in &groups {
            let u = crate::container::disk::measure(&home, &settings.container, g)
                .map_err(Problem::from_error)?;
            parts.push(format!(
                "{} {}/{} MB, {}/{} files",
                g.folder,
                u.used_bytes.div_ceil(MB),
                u.quota_bytes / MB,
                u.entries,
                u.max_entries
            ));
            if let Some(why) = u.refusal() {
                over.push(format!("{}: {why}", g.folder));
            }
        }
        if over.is_empty() {
            Ok(parts.join(", "))
        } else {
            Err(Problem(over.join("; ")))
        }
    })
    .await
    .unwrap_or_else(|e| Err(Problem::from_error(e)))
}

/// Files holding a credential must be readable by their owner only (no
/// container sees them either way: `container::project`).
fn check_secrets(home: &Home, settings: &Settings) -> Result<String, Problem> {
    let problems = crate::gateway::credentials::exposed(home, settings);
    if !problems.is_empty() {
        return Err(Problem(problems.join("; ")));
    }
    let held = crate::gateway::credentials::all(home.root(), settings).len();
    Ok(format!(
        "{held} credential{} held; none in a file others can read, none in a container",
        if held == 1 { "" } else { "s" }
    ))
}

/// Who enforces the groups' quotas: the kernel's project quotas where the
/// filesystem holding the groups has them, else g2's own counting (within
/// its CPU share), and whether that sees files deleted while held open.
fn quota_enforcement(home: &Home, settings: &Settings) -> String {
    let counting = format!(
        "g2 counts each group's files itself (at most {} % of a core)",
        settings.container.disk_cpu_percent
    );
    let who = match crate::container::disk::project_quotas(&home.groups_dir()) {
        Some((fs, mount, true)) => format!(
            "{fs} on {mount} has project quotas (the kernel could enforce them; {counting})"
        ),
        Some((fs, mount, false)) => {
            format!("no project quotas on {fs} at {mount}: {counting}")
        }
        None => format!("the filesystem of the groups is unknown: {counting}"),
    };
    // Whatever enforces the quotas, only g2's count sees this.
    let held = crate::container::disk::Sight::of_self().describe();
    format!("{who}; {held}")
}

/// The agent image. Missing is not a failure: `g2 run` builds it on first
/// use.
async fn check_image(settings: &Settings) -> Result<String, Problem> {
    let attempt = async {
        let docker = bollard::Docker::connect_with_defaults()
            .ok()?
            .negotiate_version()
            .await
            .ok()?;
        let img = docker.inspect_image(&settings.container.image).await.ok();
        Some(match img {
            Some(i) => format!(
                "{} ({} MB, built {}, inputs {})",
                settings.container.image,
                i.size.unwrap_or(0) / 1_000_000,
                i.created.unwrap_or_default().get(..19).unwrap_or(""),
                i.config
                    .and_then(|c| c.labels)
                    .and_then(|l| l.get(crate::container::image::INPUTS_LABEL).cloned())
                    .unwrap_or_default()
                    .get(..12)
                    .unwrap_or("?")
            ),
            None => format!(
                "{} not built yet: `g2 image build` (`g2 run` builds it on first use)",
                settings.container.image
            ),
        })
    };
    match tokio::time::timeout(Duration::from_secs(10), attempt).await {
        Ok(Some(s)) => Ok(s),
        _ => Ok("unknown: no Docker engine answers".into()),
    }
}

/// Which provider the gateway would use, and from where the credential
/// comes (never its value).
/// The Telegram channel: off, or its token checked with `getMe`.
async fn check_telegram(home: &Home, settings: &Settings) -> Result<String, Problem> {
    use crate::channels::telegram;
    let tg = &settings.channels.telegram;
    if !tg.enabled {
        return Ok("not enabled ([channels.telegram] enabled = false)".into());
    }
    let token = telegram::token(home.root()).ok_or_else(|| {
        Problem(format!(
            "enabled, but {} is not set (in the environment or {{home}}/.env)",
            telegram::TOKEN_VARIABLE
        ))
    })?;
    let bot =
        telegram::client(tg, &token, telegram::REQUEST_TIMEOUT).map_err(Problem::from_error)?;
    let check = tokio::time::timeout(Duration::from_secs(15), telegram::identify(&bot));
    match check.await {
        Ok(Ok(me)) => Ok(format!(
            "bot @{} (id {}) at {}",
            me.username, me.id, tg.api_url
        )),
        Ok(Err(why)) => Err(Problem(format!("getMe at {} failed: {why}", tg.api_url))),
        Err(_) => Err(Problem(format!(
            "getMe at {} did not answer in 15 s",
            tg.api_url
        ))),
    }
}

/// The WhatsApp channel: off, or its credentials all set and the access
/// token and number checked with the Graph API.
async fn check_whatsapp(home: &Home, settings: &Settings) -> Result<String, Problem> {
    use crate::channels::whatsapp::{Credentials, Graph};
    let wa = &settings.channels.whatsapp;
    if !wa.enabled {
        return Ok("not enabled ([channels.whatsapp] enabled = false)".into());
    }
    let credentials = Credentials::find(home.root()).map_err(|missing| {
        Problem(format!(
            "enabled, but {} not set (in the environment or {{home}}/.env)",
            missing.join(", ")
        ))
    })?;
    let graph = Graph::new(wa, credentials.access_token).map_err(Problem::from_error)?;
    match tokio::time::timeout(Duration::from_secs(15), graph.identify()).await {
        Ok(Ok(me)) => Ok(format!(
            "number {} ({}) at {}",
            me.display_phone_number, me.verified_name, wa.graph_url
        )),
        Ok(Err(why)) => Err(Problem(format!(
            "the number's lookup at {} failed: {why}",
            wa.graph_url
        ))),
        Err(_) => Err(Problem(format!("{} did not answer in 15 s", wa.graph_url))),
    }
}

/// The Discord channel: off, or its token checked with `users/@me` and
/// the application's Message Content intent with `applications/@me`.
async fn check_discord(home: &Home, settings: &Settings) -> Result<String, Problem> {
    use crate::channels::discord::{self, Rest};
    let dc = &settings.channels.discord;
    if !dc.enabled {
        return Ok("not enabled ([channels.discord] enabled = false)".into());
    }
    let token = discord::token(home.root()).ok_or_else(|| {
        Problem(format!(
            "enabled, but {} is not set (in the environment or {{home}}/.env)",
            discord::TOKEN_VARIABLE
        ))
    })?;
    let rest = Rest::new(dc, token).map_err(Problem::from_error)?;
    let asked = async {
        Ok::<_, discord::rest::Failure>((rest.me().await?, rest.application_flags().await?))
    };
    match tokio::time::timeout(Duration::from_secs(15), asked).await {
        Ok(Ok((me, flags))) => {
            // GATEWAY_MESSAGE_CONTENT or its limited form (under 100 servers).
            if flags & (1 << 18 | 1 << 19) == 0 {
                return Err(Problem(format!(
                    "bot {} (id {}): the Message Content intent is off; switch it on under Bot, \
                     Privileged Gateway Intents, in the Developer Portal",
                    me.username, me.id
                )));
            }
            Ok(format!(
                "bot {} (id {}) at {}",
                me.username, me.id, dc.api_url
            ))
        }
        Ok(Err(why)) => Err(Problem(match why {
            discord::rest::Failure::Api(e) if e.status == 401 => format!(
                "Discord refused the bot token ({e}); check {}",
                discord::TOKEN_VARIABLE
            ),
            other => format!("users/@me at {} failed: {other}", dc.api_url),
        })),
        Err(_) => Err(Problem(format!("{} did not answer in 15 s", dc.api_url))),
    }
}

/// The Slack channel: off, or both tokens set and checked with Slack
/// (`auth.test` with the bot token, `apps.connections.open` with the app
/// token; the URL it answers is never used).
async fn check_slack(home: &Home, settings: &Settings) -> Result<String, Problem> {
    use crate::channels::slack::{Credentials, WebApi};
    let sl = &settings.channels.slack;
    if !sl.enabled {
        return Ok("not enabled ([channels.slack] enabled = false)".into());
    }
    let credentials = Credentials::find(home.root()).map_err(|why| {
        Problem(format!(
            "enabled, but {why} (in the environment or {{home}}/.env)"
        ))
    })?;
    let api = WebApi::new(sl).map_err(Problem::from_error)?;
    let limit = Duration::from_secs(15);
    let late = || Problem(format!("{} did not answer in 15 s", sl.api_url));
    let me = tokio::time::timeout(limit, api.identify(&credentials.bot_token))
        .await
        .map_err(|_| late())?
        .map_err(|why| Problem(format!("auth.test at {} failed: {why}", sl.api_url)))?;
    tokio::time::timeout(limit, api.open(&credentials.app_token))
        .await
        .map_err(|_| late())?
        .map_err(|why| {
            Problem(format!(
                "apps.connections.open at {} failed: {why}",
                sl.api_url
            ))
        })?;
    Ok(format!(
        "bot @{} ({}) in team {}; the app token opens Socket Mode at {}",
        me.user, me.user_id, me.team_id, sl.api_url
    ))
}

fn check_model(home: &Home, settings: &Settings) -> Result<String, Problem> {
    let choice =
        crate::gateway::choose(&settings.gateway, home.root()).map_err(Problem::from_error)?;
    Ok(match &settings.gateway.model {
        Some(m) => format!("{}; model pinned to {m}", choice.reason),
        None => choice.reason,
    })
}

/// The embedding model: where, how many dimensions, and a self-test (a
/// question nearer its paraphrase than an unrelated line); or what is
/// missing, and that recall is lexical meanwhile.
fn check_embeddings(
    root: &Path,
    settings: &crate::config::MemorySettings,
) -> Result<String, Problem> {
    use crate::memory::embed::{Loaded, load};
    let m = match load(root, settings) {
        Loaded::Off => return Ok("off (memory.embeddings = \"off\"): recall is lexical".into()),
        Loaded::Failed(why) => return Err(Problem(format!("{why}; recall is lexical"))),
        Loaded::Model(m) => m,
    };
    let t = std::time::Instant::now();
    let v = m
        .embedder
        .embed(&[
            "where is the yacht kept?",
            "the boat is moored at pier 7",
            "I baked bread",
        ])
        .map_err(Problem::from_error)?;
    let ms = t.elapsed().as_millis();
    let (near, far) = (g2_embed::dot(&v[0], &v[1]), g2_embed::dot(&v[0], &v[2]));
    if near <= far {
        return Err(Problem(format!(
            "{}: self-test failed (paraphrase {near:.2} <= unrelated {far:.2})",
            m.embedder.dir().display()
        )));
    }
    Ok(format!(
        "{} at {}, {} dimensions; self-test passed in {ms} ms (paraphrase {near:.2}, unrelated {far:.2})",
        m.name,
        m.embedder.dir().display(),
        m.embedder.dims()
    ))
}

/// The speech model voice notes are transcribed with: where, and that it
/// loads; or what is missing (voice notes are then kept, not transcribed).
fn check_speech(root: &Path, settings: &crate::config::MediaSettings) -> Result<String, Problem> {
    if !settings.transcribe {
        return Ok("off (media.transcribe = false): voice notes are kept, not transcribed".into());
    }
    let Some(dir) = crate::media::speech::find(root, settings) else {
        return Err(Problem(format!(
            "no speech model at {} (run scripts/setup.sh, or set media.speech_model): voice notes are kept, not transcribed",
            crate::media::speech::DEFAULT_MODEL
        )));
    };
    let t = std::time::Instant::now();
    g2_speech::Transcriber::load(&dir).map_err(|e| {
        Problem(format!(
            "the speech model at {} does not load ({e}): voice notes are kept, not transcribed",
            dir.display()
        ))
    })?;
    Ok(format!(
        "Whisper tiny.en at {}; loaded in {} ms",
        dir.display(),
        t.elapsed().as_millis()
    ))
}

/// The store is the home's own SQLite file (`sqlite:`), which `g2 init`
/// makes: doctor says it is missing rather than creating it.
fn default_sqlite(url: &str) -> bool {
    matches!(
        crate::store::Backend::of(url),
        Ok(crate::store::Backend::Sqlite(None))
    )
}

fn check_database(home: &Home, settings: &Settings, timeout: Duration) -> Result<String, Problem> {
    let url = &settings.store.url;
    let name = home.store_name(&settings.store.url);
    let path = home.db_path();
    if default_sqlite(url) && !path.exists() {
        return Err(Problem(format!(
            "{} does not exist; run `g2 init`",
            path.display()
        )));
    }
    let store = crate::store::Store::open_url(url, &path, timeout).map_err(Problem::from_error)?;
    let (check, version): (String, i64) = store
        .read_blocking(crate::store::quick_check)
        .map_err(Problem::from_error)?;
    if check != "ok" {
        return Err(Problem(format!("{name}: integrity check says {check}")));
    }
    Ok(format!("{name} (schema version {version})"))
}

fn check_folders(home: &Home) -> Result<String, Problem> {
    let mut missing = Vec::new();
    for dir in [home.groups_dir(), home.data_dir()] {
        if !dir.is_dir() {
            missing.push(dir.display().to_string());
        }
    }
    // Looked at beneath the group's folder, without following a link.
    for f in ["main", "global"] {
        let memory = g2_core::confined::Dir::open_beneath(&home.groups_dir(), f.as_ref(), false)
            .and_then(|d| d.kind("CLAUDE.md"));
        if !matches!(memory, Ok(Some(g2_core::confined::Kind::File))) {
            missing.push(
                home.groups_dir()
                    .join(f)
                    .join("CLAUDE.md")
                    .display()
                    .to_string(),
            );
        }
    }
    if !missing.is_empty() {
        return Err(Problem(format!(
            "missing {}; run `g2 init`",
            missing.join(", ")
        )));
    }
    let probe = home
        .data_dir()
        .join(format!(".doctor-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        Problem(format!(
            "{} is not writable: {e}",
            home.data_dir().display()
        ))
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(format!(
        "{} (groups/, data/ writable)",
        home.root().display()
    ))
}

async fn check_docker() -> Result<String, Problem> {
    let attempt = async {
        let docker = bollard::Docker::connect_with_defaults().map_err(Problem::from_error)?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(Problem::from_error)?;
        let v = docker.version().await.map_err(Problem::from_error)?;
        Ok::<_, Problem>(format!(
            "Docker Engine {} (API {})",
            v.version.unwrap_or_default(),
            v.api_version.unwrap_or_default()
        ))
    };
    match tokio::time::timeout(Duration::from_secs(10), attempt).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(Problem(format!(
            "no Docker engine answers ({e}); run scripts/setup.sh"
        ))),
        Err(_) => Err(Problem(
            "the Docker engine did not answer within 10 s".into(),
        )),
    }
}

/// Where the `claude` executable is: the configured path, else
/// `tools/claude-code` under the home or above the running binary (a build
/// in the project's `target/`), else `claude` on `PATH`.
pub fn find_claude(home: &Home, settings: &Settings) -> Option<PathBuf> {
    if let Some(p) = &settings.claude_code.path {
        return Some(p.clone());
    }
    let rel = Path::new("tools/claude-code/node_modules/.bin/claude");
    crate::home::install_roots(home.root())
        .into_iter()
        .map(|r| r.join(rel))
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("claude"))
                    .find(|p| p.is_file())
            })
        })
}

fn check_claude(home: &Home, settings: &Settings) -> Result<String, Problem> {
    let want = crate::CLAUDE_CODE_VERSION.trim();
    let path = find_claude(home, settings).ok_or_else(|| {
        Problem(format!(
            "Claude Code {want} not found; run scripts/setup.sh"
        ))
    })?;
    let out = std::process::Command::new(&path)
        .arg("--version")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .map_err(|e| Problem(format!("{} does not run: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let have = text.split_whitespace().next().unwrap_or("");
    if !out.status.success() || have.is_empty() {
        return Err(Problem(format!(
            "{} --version failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    if have != want {
        return Err(Problem(format!(
            "{} is Claude Code {have}; g2 is pinned to {want} (run scripts/setup.sh)",
            path.display()
        )));
    }
    Ok(format!("Claude Code {have} at {}", path.display()))
}
