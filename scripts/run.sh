#!/usr/bin/env bash
# Runs the g2 host from this checkout: sets the machine up, builds g2 in
# release mode, initialises the home (this folder, unless G2_HOME says
# otherwise) and runs `g2 ARGS…`. Default: `g2 doctor`, the agent image
# (rebuilt only when its inputs changed), then `g2 serve`: the host on
# 127.0.0.1:4170 (on the built-in offline model when no ANTHROPIC_API_KEY
# is set). Talk to it with `scripts/run.sh chat main`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cargo build --release --locked -q -p g2-host -p g2-agent
export G2_HOME="${G2_HOME:-$root}"
g2="$root/target/release/g2"
"$g2" init >/dev/null
if [ "$#" -eq 0 ]; then
  "$g2" doctor || true
  echo
  "$g2" image build
  exec "$g2" serve
else
  exec "$g2" "$@"
fi
