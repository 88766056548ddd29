#!/usr/bin/env bash
# Runs every test of g2: sets the machine up first (Docker engine, busybox,
# the pinned Claude Code), then the whole workspace's tests. Extra arguments
# go to `cargo test` (e.g. a test name filter).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# A CI run builds once from a fresh clone: incremental caches would only
# take disk (several GB; docs/development.md, "Build size").
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
# Fast checks first: the tree stays formatted and free of clippy and
# rustdoc warnings.
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The docs build without a broken or private link.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
exec cargo test --workspace --locked "$@"
