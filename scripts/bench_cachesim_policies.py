#!/usr/bin/env python3
"""Per-policy speed of `sim cachesim` against libCacheSim on one large trace.

Usage: python3 scripts/bench_cachesim_policies.py [--pairs N] [--copies C] [--sizes S,S,..]
           [--policies p,p,..] [--hashpower fit|default] [--sim PATH] [--trace PATH]
Needs: python3 with `pip install libcachesim==0.3.5` and numpy, and a release build
(`cargo build --release --bin sim`; --sim defaults to $CARGO_TARGET_DIR or target/).

The trace (unless --trace is given) is C copies (default 88, about 10M requests) of the
sample tests/data/cache/cloudPhysicsIO.vscsi, copy c with its block numbers shifted by
c * 10^10 (disjoint copies), written once as a vscsi v1 file under $TMPDIR; both tools read
that same file. Each request is one object (libCacheSim ignore_obj_size, sim --unit objects).

For every policy, N interleaved pairs are run (which tool goes first alternates):
  sim:         the whole `sim cachesim TRACE --policy P --size SIZES --jobs 1` process (read
               and parse the trace once, then one simulation per size on one thread);
  libCacheSim: in this Python process, open the reader, then per size reset it and run
               `<Policy>(size, hashpower=H).process_trace(reader)` (C loop; default policy
               parameters). --hashpower fit (the default) sizes libCacheSim's hash table to
               the cache, H = ceil(log2(size)) + 1 (at least 10): its fastest setting here;
               --hashpower default keeps libCacheSim's H = 24 (a 2^24-bucket table per cache,
               far beyond what these sizes need, which makes it slower).
Printed per policy: the median wall time of each tool, their ratio
(libCacheSim / sim: above 1 means sim is faster) and the median of the per-pair ratios.
Every run's miss counts are compared (sim's --csv against libCacheSim's miss ratio times
the request count); a mismatch stops the script with an error.
Wall-clock figures depend on the machine and its load: run it on an otherwise idle host.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import libcachesim as lcs

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SAMPLE = os.path.join(ROOT, "tests", "data", "cache", "cloudPhysicsIO.vscsi")
POLICIES = {
    "fifo": lcs.FIFO,
    "lru": lcs.LRU,
    "clock": lcs.Clock,
    "sieve": lcs.Sieve,
    "s3fifo": lcs.S3FIFO,
    "arc": lcs.ARC,
    "2q": lcs.TwoQ,
    "lirs": lcs.LIRS,
    "wtinylfu": lcs.WTinyLFU,
}
# vscsi v1 record: u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts.
VSCSI_V1 = np.dtype([("sn", "<u4"), ("len", "<u4"), ("nsg", "<u4"), ("cmd", "<u2"),
                     ("ver", "<u2"), ("lbn", "<u8"), ("ts", "<u8")])


def make_trace(copies):
    path = os.path.join(tempfile.gettempdir(), f"cachesim_bench_{copies}x.vscsi")
    if os.path.exists(path):
        return path
    recs = np.fromfile(SAMPLE, dtype=VSCSI_V1)
    out = np.tile(recs, copies)
    out["lbn"] += np.repeat(np.arange(copies, dtype=np.uint64) * np.uint64(10**10), len(recs))
    out.tofile(path + ".part")
    os.replace(path + ".part", path)
    return path


def run_sim(sim, trace, policy, sizes, csv):
    cmd = [sim, "cachesim", trace, "--policy", policy, "--size", ",".join(map(str, sizes)),
           "--jobs", "1", "--csv", csv]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    misses = {}
    with open(csv) as f:
        next(f)
        for line in f:
            fields = line.split(",")
            misses[int(fields[1])] = int(fields[4])
    return wall, [misses[s] for s in sizes]


def hashpower(size, mode):
    return 24 if mode == "default" else max(10, (size - 1).bit_length() + 1)


def run_lcs(trace, policy, sizes, mode):
    t0 = time.perf_counter()
    reader = lcs.TraceReader(trace, lcs.TraceType.VSCSI_TRACE,
                             lcs.ReaderInitParam(ignore_obj_size=True))
    ratios = []
    for s in sizes:
        reader.reset()
        cache = POLICIES[policy](s, hashpower=hashpower(s, mode))
        ratios.append(cache.process_trace(reader)[0])
    wall = time.perf_counter() - t0
    n = reader.get_num_of_req()
    return wall, [round(r * n) for r in ratios]


def bench(args, trace, policy, csv):
    sim_t, lcs_t = [], []
    for i in range(args.pairs):
        order = ("sim", "lcs") if i % 2 == 0 else ("lcs", "sim")
        for who in order:
            if who == "sim":
                t, sim_m = run_sim(args.sim, trace, policy, args.sizes, csv)
                sim_t.append(t)
            else:
                t, lcs_m = run_lcs(trace, policy, args.sizes, args.hashpower)
                lcs_t.append(t)
        if sim_m != lcs_m:
            sys.exit(f"{policy}: miss counts differ: sim {sim_m} libCacheSim {lcs_m}")
    pair = statistics.median(l / s for s, l in zip(sim_t, lcs_t))
    ms, ml = statistics.median(sim_t), statistics.median(lcs_t)
    print(f"{policy:<9} {ms:8.3f} {ml:8.3f} {ml / ms:7.2f}x {pair:7.2f}x  misses {sim_m}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--copies", type=int, default=88)
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--hashpower", choices=["fit", "default"], default="fit")
    tgt = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--sim", default=os.path.join(tgt, "release", "sim"))
    ap.add_argument("--trace")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    trace = args.trace or make_trace(args.copies)
    csv = os.path.join(tempfile.gettempdir(), f"cachesim_bench_{os.getpid()}.csv")
    print(f"# {trace}: {os.path.getsize(trace) // 32} requests; sizes {args.sizes}; "
          f"libcachesim {lcs.__version__} (hashpower {args.hashpower}); "
          f"medians of {args.pairs} interleaved pairs")
    print(f"{'policy':<9} {'sim s':>8} {'lcs s':>8} {'ratio':>8} {'pair':>8}")
    for p in args.policies.split(","):
        bench(args, trace, p, csv)
    os.remove(csv)


if __name__ == "__main__":
    main()
