#!/usr/bin/env bash
# Benchmark: `sim trace dump` versus blkparse on the same >= 100 MB capture.
#
#   scripts/bench_trace_dump.sh [RECORDS]      (default 2,500,000 records)
#
# Synthesises a blktrace v7 capture (two CPUs interleaved in 64-record
# chunks, realistic A/Q/G/P/U/I/D/C life cycles) with the synth_capture
# example, checks that both tools print byte-identical output, then times
# `blkparse -q -i - -f '%M,%m,%c,%T.%t,%a,%d,%S,%N\n' < CAPTURE` and
# `sim trace dump CAPTURE` (best of 3, output to /dev/null) and reports the
# speedup and peak RSS. Wall-clock figures only; needs blkparse
# (apt-get install blktrace). Falls back to the trace_dump example (the same
# library code path) if the full `sim` binary does not build.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-2500000}
WORK=${BENCH_DIR:-$(mktemp -d)}
FMT='%M,%m,%c,%T.%t,%a,%d,%S,%N\n'

command -v blkparse >/dev/null || { echo "blkparse not found: apt-get install blktrace" >&2; exit 2; }
cargo build --release -q -p blocksim-traces --example synth_capture --example trace_dump
TD=target/release/examples/trace_dump
if cargo build --release -q --bin sim 2>/dev/null; then
    DUMP=(target/release/sim trace dump)
else
    echo "note: sim does not build; timing the trace_dump example (same code path)" >&2
    DUMP=("$TD")
fi

CAP="$WORK/bench.blktrace"
target/release/examples/synth_capture "$CAP" "$RECORDS"
SIZE=$(stat -c %s "$CAP")
echo "capture: $CAP, $SIZE bytes, $RECORDS records"

blkparse -q -i - -f "$FMT" < "$CAP" > "$WORK/blkparse.csv"
"${DUMP[@]}" "$CAP" > "$WORK/sim.csv" 2>/dev/null
if cmp -s "$WORK/blkparse.csv" "$WORK/sim.csv"; then
    echo "outputs identical ($(wc -l < "$WORK/sim.csv") lines)"
else
    echo "OUTPUTS DIFFER" >&2; cmp "$WORK/blkparse.csv" "$WORK/sim.csv" | head -3 >&2; exit 1
fi
rm -f "$WORK/blkparse.csv" "$WORK/sim.csv"

best() { # best wall time of 3 runs of "$@", stdout to /dev/null
    local b=999999
    for _ in 1 2 3; do
        local s e
        s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N)
        b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{ print ($1 < b) ? $1 : b }')
    done
    echo "$b"
}
bp() { blkparse -q -i - -f "$FMT" < "$CAP"; }
T_BP=$(best bp)
T_SIM=$(best "${DUMP[@]}" "$CAP")
echo "blkparse: ${T_BP} s"
echo "sim trace dump: ${T_SIM} s"
awk -v a="$T_BP" -v b="$T_SIM" 'BEGIN { printf "speedup: %.1fx (target >= 5x)\n", a / b }'
if [ -x /usr/bin/time ]; then
    RSS_BP=$( { /usr/bin/time -f %M bash -c "blkparse -q -i - -f '$FMT' < '$CAP' > /dev/null" ; } 2>&1 | tail -1)
    RSS_SIM=$( { /usr/bin/time -f %M "${DUMP[@]}" "$CAP" > /dev/null ; } 2>&1 | tail -1)
    echo "peak RSS: blkparse ${RSS_BP} KiB, sim ${RSS_SIM} KiB"
fi
[ -z "${BENCH_DIR:-}" ] && rm -rf "$WORK"
