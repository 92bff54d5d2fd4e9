#!/usr/bin/python3
"""migration-bench.py: online slot migration's throughput, write pause and client latency.

A real etcd (temporary data dir, loopback ports) and two nodes: a shard serving every slot and
an empty one (stratakv-admin create and add-node). In each setting the first node is loaded
with `--mib` MiB of `--value-kib` KiB values spread over slots 0..1023 (redis-py pipelines,
timed: the single node's SET throughput of this run), then the slots move to the second node in
`--moves` migrations of equal ranges, one after another, while a client probes with 100-byte
SET/GET on the moving slots and elsewhere. Printed, as a markdown table per setting:
  - migration throughput (GB/s of values moved, from each migration's start to its "done"),
    against the load's SET throughput of the same run;
  - the write pause of each handover (p50 / max, from CLUSTER GETSLOTMIGRATIONS);
  - the probe's p50 / p99 latency during the migrations against before them.
Settings: values in memory; values mostly on SSD (an SSD tier under a small maxmemory).

usage: bench/migration-bench.py [--mib 512] [--value-kib 1024] [--moves 8] [--server BIN]
"""

import argparse
import logging
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build", "release"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def run(setting, a, etcd):
    import redis
    from redis.cluster import RedisCluster
    from migration_util import Cluster, find_tag, migrations, wait_until

    cl = Cluster(etcd, shards=1, empty=1, ssd=(setting == "ssd"),
                 **({"memory__capacity": "4gb"} if setting == "memory" else {}))
    try:
        source, target = cl.nodes
        if setting == "ssd":  # more memory than the tests' small one, still far below the data
            for srv in (source, target):
                srv.client().config_set("maxmemory", "%dmb" % max(64, a.mib // 8))
        r = redis.Redis(host="127.0.0.1", port=source.port, socket_timeout=60)
        value = os.urandom(a.value_kib * 1024)
        n = a.mib * 1024 // a.value_kib
        t0 = time.monotonic()
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.set("{%s}:%d" % (find_tag(i % 1024), i), value)
            if i % 16 == 15:
                pipe.execute()
        pipe.execute()
        load_s = time.monotonic() - t0
        total = n * len(value)
        if setting == "ssd":
            info = source.client().info("tiering")
            print("ssd setting: %s keys on SSD" % info.get("ssd_keys", "?"), file=sys.stderr)

        lat_before, lat_during = [], []
        probing = [lat_before]
        stop = threading.Event()

        def probe():
            rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=30)
            i = 0
            while not stop.is_set():
                k = "{%s}:probe-%d" % (find_tag((i * 37) % 2048), i % 500)
                t = time.perf_counter()
                rc.set(k, b"x" * 100)
                rc.get(k)
                probing[0].append((time.perf_counter() - t) * 1e6 / 2)
                i += 1
                time.sleep(0.001)
            rc.close()

        th = threading.Thread(target=probe)
        th.start()
        time.sleep(3)
        probing[0] = lat_during
        step = 1024 // a.moves
        move_s = 0.0
        for m in range(a.moves):
            first, last = m * step, (m + 1) * step - 1 if m < a.moves - 1 else 1023
            t = time.monotonic()
            mid = cl.start_migration(source, target, first, last)
            wait_until("migration done", lambda: cl.state(mid) in ("done", "failed"), timeout=600)
            move_s += time.monotonic() - t
            assert cl.state(mid) == "done"
        stop.set()
        th.join()
        pauses = [int(row["write_pause_us"]) for row in migrations(source)
                  if row.get("role") == "export" and row.get("state") == "done"]
        return {
            "setting": setting, "gb": total / 1e9, "load_gbs": total / load_s / 1e9,
            "move_gbs": total / move_s / 1e9, "pauses": pauses,
            "before": lat_before, "during": lat_during,
        }
    finally:
        cl.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--value-kib", type=int, default=1024)
    ap.add_argument("--moves", type=int, default=8)
    ap.add_argument("--settings", default="memory,ssd")
    ap.add_argument("--server", default=os.path.join(BUILD, "bin", "stratakv-server"))
    a = ap.parse_args()
    # redis-py 4.3 logs every redirect it follows (MovedError) at error level: they are normal.
    logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)
    os.environ["STRATAKV_SERVER"] = os.path.abspath(a.server)
    from etcd_util import Etcd
    rows = []
    with Etcd() as etcd:
        for setting in a.settings.split(","):
            rows.append(run(setting, a, etcd))
    print("| values | moved | SET load (GB/s) | migration (GB/s) | migration / SET | "
          "write pause p50 / max (ms) | probe p50 / p99 before (us) | during (us) |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for x in rows:
        print("| %s | %.2f GB in %d moves | %.2f | %.2f | %.2fx | %.1f / %.1f | %.0f / %.0f | %.0f / %.0f |" % (
            "in memory" if x["setting"] == "memory" else "mostly on SSD", x["gb"], len(x["pauses"]),
            x["load_gbs"], x["move_gbs"], x["move_gbs"] / x["load_gbs"],
            statistics.median(x["pauses"]) / 1000 if x["pauses"] else float("nan"),
            max(x["pauses"]) / 1000 if x["pauses"] else float("nan"),
            pct(x["before"], 50), pct(x["before"], 99), pct(x["during"], 50), pct(x["during"], 99)))


if __name__ == "__main__":
    main()
