#!/usr/bin/env bash
# Instructions per simulated I/O on corsair_nova (README, "Instructions per
# simulated I/O on corsair_nova by commit"): builds the release binary, runs
# it under callgrind with `--set job.size=512m` and `--set job.size=1g`, and
# prints (instructions at 1g - instructions at 512m) / 131,072, the I/Os the
# second run adds (setup and report cancel out), and the events handled per
# simulated I/O by the same difference. Then times uninstrumented runs at 1g
# and prints simulated I/Os per wall-second (median of REPEAT).
#
# Usage: scripts/bench_instructions.sh [REPEAT]   (default 3)
# Needs: cargo, valgrind, bc. The instruction count does not depend on the
# machine's load; the wall-clock figure does: run it on an idle machine.
# Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-3}
SC=scenarios/corsair_nova.toml
cargo build --release --bin sim >/dev/null 2>&1 || cargo build --release --bin sim
SIM=${CARGO_TARGET_DIR:-target}/release/sim
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

instr() {
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$1" \
    "$SIM" run "$SC" --set job.size="$1" >/dev/null 2>"$TMP/err.$1"
  grep -h "Collected" "$TMP/err.$1" | awk '{print $NF}'
}
# Events handled: the run's stderr line `[name] N events in ...`.
events() {
  "$SIM" run "$SC" --set job.size="$1" 2>&1 >/dev/null | grep -o '[0-9]* events in' | awk '{print $1}'
}
a=$(instr 512m)
b=$(instr 1g)
echo "instructions: 512m ${a}, 1g ${b}"
echo "per simulated I/O: $(echo "($b - $a) / 131072" | bc -l | xargs printf '%.1f')"
ea=$(events 512m)
eb=$(events 1g)
echo "events: 512m ${ea}, 1g ${eb}; per simulated I/O: $(echo "($eb - $ea) / 131072" | bc -l | xargs printf '%.2f')"

median() { sort -g | awk '{a[NR]=$1} END {m=(NR+1)/2; if (m==int(m)) print a[m]; else print (a[int(m)]+a[int(m)+1])/2}'; }
for i in $(seq "$REPEAT"); do
  t0=$(date +%s.%N)
  "$SIM" run "$SC" --set job.size=1g >"$TMP/out.$i" 2>/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l >>"$TMP/wall"
done
# Simulated I/Os: the job's `issued rwts: total=R,W,...`.
ios=$(grep -o 'issued rwts: total=[0-9]*,[0-9]*' "$TMP/out.1" | sed 's/.*=//' | awk -F, '{s+=$1+$2} END {print s}')
wall=$(median <"$TMP/wall")
printf "%s simulated I/Os in %.3f s (median of %s): %.3f M simulated I/Os per wall-second\n" \
  "$ios" "$wall" "$REPEAT" "$(echo "$ios / $wall / 1000000" | bc -l)"
