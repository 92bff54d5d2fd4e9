#!/usr/bin/python3
"""repl-bench.py: replication of 32 MiB values, stratakv against redis-server 7.0, in one run.

For each target, a primary alone first (its SET throughput is the yardstick), then a primary
with one replica: the same SETs, timed from the first SET until the replica has acknowledged
the last one (WAIT 1 0), so the figure is the throughput of the pair, replication included.
While the SETs run, the replica's lag (bytes of the stream not yet acknowledged) is sampled
every 20 ms from INFO replication. Prints a markdown table with the ratios.

usage: bench/repl-bench.py [--size 32m] [--count 64] [--keys 8] [--server BIN] [--redis BIN]
                           [--bulkbench BIN]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from bench_util import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build", "release"))




def call(port, *args):
    """One command over a raw socket; returns the reply's first line (enough for INFO fields,
    WAIT's integer and OK)."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        s.sendall(("*%d\r\n" % len(args) + "".join(
            "$%d\r\n%s\r\n" % (len(str(a)), a) for a in args)).encode())
        data = b""
        while b"\r\n" not in data:
            data += s.recv(65536)
        if data.startswith(b"$"):
            n = int(data[1:data.index(b"\r\n")])
            head = data.index(b"\r\n") + 2
            while len(data) < head + n:
                data += s.recv(1 << 20)
            return data[head:head + n].decode()
        return data[:data.index(b"\r\n")].decode()


def info_field(port, name):
    for line in call(port, "INFO", "replication").splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    return None


def start(kind, binary, port, work, extra):
    args = [binary, "--port", str(port), "--bind", "127.0.0.1"]
    if kind == "redis":
        args += ["--save", "", "--appendonly", "no", "--dir", work]
    else:
        args += ["--memory.capacity", "2gb"]
    args += extra
    log = open(os.path.join(work, "%s-%d.log" % (kind, port)), "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            if call(port, "PING") == "+PONG":
                return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("%s did not start on %d" % (kind, port))


def bulk_set(bulkbench, port, size, count, keys):
    out = subprocess.run([bulkbench, "--port", str(port), "--size", size, "--count", str(count),
                          "--keys", str(keys), "--op", "set", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def size_bytes(s):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(s[:-1]) * mult[s[-1].lower()] if s[-1].lower() in mult else int(s)


def run_target(kind, binary, bulkbench, size, count, keys):
    work = tempfile.mkdtemp(prefix="repl-bench-")
    procs = []
    try:
        alone = free_port()
        procs.append(start(kind, binary, alone, work, []))
        t0 = time.monotonic()
        bulk_set(bulkbench, alone, size, count, keys)
        alone_s = time.monotonic() - t0

        primary, replica = free_port(), free_port()
        procs.append(start(kind, binary, primary, work, []))
        procs.append(start(kind, binary, replica, work, ["--replicaof", "127.0.0.1 %d" % primary]
                           if kind == "stratakv" else ["--replicaof", "127.0.0.1", str(primary)]))
        deadline = time.time() + 30
        while info_field(replica, "master_link_status") != "up":
            if time.time() > deadline:
                raise SystemExit("%s replica never linked up" % kind)
            time.sleep(0.05)
        lags, stop = [], threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    master = int(info_field(primary, "master_repl_offset"))
                    s0 = info_field(primary, "slave0") or ""
                    acked = int(dict(kv.split("=") for kv in s0.split(","))["offset"])
                    lags.append(max(0, master - acked))
                except (OSError, KeyError, ValueError, TypeError):
                    pass
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.monotonic()
        bulk_set(bulkbench, primary, size, count, keys)
        sets_s = time.monotonic() - t0
        acked = int(call(primary, "WAIT", "1", "0")[1:])
        pair_s = time.monotonic() - t0
        stop.set()
        sampler.join()
        assert acked == 1, "%s: WAIT 1 0 answered %d" % (kind, acked)
        total = size_bytes(size) * count
        return {
            "alone": total / alone_s / 1e9,
            "sets": total / sets_s / 1e9,
            "pair": total / pair_s / 1e9,
            "catchup_ms": (pair_s - sets_s) * 1000,
            "lag_max_mb": max(lags) / 1e6 if lags else 0.0,
            "lag_median_mb": sorted(lags)[len(lags) // 2] / 1e6 if lags else 0.0,
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="32m")
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--server", default=os.path.join(BUILD, "bin", "stratakv-server"))
    ap.add_argument("--redis", default=shutil.which("redis-server"))
    ap.add_argument("--bulkbench", default=os.path.join(BUILD, "bin", "stratakv-bulkbench"))
    a = ap.parse_args()
    a.server, a.bulkbench = os.path.abspath(a.server), os.path.abspath(a.bulkbench)
    rows = {"stratakv": run_target("stratakv", a.server, a.bulkbench, a.size, a.count, a.keys)}
    if a.redis:
        rows["redis"] = run_target("redis", a.redis, a.bulkbench, a.size, a.count, a.keys)
    print("### Replication of %s values (%d SETs over %d keys, 1 connection), %s UTC\n"
          % (a.size, a.count, a.keys, time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
    print("| target | SET alone GB/s | SET with a replica GB/s | pair (until WAIT 1) GB/s "
          "| pair / alone | catch-up after the last SET ms | lag median MB | lag max MB |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for name, r in rows.items():
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %.1f | %.1f |" % (
            name, r["alone"], r["sets"], r["pair"], r["pair"] / r["alone"], r["catchup_ms"],
            r["lag_median_mb"], r["lag_max_mb"]))
    if "redis" in rows:
        print("\nstratakv / redis, pair throughput: %.2fx"
              % (rows["stratakv"]["pair"] / rows["redis"]["pair"]))


if __name__ == "__main__":
    sys.exit(main())
