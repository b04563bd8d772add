#!/usr/bin/env bash
# The documented accuracy measurement of `sim calibrate` + `sim validate`
# on this machine's own disk (README: "Calibrating from your own fio runs").
#
#   scripts/validate_local_disk.sh [DIR] [SECONDS]
#
# Measures the calibration set and the held-out set with fio
# (scripts/fio_runs.sh: libaio, direct, a 512 MiB file under DIR, which
# must be on the disk under test; default target/validate-local-disk),
# fits a [[generic]] device to the calibration set only, then prints the
# error table of the held-out runs (other iodepths, a 70/30 mix, another
# block size) and, for contrast, of the calibration runs themselves. The
# held-out set is measured twice: how far the two repeats' errors differ
# is the measurement's own noise on this (shared, virtual) machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/validate-local-disk}
secs=${2:-3}
sim=${SIM:-target/release/sim}
[ -x "$sim" ] || cargo build --release --quiet
rm -rf "$dir"
mkdir -p "$dir"
echo "== machine: $(nproc) CPUs, $(uname -r), $(fio --version)"
disk=$(df --output=source "$dir" | tail -1)
echo "== disk under test: $disk ($(lsblk -ndo TYPE,SIZE,ROTA,MODEL "$disk" 2>/dev/null | tr -s ' ' || echo '?')), file under $dir"
scripts/fio_runs.sh "$dir/a" "$secs" 512m
scripts/fio_runs.sh "$dir/b" "$secs" 512m
echo "== sim calibrate (fit set of repeat a)"
"$sim" calibrate "$dir"/a/fit/*.json --out "$dir/device.toml"
echo
echo "== held-out runs, repeat a"
"$sim" validate "$dir/device.toml" "$dir"/a/heldout/*.json --csv "$dir/heldout-a.csv" --plot "$dir/heldout-a.svg"
echo
echo "== held-out runs, repeat b (measured after a: the same jobs again)"
"$sim" validate "$dir/device.toml" "$dir"/b/heldout/*.json --csv "$dir/heldout-b.csv"
echo
echo "== the calibration runs themselves (in-sample, for contrast)"
"$sim" validate "$dir/device.toml" "$dir"/a/fit/*.json
