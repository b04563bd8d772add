#!/usr/bin/env python3
"""Reference miss ratios from libCacheSim (PyPI `libcachesim`) for the cachesim parity tests.

Usage: pip install libcachesim==0.3.5 && python3 scripts/libcachesim_reference.py [--make-oracle-sample] [TRACE_DIR]

Each request is one object keyed by lbn (ReaderInitParam(ignore_obj_size=True), so every
object has size 1 and the cache size counts objects); every policy uses libCacheSim's
default parameters. Prints one line per (encoding, policy, size):
    <encoding> <policy> <size> <miss_ratio with 10 decimals> <misses> <requests>
The output is committed as tests/data/cache/libcachesim_reference.txt.

Encodings: the CloudPhysics sample as vscsi and as csv, and the oracleGeneral sample
(its first 20,000 requests converted by libCacheSim's own converter), plain and
zstd-compressed, and that sample in the byte view (encoding oracleGeneral-bytes: without
ignore_obj_size, sizes in bytes). --make-oracle-sample (re)writes that sample
(cloudPhysicsIO.20k.oracleGeneral.bin and .bin.zst; needs the `zstd` command).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import libcachesim as lcs

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
TRACE_DIR = ARGS[0] if ARGS else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "cache")
SIZES = [1000, 3000, 5000, 12000, 20000]
ORACLE_SAMPLE = "cloudPhysicsIO.20k.oracleGeneral.bin"
ORACLE_REQUESTS = 20000
VSCSI_V1_RECORD_BYTES = 32
ORACLE_SIZES = [100, 500, 1500]
ORACLE_BYTE_SIZES = [4 << 20, 32 << 20, 128 << 20]
POLICIES = [
    ("fifo", lcs.FIFO),
    ("lru", lcs.LRU),
    ("clock", lcs.Clock),
    ("belady", lcs.Belady),
    ("arc", lcs.ARC),
    ("2q", lcs.TwoQ),
    ("lirs", lcs.LIRS),
    ("s3fifo", lcs.S3FIFO),
    ("sieve", lcs.Sieve),
    ("wtinylfu", lcs.WTinyLFU),
]


def open_reader(encoding):
    if encoding == "vscsi":
        p = lcs.ReaderInitParam(ignore_obj_size=True)
        return lcs.TraceReader(os.path.join(TRACE_DIR, "cloudPhysicsIO.vscsi"), lcs.TraceType.VSCSI_TRACE, p)
    # CSV header: version,time,op,size,lbn (fields are 1-based); op is left out because
    # libCacheSim does not know the SCSI opcodes "28"/"2a" and it does not affect misses.
    p = lcs.ReaderInitParam(ignore_obj_size=True, has_header=True, has_header_set=True, delimiter=",")
    p.time_field = 2
    p.obj_size_field = 4
    p.obj_id_field = 5
    return lcs.TraceReader(os.path.join(TRACE_DIR, "cloudPhysicsIO.csv"), lcs.TraceType.CSV_TRACE, p)


def oracle_reader(reader, encoding):
    """Belady needs each request's next access time: libCacheSim gets it by converting the
    trace to its oracleGeneral format (the reader alone leaves next_access_vtime unset and
    Belady then degenerates to an arbitrary order)."""
    path = os.path.join(tempfile.gettempdir(), f"cloudPhysicsIO.{encoding}.oracleGeneral")
    lcs.Util.convert_to_oracleGeneral(reader._reader, path)
    return lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE, lcs.ReaderInitParam(ignore_obj_size=True))


def make_oracle_sample():
    """The first ORACLE_REQUESTS requests of the vscsi sample (v1, 32-byte records),
    converted to oracleGeneral by libCacheSim (real object sizes), and its zstd form."""
    tmp = tempfile.mkdtemp()
    head = os.path.join(tmp, "cloudPhysicsIO.20k.vscsi")
    with open(os.path.join(TRACE_DIR, "cloudPhysicsIO.vscsi"), "rb") as f:
        data = f.read(ORACLE_REQUESTS * VSCSI_V1_RECORD_BYTES)
    with open(head, "wb") as f:
        f.write(data)
    reader = lcs.TraceReader(head, lcs.TraceType.VSCSI_TRACE, lcs.ReaderInitParam())
    out = os.path.join(TRACE_DIR, ORACLE_SAMPLE)
    lcs.Util.convert_to_oracleGeneral(reader._reader, out)
    subprocess.run(["zstd", "-q", "-f", "-19", out, "-o", out + ".zst"], check=True)
    shutil.rmtree(tmp)


def print_rows(encoding, reader, oracle, sizes):
    n_req = reader.get_num_of_req()
    for name, cls in POLICIES:
        for size in sizes:
            r = oracle if name == "belady" else reader
            r.reset()
            cache = cls(size)
            miss_ratio, _byte_miss_ratio = cache.process_trace(r)
            misses = round(miss_ratio * n_req)
            print(f"{encoding} {name} {size} {miss_ratio:.10f} {misses} {n_req}", flush=True)


def main():
    if "--make-oracle-sample" in sys.argv:
        make_oracle_sample()
    print(f"# libcachesim {lcs.__version__}; ignore_obj_size=True; default parameters")
    print("# encoding policy size miss_ratio misses requests")
    for encoding in ["vscsi", "csv"]:
        reader = open_reader(encoding)
        print_rows(encoding, reader, oracle_reader(reader, encoding), SIZES)
    # The oracleGeneral sample is read by libCacheSim's own oracleGeneral reader, plain and
    # zstd-compressed; it carries next-access times, so Belady reads it directly.
    for encoding, file in [("oracleGeneral", ORACLE_SAMPLE), ("oracleGeneral.zst", ORACLE_SAMPLE + ".zst")]:
        path = os.path.join(TRACE_DIR, file)
        reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE, lcs.ReaderInitParam(ignore_obj_size=True))
        print_rows(encoding, reader, reader, ORACLE_SIZES)
    # The byte view: objects weigh their size and the cache size counts bytes.
    path = os.path.join(TRACE_DIR, ORACLE_SAMPLE)
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE, lcs.ReaderInitParam())
    print_rows("oracleGeneral-bytes", reader, reader, ORACLE_BYTE_SIZES)


if __name__ == "__main__":
    main()
