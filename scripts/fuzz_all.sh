#!/usr/bin/env bash
# Runs every cargo-fuzz target for RUNS executions (default 1,000,000), one
# after another, without a sanitizer and optimised (-O -s none: the code is
# safe Rust, so the sanitizer mostly slows it down), and prints one line per
# target. Needs a nightly toolchain and `cargo install cargo-fuzz`.
# Usage: scripts/fuzz_all.sh [RUNS]
set -euo pipefail
runs="${1:-1000000}"
cd "$(dirname "$0")/../fuzz"
logdir="target/fuzz-logs"
mkdir -p "$logdir"
status=0
for t in scenario_toml set_expr fio_job autodetect blkparse_text blktrace csv_formats ftrace_blk iolog vscsi oracle_general; do
  start=$(date +%s)
  if cargo +nightly fuzz run -O -s none "$t" -- -runs="$runs" -rss_limit_mb=2048 -max_len=65536 \
      > "$logdir/$t.log" 2>&1; then
    result=$(grep -E '^Done [0-9]+ runs' "$logdir/$t.log" | tail -1)
  else
    result="FAILED (see fuzz/$logdir/$t.log and fuzz/artifacts/$t/)"
    status=1
  fi
  echo "$t: $result ($(( $(date +%s) - start )) s wall)"
done
exit "$status"
