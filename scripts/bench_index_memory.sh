#!/usr/bin/env bash
# bcache index memory at scale (README, "bcache at scale: index memory"):
# corsair_nova's stack with a big cache SSD and backing array, the cache
# populated as 64 KiB extents (16.7M keys for 1 TiB, 33.5M for 2 TiB),
# prints the index's bytes per key (the report's index size over its live
# keys) and the run's peak RSS; then a 4 TiB cache populated with
# `length = "all"` as 4 KiB extents (1.07G keys, built lazily), and prints
# its peak RSS. Each job is 0.2 s of 4 KiB random reads.
#
# Usage: scripts/bench_index_memory.sh
# Needs: cargo, python3, GNU time (/usr/bin/time), about 2 GiB of memory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin sim >/dev/null 2>&1 || cargo build --release --bin sim
SIM=${CARGO_TARGET_DIR:-target}/release/sim
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# scenario CACHE LENGTH EXTENT OUT: corsair_nova with a CACHE-byte cache SSD,
# 4 TiB disks, the populate region from 0 and a short job.
scenario() {
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import re, sys
cache, length, ext, out = sys.argv[1:]
s = open("scenarios/corsair_nova.toml").read()
s = re.sub(r'capacity = "60g".*', f'capacity = "{cache}"', s)
s = s.replace('capacity = "500g"', 'capacity = "4t"')
s = re.sub(r'offset = "1g".*', 'offset = "0"', s)
s = s.replace('length = "16g"', f'length = "{length}"')
s = re.sub(r'extent_size = "512k".*', f'extent_size = "{ext}"', s)
s = s.replace('size = "16g"\n', 'size = "64g"\nruntime = "0.2s"\n')
open(out, "w").write(s)
PY
}

run() {
  /usr/bin/time -f "%e %M" -o "$TMP/time" "$SIM" run "$1" >"$TMP/out" 2>"$TMP/err"
  read -r wall rss_kb <"$TMP/time"
  python3 - "$TMP/out" "$wall" "$rss_kb" "$2" <<'PY'
import re, sys
out, wall, rss_kb, label = sys.argv[1:]
m = re.search(r"index: (\d+) live keys, depth (\d+), (\d+) leaves, (\d+) interior nodes, (\d+) KiB", open(out).read())
keys, kib = int(m.group(1)), int(m.group(5))
print(f"{label}: {keys} keys, depth {m.group(2)}, {m.group(3)} leaves; "
      f"index {kib / 1024:.1f} MiB = {kib * 1024 / keys:.2f} bytes per key; "
      f"peak RSS {int(rss_kb) / 1024:.0f} MiB ({int(rss_kb) * 1024 / keys:.2f} bytes per key); {wall} s wall")
PY
}

scenario 1200g 1t 64k "$TMP/1t.toml"
run "$TMP/1t.toml" "1 TiB of 64 KiB extents, eager"
scenario 2200g 2t 64k "$TMP/2t.toml"
run "$TMP/2t.toml" "2 TiB of 64 KiB extents, eager"
scenario 4t all 4k "$TMP/4t.toml"
run "$TMP/4t.toml" "4 TiB cache of 4 KiB extents, length = \"all\" (lazy; index size as if every leaf were built)"
