#!/usr/bin/env python3
"""reclaim-bench.py: store speed and SSD disk bytes under a churn of overwrites (issue 17,
docs/ssd-tier.md "Disk space"), all in one run against redis-server.

Each target gets a fresh server with a 256 MiB region (maxmemory 0: the region), the SSD tier on
under SSD_DIR with its defaults (64 MiB write buffers), and stratakv-bulkbench SETs COUNT values
of SIZE over KEYS distinct keys on CONNS connections (so every key is overwritten COUNT/KEYS
times: a churn). A sampler reads INFO tiering every 100 ms: the largest ssd_disk_bytes, and the
ratio disk / live at the end; then 3 keys of 4 are deleted and the disk is read again 5 s later
(no more writes: nothing but the reclaim thread compacts). Targets:
  redis        redis-server, maxmemory 256mb allkeys-lru (drops what does not fit): the speed bar
  before       stratakv with tiering.ssd.reclaim no (main before issue 17)
  blob_gc      stratakv with tiering.ssd.reclaim no, tiering.ssd.blob_garbage_collection yes
  after        stratakv with the defaults (tiering.ssd.reclaim yes)

usage: bench/reclaim-bench.py [--size 1m] [--count 3072] [--keys 768] [--conns 4]
env: STRATAKV_SERVER (default build/release/bin/stratakv-server), BUILD_DIR (bulkbench),
     SSD_DIR (default /tmp/stratakv-reclaim-bench), REDIS_SERVER (default redis-server)
"""
import argparse, json, os, shutil, subprocess, sys, threading, time
from bench_util import free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD_DIR", os.path.join(REPO, "build/release"))
SERVER = os.environ.get("STRATAKV_SERVER", os.path.join(BUILD, "bin/stratakv-server"))
BULK = os.path.join(BUILD, "bin/stratakv-bulkbench")
SSD_DIR = os.environ.get("SSD_DIR", "/tmp/stratakv-reclaim-bench")
REDIS = os.environ.get("REDIS_SERVER", "redis-server")




def info(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "tiering"], capture_output=True,
                         text=True).stdout
    return dict(l.strip().split(":", 1) for l in out.splitlines() if ":" in l)


def wait_ready(port):
    for _ in range(200):
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                          text=True).stdout.strip() == "PONG":
            return
        time.sleep(0.05)
    sys.exit("server on %d did not start" % port)


def run(target, a):
    port = free_port()
    path = os.path.join(SSD_DIR, target)
    shutil.rmtree(path, ignore_errors=True)
    if target == "redis":
        cmd = [REDIS, "--port", str(port), "--save", "", "--appendonly", "no",
               "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"]
    else:
        cmd = [SERVER, "--port", str(port), "--memory.capacity", "256mb",
               "--tiering.ssd.enabled", "yes", "--tiering.ssd.path", path,
               "--tiering.ssd.flush-on-shutdown", "no",
               "--tiering.ssd.reclaim", "yes" if target == "after" else "no",
               "--tiering.ssd.blob-garbage-collection", "yes" if target == "blob_gc" else "no"]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port)
        peak = [0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                t = info(port)
                peak[0] = max(peak[0], int(t.get("ssd_disk_bytes", 0)))
                time.sleep(0.1)

        th = threading.Thread(target=sample)
        if target != "redis":
            th.start()
        out = subprocess.run([BULK, "--port", str(port), "--op", "set", "--size", a.size,
                              "--count", str(a.count), "--keys", str(a.keys),
                              "--connections", str(a.conns), "--json"],
                             capture_output=True, text=True, check=True).stdout
        done.set()
        if target != "redis":
            th.join()
        res = json.loads(out.strip().splitlines()[-1])
        row = {"target": target, "raw": res}
        if target != "redis":
            time.sleep(2)  # what the disk settles to once the writer stops
            t = info(port)
            row.update(peak_disk=peak[0], disk=int(t["ssd_disk_bytes"]), live=int(t["ssd_bytes"]),
                       demoted=int(t["demoted_bytes"]))
            # Then 3 keys of 4 deleted, and no more writes: what comes back within 5 s.
            dels = "".join("DEL bulkbench:%d\n" % i for i in range(a.keys) if i % 4)
            subprocess.run(["redis-cli", "-p", str(port)], input=dels, capture_output=True,
                           text=True, check=True)
            time.sleep(5)
            t = info(port)
            row.update(del_disk=int(t["ssd_disk_bytes"]), del_live=int(t["ssd_bytes"]),
                       runs=int(t.get("ssd_reclaim_runs", 0)),
                       rewritten=int(t.get("ssd_reclaim_rewritten_bytes", 0)))
        return row
    finally:
        srv.terminate()
        srv.wait(30)
        shutil.rmtree(path, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="1m")
    p.add_argument("--count", type=int, default=3072)
    p.add_argument("--keys", type=int, default=768)
    p.add_argument("--conns", type=int, default=4)
    a = p.parse_args()
    os.makedirs(SSD_DIR, exist_ok=True)
    rows = [run(t, a) for t in ("redis", "before", "blob_gc", "after")]
    redis_speed = None
    print("bench/reclaim-bench.py --size %s --count %d --keys %d --conns %d" % (a.size, a.count, a.keys, a.conns))
    print("| target | SET MB/s | x Redis | peak disk MB | disk MB 2 s after | live MB | disk/live | after DEL of 3/4: disk MB | live MB | disk/live | reclaim passes | rewritten MB | demoted MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        speed = r["raw"]["set"]["mb_per_sec"]
        if r["target"] == "redis":
            redis_speed = speed
        ratio = "%.2f" % (speed / redis_speed) if speed and redis_speed else "-"
        if r["target"] == "redis":
            print("| redis | %.0f | 1.00 | - | - | - | - | - | - | - | - | - | - |" % speed)
        else:
            print("| %s | %.0f | %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %d | %.0f | %.0f |" % (
                r["target"], speed, ratio, r["peak_disk"] / 1e6, r["disk"] / 1e6, r["live"] / 1e6,
                r["disk"] / max(r["live"], 1), r["del_disk"] / 1e6, r["del_live"] / 1e6,
                r["del_disk"] / max(r["del_live"], 1), r["runs"], r["rewritten"] / 1e6,
                r["demoted"] / 1e6))
    for r in rows:
        if r["raw"]["set"]["errors"]:
            print("- %s: %d SETs failed (the figures above count only those that succeeded)"
                  % (r["target"], r["raw"]["set"]["errors"]))


if __name__ == "__main__":
    main()
