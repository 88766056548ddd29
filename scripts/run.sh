#!/usr/bin/env bash
# Runs the g2 host from this checkout: sets the machine up, builds g2 in
# release mode, initialises the home (this folder, unless G2_HOME says
# otherwise) and runs `g2 ARGS…`. Default: `g2 doctor`, the agent image
# (rebuilt only when its inputs changed), then `g2 serve`: the host on
# 127.0.0.1:4170 (on the built-in offline model when no ANTHROPIC_API_KEY
# is set). Talk to it with `scripts/run.sh chat main`.
#
# Each step says what it does on stderr. When nothing changed, nothing is
# set up or built again: setup keeps a stamp (scripts/setup.sh) and cargo
# runs only when a source file is newer than the last build.
#
# Environment: G2_HOME (the home), G2_PROFILE=debug (build and run
# target/debug/g2: quicker to build, slower to run), G2_BIN=PATH (run
# that g2 and build nothing for it), CARGO_TARGET_DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "run.sh: $*" >&2; }

# Only the host, `g2 run` and the image build use the Docker engine.
case "${1:-serve}" in serve | run | image) engine=1 ;; *) engine=0 ;; esac
G2_SETUP_ENGINE=$engine bash scripts/setup.sh

target="${CARGO_TARGET_DIR:-$root/target}"
case "${G2_PROFILE:-release}" in
  release) profile=(--release) dir=release ;;
  debug) profile=() dir=debug ;;
  *) say "G2_PROFILE is release or debug, not '$G2_PROFILE'"; exit 2 ;;
esac
g2="$target/$dir/g2"
# The agent image's runner: static, always optimised, built exactly as
# `g2 image build` would (host/src/container/image.rs, build_agent), so
# the image build reuses it.
agent_target=x86_64-unknown-linux-gnu
agent="$target/$agent_target/release/g2-agent"
image_args=(--agent "$agent")

# Everything the binaries are built from (include_str! reaches the
# Dockerfile, container/ and CLAUDE_CODE_VERSION); a removed file changes
# its folder's time.
inputs=(Cargo.toml Cargo.lock Dockerfile CLAUDE_CODE_VERSION container migrations
  core settings store embed speech host agent-runner)
for f in .cargo rust-toolchain rust-toolchain.toml; do [ -e "$f" ] && inputs+=("$f"); done
# The stamp holds what else a build depends on; its time is when the last
# successful build began.
stamp="$target/$dir/.run-stamp"
key="$dir ${RUSTFLAGS:-} $(rustc -V 2>/dev/null || true)"
up_to_date() {
  [ -x "$g2" ] && [ -x "$agent" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] || return 1
  local newer
  newer="$(find "${inputs[@]}" -newer "$stamp" -print -quit)" || return 1
  [ -z "$newer" ]
}

if [ -n "${G2_BIN:-}" ]; then
  g2="$G2_BIN"
  image_args=()
  say "build: none (G2_BIN=$g2)"
elif up_to_date; then
  say "build: up to date (no source changed since the last build)"
else
  if [ ! -x "$g2" ]; then
    if [ "$dir" = release ]; then
      say "first build: about 15 minutes on 2 cores (cargo's progress follows)"
    else
      say "first build: about 10 minutes on 2 cores (cargo's progress follows)"
    fi
  fi
  mkdir -p "$target/$dir"
  echo "$key" >"$stamp.new"
  say "build: g2 ($dir)"
  cargo build "${profile[@]}" --locked -p g2-host
  say "build: the static g2-agent for the agent image (release, --target $agent_target)"
  # With an explicit --target these flags reach only target crates, not
  # build scripts or proc macros.
  RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked -p g2-agent --target "$agent_target"
  mv "$stamp.new" "$stamp"
fi

export G2_HOME="${G2_HOME:-$root}"
"$g2" init >/dev/null
if [ "$#" -eq 0 ]; then
  say "checking this machine (g2 doctor)"
  "$g2" doctor || true
  say "agent image: built only when its inputs changed"
  "$g2" image build "${image_args[@]}"
  say "starting the host (g2 serve); it says when it is ready"
  exec "$g2" serve
else
  exec "$g2" "$@"
fi
