#!/usr/bin/env bash
# Runs every test of g2: sets the machine up first (Docker engine, busybox,
# the pinned Claude Code), then the whole workspace's tests. Extra arguments
# go to `cargo test` (e.g. a test name filter). Each step says what it does
# on stderr; setup is skipped when its stamp says nothing changed
# (scripts/setup.sh), except with CI=true: then every step runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "test.sh: $*" >&2; }
if [ "${CI:-}" = true ]; then export G2_SETUP_FULL=1; fi
bash scripts/setup.sh
unset G2_SETUP_FULL
# A CI run builds once from a fresh clone: incremental caches would only
# take disk (several GB; docs/development.md, "Build size").
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
if [ ! -d "${CARGO_TARGET_DIR:-$root/target}/debug/deps" ]; then
  say "first build: about 25 minutes on 2 cores (cargo's progress follows; the whole run about 30)"
fi
# Fast checks first: the tree stays formatted and free of clippy and
# rustdoc warnings.
say "cargo fmt --check"
cargo fmt --all --check
say "clippy, every target, warnings are errors"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The docs build without a broken or private link.
say "rustdoc, warnings are errors"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
say "cargo test (the integration suite takes about 12 minutes)"
exec cargo test --workspace --locked "$@"
