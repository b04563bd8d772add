#!/usr/bin/env bash
# Side-by-side speed of `sim cachesim` and libCacheSim (PyPI libcachesim, C core) on the
# same machine, plus SHARDS vs exact LRU on a large synthetic trace.
#
# Usage: scripts/bench_cachesim.sh [TRACE] [REPEAT]
#   TRACE   libCacheSim vscsi trace (default tests/data/cache/cloudPhysicsIO.vscsi)
#   REPEAT  runs per measurement; the best is reported (default 5)
# Needs: cargo, python3 with `pip install libcachesim`.
# Wall-clock numbers only; they vary with machine load (run on an idle machine).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=${1:-tests/data/cache/cloudPhysicsIO.vscsi}
REPEAT=${2:-5}
SIZES=1000,5000,20000

cargo build --release --bin sim >/dev/null 2>&1 || cargo build --release --bin sim
SIM=target/release/sim

best_of() { # best wall time (s) of "$@" over REPEAT runs
  local best=""
  for _ in $(seq "$REPEAT"); do
    local t0 t1 d
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s.%N)
    d=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$d < $best" | bc -l)" = 1 ]; then best=$d; fi
  done
  printf '%.4f' "$best"
}

echo "== exact LRU over $TRACE at sizes $SIZES (one thread, best of $REPEAT) =="
ours=$(best_of "$SIM" cachesim "$TRACE" --policy lru --size $SIZES --jobs 1)
echo "sim cachesim (whole process: read trace + 3 simulations): ${ours}s"
"$SIM" cachesim "$TRACE" --policy lru --size $SIZES --jobs 1 2>&1 >/dev/null | sed 's/^/  stderr: /'

python3 - "$TRACE" "$REPEAT" "$SIZES" <<'PY'
import sys, time
import libcachesim as lcs
trace, repeat, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
p = lcs.ReaderInitParam(ignore_obj_size=True)
best_total = None
for _ in range(repeat):
    t0 = time.perf_counter()
    r = lcs.TraceReader(trace, lcs.TraceType.VSCSI_TRACE, p)
    for s in sizes:
        r.reset()
        lcs.LRU(s).process_trace(r)
    d = time.perf_counter() - t0
    best_total = d if best_total is None else min(best_total, d)
print(f"libCacheSim {lcs.__version__} (open reader + 3x LRU process_trace, default hashpower=24): {best_total:.4f}s")
# The default hashpower=24 allocates a 2^24-bucket table per cache; hashpower=17 fits this
# trace (48,974 objects) and isolates the per-request cost.
best = None
for _ in range(repeat):
    r = lcs.TraceReader(trace, lcs.TraceType.VSCSI_TRACE, p)
    t0 = time.perf_counter()
    for s in sizes:
        r.reset()
        lcs.LRU(s, hashpower=17).process_trace(r)
    d = time.perf_counter() - t0
    best = d if best is None else min(best, d)
print(f"libCacheSim {lcs.__version__} (3x LRU process_trace, hashpower=17, reader already open): {best:.4f}s")
PY

echo
echo "== SHARDS vs exact LRU on a large synthetic trace =="
BIG=${TMPDIR:-/tmp}/cachesim_bench_big.vscsi
python3 - "$TRACE" "$BIG" <<'PY'
# 20 copies of the sample trace with disjoint block numbers per copy (32-byte vscsi v1
# records: u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts).
import struct, sys
src, dst = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
recs = [struct.unpack_from("<IIIHHQQ", data, o) for o in range(0, len(data) - len(data) % 32, 32)]
with open(dst, "wb") as f:
    for c in range(20):
        for (sn, ln, nsg, cmd, ver, lbn, ts) in recs:
            f.write(struct.pack("<IIIHHQQ", sn, ln, nsg, cmd, ver, lbn + c * 10**10, ts))
print(f"{dst}: {20 * len(recs)} requests")
PY
GRID=$(python3 -c 'print(",".join(str(i * 50000) for i in range(1, 21)))')
exact=$(best_of "$SIM" cachesim "$BIG" --policy lru --size "$GRID" --jobs 1)
echo "exact LRU, 20 sizes, one simulation per size (1 thread): ${exact}s"
mattson=$(best_of "$SIM" cachesim "$BIG" --shards 1 --size "$GRID")
echo "one-pass exact Mattson curve (--shards 1): ${mattson}s"
shards=$(best_of "$SIM" cachesim "$BIG" --shards 0.1 --size "$GRID")
echo "SHARDS rate 0.1 (--shards 0.1): ${shards}s"
for a in "--policy lru --jobs 1" "--shards 1" "--shards 0.1"; do
  echo "  $a:"
  # shellcheck disable=SC2086
  "$SIM" cachesim "$BIG" $a --size "$GRID" 2>&1 >/dev/null | sed "s/^/    stderr: /"
done
