#!/usr/bin/env bash
# Measures the fio runs `sim calibrate` fits and `sim validate` checks, on a
# file on the disk under test. Usage: scripts/fio_runs.sh DIR [SECONDS] [SIZE]
# Writes DIR/fit/*.json (the calibration set) and DIR/heldout/*.json (runs
# the fit never sees: other iodepths, a 70/30 mix, another block size).
set -euo pipefail
dir=${1:?usage: fio_runs.sh DIR [SECONDS] [SIZE]}
secs=${2:-3}
size=${3:-512m}
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
mkdir -p "$dir/fit" "$dir/heldout"
file="$dir/fio.data"
run() { # out name rw bs iodepth [extra...]
    local out=$1 name=$2 rw=$3 bs=$4 qd=$5; shift 5
    fio --name="$name" --filename="$file" --size="$size" --direct=1 --ioengine=libaio \
        --rw="$rw" --bs="$bs" --iodepth="$qd" --runtime="$secs" --time_based=1 \
        --lat_percentiles=1 --randrepeat=0 "$@" --output-format=json+ --output="$out"
}
# Lay the file out once so that reads hit allocated blocks.
fio --name=layout --filename="$file" --size="$size" --rw=write --bs=1m --direct=1 \
    --ioengine=libaio --iodepth=4 --output=/dev/null
run "$dir/fit/randread-4k-qd1.json"   randread-4k-qd1   randread  4k   1
run "$dir/fit/randread-4k-qd32.json"  randread-4k-qd32  randread  4k   32
run "$dir/fit/randwrite-4k-qd1.json"  randwrite-4k-qd1  randwrite 4k   1
run "$dir/fit/randwrite-4k-qd32.json" randwrite-4k-qd32 randwrite 4k   32
run "$dir/fit/read-128k-qd1.json"     read-128k-qd1     read      128k 1
run "$dir/heldout/randread-4k-qd8.json"   randread-4k-qd8   randread  4k  8
run "$dir/heldout/randwrite-4k-qd4.json"  randwrite-4k-qd4  randwrite 4k  4
run "$dir/heldout/randrw70-4k-qd16.json"  randrw70-4k-qd16  randrw    4k  16 --rwmixread=70
run "$dir/heldout/randread-64k-qd4.json"  randread-64k-qd4  randread  64k 4
rm -f "$file"
