#!/usr/bin/env bash
# The at-scale benchmark (README, "At scale: the benchmark"): runs
# scenarios/scale_64cpu_8nvme.toml (64 CPUs, 8 NVMe drives with per-CPU
# queues and per-CPU accounting, 64 libaio jobs) and prints, as medians of
# REPEAT runs, the wall time, events per second, simulated I/Os per
# wall-second and peak memory; then times `sim sweep` over it (4 points)
# with -j 1 and -j 2, interleaved, and prints the speed-up and the
# speed-up per core, and checks that both sweeps wrote the same CSV.
# With valgrind installed it also counts the run's instructions under
# callgrind (stable whatever the machine's load; ~30 s): in all, per event
# and per simulated I/O.
#
# Usage: scripts/bench_scale.sh [REPEAT]   (default 5)
# Needs: cargo, GNU time (/usr/bin/time). Wall-clock figures vary with the
# machine's load: run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-5}
SC=scenarios/scale_64cpu_8nvme.toml
cargo build --release --bin sim >/dev/null 2>&1 || cargo build --release --bin sim
SIM=target/release/sim
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {m=(NR+1)/2; if (m==int(m)) print a[m]; else print (a[int(m)]+a[int(m)+1])/2}'; }

for i in $(seq "$REPEAT"); do
  /usr/bin/time -f "%e %M" -o "$TMP/time.$i" "$SIM" run "$SC" >"$TMP/out.$i" 2>"$TMP/err.$i"
  events=$(grep -o '[0-9]* events in' "$TMP/err.$i" | awk '{print $1}')
  # Simulated I/Os: every job's `issued rwts: total=R,W,...`.
  ios=$(grep -o 'issued rwts: total=[0-9]*,[0-9]*' "$TMP/out.$i" | sed 's/.*=//' | awk -F, '{s+=$1+$2} END {print s}')
  read -r wall rss_kb <"$TMP/time.$i"
  echo "$wall $events $ios $rss_kb" >>"$TMP/runs"
done
cmp -s "$TMP/out.1" "$TMP/out.$REPEAT" || { echo "runs differ: not deterministic" >&2; exit 1; }
wall=$(awk '{print $1}' "$TMP/runs" | median)
events=$(awk '{print $2}' "$TMP/runs" | head -1)
ios=$(awk '{print $3}' "$TMP/runs" | head -1)
rss=$(awk '{print $4}' "$TMP/runs" | median)
echo "== $SC, median of $REPEAT runs =="
echo "wall ${wall} s; ${events} events, $(echo "$events / $wall / 1000000" | bc -l | xargs printf '%.2f') M events/s"
echo "${ios} simulated I/Os, $(echo "$ios / $wall / 1000000" | bc -l | xargs printf '%.3f') M simulated I/Os per wall-second"
echo "peak RSS $(echo "$rss / 1024" | bc -l | xargs printf '%.1f') MiB"

echo "== sim sweep over job.iodepth=4,8,16,32 at -j 1 and -j 2 (interleaved, $REPEAT pairs) =="
for i in $(seq "$REPEAT"); do
  for j in 1 2; do
    t0=$(date +%s.%N)
    "$SIM" sweep "$SC" --set job.iodepth=4,8,16,32 --out "$TMP/sweep.$j.csv" --overwrite -j "$j" >/dev/null 2>&1
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l >>"$TMP/sweep.$j"
  done
done
cmp -s "$TMP/sweep.1.csv" "$TMP/sweep.2.csv" || { echo "sweep CSVs differ between -j 1 and -j 2" >&2; exit 1; }
t1=$(median <"$TMP/sweep.1")
t2=$(median <"$TMP/sweep.2")
speedup=$(echo "$t1 / $t2" | bc -l)
printf -- "-j 1: %.2f s; -j 2: %.2f s; speed-up %.2fx, %.2f per core; CSVs identical\n" "$t1" "$t2" "$speedup" "$(echo "$speedup / 2" | bc -l)"

if command -v valgrind >/dev/null 2>&1; then
  echo "== instructions (callgrind, one run) =="
  instr=$(valgrind --tool=callgrind --callgrind-out-file="$TMP/cg" "$SIM" run "$SC" 2>&1 >/dev/null |
    grep -o 'Collected : [0-9]*' | awk '{print $3}')
  printf "%s instructions: %.0f per event, %.0f per simulated I/O\n" "$instr" \
    "$(echo "$instr / $events" | bc -l)" "$(echo "$instr / $ios" | bc -l)"
fi
