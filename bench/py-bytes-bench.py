#!/usr/bin/python3
"""py-bytes-bench.py: the Python module's put/get of large `bytes` against redis-py on
redis-server 7.0, in one run (issue 17: "Python module put/get of 32 MiB bytes at least 2x
Redis through redis-py").

Both servers start fresh on this host. Per round: `--count` puts of one `--size` value under
distinct keys, then `--count` gets of them (each checked byte for byte against the value put),
timed per phase; round 1 runs on fresh servers (their memory first touched), the later rounds
overwrite the same keys (warm). stratakv is reached as a user would: `stratakv.Client` on its
Unix socket (the shared-memory fast path) and, for reference, on TCP (`transport="resp"`);
Redis through redis-py over TCP, as in its default use. Prints a markdown table: GB/s per phase
for round 1 and the median of the warm rounds, and the ratios to redis-py.

usage: bench/py-bytes-bench.py [--size 32m] [--count 8] [--rounds 6] [--server BIN] [--redis BIN]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build", "release"))
sys.path.insert(0, os.path.join(BUILD, "python"))
import stratakv  # noqa: E402
from bench_util import free_port, size_arg, start_server  # noqa: E402








def rounds(put, get, value, count, n):
    """[(put GB/s, get GB/s)] per round."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        for i in range(count):
            assert put("k%d" % i, value)
        t1 = time.perf_counter()
        for i in range(count):
            assert get("k%d" % i) == value
        t2 = time.perf_counter()
        gb = len(value) * count / 1e9
        out.append((gb / (t1 - t0), gb / (t2 - t1)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="32m")
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--server", default=os.path.join(BUILD, "bin", "stratakv-server"))
    ap.add_argument("--redis", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    a = ap.parse_args()
    size = size_arg(a.size)
    value = np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8).tobytes()
    work = tempfile.mkdtemp(prefix="py-bytes-bench-")
    sock = os.path.join(work, "s.sock")
    capacity = str(max(1 << 30, 4 * size * a.count))
    procs = []
    try:
        sport, rport = free_port(), free_port()
        procs.append(start_server([a.server, "--memory.capacity", capacity, "--unixsocket", sock],
                                  sport)[0])
        procs.append(start_server([a.redis, "--save", "", "--appendonly", "no"], rport)[0])
        results = {}
        kv = stratakv.Client("unix://" + sock)
        results["stratakv.Client, Unix socket (%s)" % kv.transport] = rounds(kv.put, kv.get, value, a.count, a.rounds)
        kv_tcp = stratakv.Client("redis://127.0.0.1:%d" % sport, transport="resp")
        results["stratakv.Client, TCP (resp)"] = rounds(kv_tcp.put, kv_tcp.get, value, a.count, a.rounds)
        r = redis.Redis(port=rport, socket_timeout=600)
        results["redis-py on redis-server"] = rounds(r.set, r.get, value, a.count, a.rounds)
        ref = results["redis-py on redis-server"]
        print("%d rounds of %d puts then %d gets of %d bytes (round 1: fresh servers)\n"
              % (a.rounds, a.count, a.count, size))
        print("| client | put GB/s round 1 | put GB/s warm | get GB/s round 1 | get GB/s warm "
              "| put vs redis-py (round 1, warm) | get vs redis-py (round 1, warm) |")
        print("|---|--:|--:|--:|--:|--:|--:|")

        def warm(rs, k):
            return statistics.median(x[k] for x in rs[1:]) if len(rs) > 1 else rs[0][k]

        for name, rs in results.items():
            print("| %s | %.2f | %.2f | %.2f | %.2f | %.2fx, %.2fx | %.2fx, %.2fx |" % (
                name, rs[0][0], warm(rs, 0), rs[0][1], warm(rs, 1),
                rs[0][0] / ref[0][0], warm(rs, 0) / warm(ref, 0),
                rs[0][1] / ref[0][1], warm(rs, 1) / warm(ref, 1)))
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
