#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/) for a number of executions and
# prints executions, time and crashes per target.
#
#   scripts/fuzz.sh [EXECUTIONS] [TARGET...]     default: 10000000, every target
#
# FUZZ_JOBS=2 runs two targets at a time. Each target starts from its
# committed corpus (fuzz/corpus/<target>/, read only) and keeps what it finds
# in fuzz/work/<target>/ (git-ignored); a crash is written to
# fuzz/artifacts/<target>/ and ends that target's run. FUZZ_MINIMIZE=1 merges
# the findings back into the committed corpus afterwards (`cargo fuzz cmin`).
#
# The toolchain is stable: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z
# flags. No sanitizer: the parsers are safe Rust, what the fuzzer looks for
# is a panic (or an abort, a hang, runaway memory), which libFuzzer catches
# without one, at about twice the speed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"
runs="${1:-10000000}"
shift || true
export RUSTC_BOOTSTRAP=1
flags=(--sanitizer none)

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build "${flags[@]}"

mkdir -p work logs
one() {
    local t="$1" log="logs/$1.log" before crashes execs secs
    mkdir -p "work/$t" "artifacts/$t"
    before=$(find "artifacts/$t" -type f | wc -l)
    # -rss_limit_mb and -timeout turn runaway memory and hangs into findings.
    # Inputs stay at most 1 KiB: no parser's logic depends on size beyond
    # what a small input reaches (the transcript target scales its line
    # limit down to 0-252 bytes), and small inputs run many times faster.
    cargo fuzz run "${flags[@]}" "$t" "work/$t" "corpus/$t" -- \
        -runs="$runs" -max_len=1024 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1 || true
    crashes=$(( $(find "artifacts/$t" -type f | wc -l) - before ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    printf '%-14s executions %12s  seconds %6s  crashes %s\n' "$t" "${execs:-0}" "${secs:-?}" "$crashes"
}

jobs_max="${FUZZ_JOBS:-1}"
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    one "$t" &
done
wait

if [ "${FUZZ_MINIMIZE:-0}" = 1 ]; then
    for t in "${targets[@]}"; do
        find "work/$t" -type f -exec cp -n -t "corpus/$t" {} +
        cargo fuzz cmin "${flags[@]}" "$t" "corpus/$t" -- -max_len=1024 -set_cover_merge=1 >"logs/$t.cmin.log" 2>&1
    done
fi
