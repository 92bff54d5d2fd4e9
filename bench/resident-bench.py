#!/usr/bin/python3
"""resident-bench.py: page faults of large values in steady state, stratakv against redis-server
7.0 in one run (issue 17, "No page faults in steady state").

Each round stores `--count` values of `--size` (SET over one connection, redis-py), then deletes
them all, so every round after the first writes into memory freed by the round before. Per round
and server: the SETs' GB/s and the server process's minor page faults (/proc/PID/stat) during
them, in MiB of 4 KiB pages. stratakv keeps freed value pages resident (tiering/
resident_policy.h); a round that faults its values in again pays the first touch of fresh
memory. Prints a markdown table with the ratios.

usage: bench/resident-bench.py [--size 32m] [--count 24] [--rounds 5] [--server BIN] [--redis BIN]
"""

import argparse
import os
import shutil
import tempfile
import time

from bench_util import free_port, size_arg, start_server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build", "release"))




def minor_faults(pid):
    return int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[7])






def rounds(r, pid, value, count, n):
    out = []
    for _ in range(n):
        faults, t0 = minor_faults(pid), time.perf_counter()
        for i in range(count):
            r.set("v%d" % i, value)
        dt = time.perf_counter() - t0
        out.append((count * len(value) / dt / 1e9, (minor_faults(pid) - faults) * 4096 / (1 << 20)))
        r.delete(*["v%d" % i for i in range(count)])
        time.sleep(0.2)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="32m")
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--server", default=os.path.join(BUILD, "bin", "stratakv-server"))
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    a = ap.parse_args()
    value = os.urandom(size_arg(a.size))
    need = a.count * len(value)
    work = tempfile.mkdtemp(prefix="resident-bench-")
    targets = [
        ("stratakv", [a.server, "--memory.capacity", str(2 * need)]),
        ("redis", [a.redis, "--save", "", "--appendonly", "no", "--dir", work]),
    ]
    results = {}
    for name, cmd in targets:
        proc, r = start_server(cmd, free_port())
        try:
            results[name] = rounds(r, proc.pid, value, a.count, a.rounds)
        finally:
            proc.terminate()
            proc.wait(30)
    shutil.rmtree(work, ignore_errors=True)
    print("| round | stratakv GB/s | faults MiB | redis GB/s | faults MiB | ratio |")
    print("|---|---|---|---|---|---|")
    for i in range(a.rounds):
        (sg, sf), (rg, rf) = results["stratakv"][i], results["redis"][i]
        print("| %d | %.2f | %.0f | %.2f | %.0f | %.2fx |" % (i + 1, sg, sf, rg, rf, sg / rg))
    steady = lambda rows: sorted(g for g, _ in rows[1:])[len(rows[1:]) // 2]
    print("\nsteady state (median of rounds 2..%d): stratakv %.2f GB/s, redis %.2f GB/s: %.2fx"
          % (a.rounds, steady(results["stratakv"]), steady(results["redis"]),
             steady(results["stratakv"]) / steady(results["redis"])))


if __name__ == "__main__":
    main()
