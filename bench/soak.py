#!/usr/bin/python3
"""soak.py: a long mixed load against one stratakv server with eviction and the SSD tier on
(issue 16, "A soak"). Loopback only; not part of CI.

The server gets a small memory region (`--memory`, default 256mb) and an SSD tier capped at
`--ssd` (default 1gb) in a temporary directory, so that eviction and demotion run all the time.
Several client threads (redis-py) run for `--minutes`:
  - writers: SET of 100 B to 4 MiB values (a deterministic pattern per key and version), some
    with a TTL; APPEND, INCR, GETDEL, DEL, EXPIRE;
  - readers: GET and MGET of recent keys; every value read must be the exact bytes of a version
    that key was given (a value is dropped by eviction, never torn);
  - a transaction client: MULTI/SET/INCR/EXEC on its own keys, checked;
  - a Pub/Sub pair: every message published is received, in order;
  - the SDK's fast path over the Unix socket (shm), when the Python module is built: put/get of
    1-8 MiB values, byte-exact;
  - a connection churner: connects, runs a command, disconnects.
Every `--sample` seconds: the server's RSS (VmRSS), used_memory, the SSD's disk bytes, evicted
keys and errors. At the end it prints a table of the samples and checks:
  - no client saw an error other than the expected ones (none under allkeys-lru), no wrong byte;
  - RSS stayed within `--rss-bound` times (memory + SSD tier's RocksDB budget) - the stated
    bound - and did not keep growing: the mean of the last third of the samples is within 10%
    of the mean of the middle third (a leak grows without bound; caches settle).
Exit status 0 when every check passed.

usage: bench/soak.py [--minutes 30] [--memory 256mb] [--ssd 1gb] [--server BIN] [--sample 10]
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import redis
from bench_util import free_port, size_arg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build", "release"))
MiB = 1 << 20






def value_of(key, version, size):
    """The bytes of `key`'s `version`: a repeated digest, so any torn or mixed value shows."""
    seed = hashlib.sha256(("%s/%d" % (key, version)).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def rss_bytes(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Soak:
    def __init__(self, args, port, unix_path):
        self.args = args
        self.port = port
        self.unix_path = unix_path
        self.stop = threading.Event()
        self.errors = []
        self.ops = {}
        self.lock = threading.Lock()
        self.start = time.monotonic()

    def client(self):
        return redis.Redis(port=self.port, socket_timeout=60)

    def fail(self, what):
        what = "t=%.0f s %s" % (time.monotonic() - self.start, what)
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(what)

    def count(self, name, n=1):
        with self.lock:
            self.ops[name] = self.ops.get(name, 0) + n

    def guard(self, name, fn):
        def run():
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - any exception is a soak failure
                self.fail("%s: %r" % (name, e))
        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        return t

    # ---- the clients ----

    def writer_reader(self, wid):
        r = self.client()
        versions = {}  # key -> the versions it was given
        sizes = [100, 4096, 65536, MiB, 4 * MiB]
        i = 0
        while not self.stop.is_set():
            i += 1
            key = "soak:w%d:%d" % (wid, i % 400)
            v = versions.setdefault(key, [])
            ver = len(v)
            size = sizes[(i * 7 + wid) % len(sizes)]
            data = value_of(key, ver, size)
            ex = 30 if i % 5 == 0 else None
            r.set(key, data, ex=ex)
            v.append(size)
            self.count("set")
            # Read back recent keys: absent (evicted/expired) or exactly one of their versions.
            for j in range(3):
                k = "soak:w%d:%d" % (wid, (i - j * 13) % 400)
                got = r.get(k)
                self.count("get")
                if got is None or k not in versions:
                    continue
                if not any(len(got) == s and got == value_of(k, n, s)
                           for n, s in reversed(list(enumerate(versions[k])))):
                    self.fail("wrong bytes for %s (%d bytes)" % (k, len(got)))
            if i % 50 == 0:
                keys = ["soak:w%d:%d" % (wid, (i - j) % 400) for j in range(8)]
                for k, got in zip(keys, r.mget(keys)):
                    if got is not None and k in versions and not any(
                            len(got) == s and got == value_of(k, n, s)
                            for n, s in reversed(list(enumerate(versions[k])))):
                        self.fail("wrong bytes from MGET for %s" % k)
                self.count("mget")
            if i % 17 == 0:
                r.delete(key)
                versions.pop(key, None)
                self.count("del")
            if i % 23 == 0:
                ck = "soak:w%d:counter" % wid
                r.incr(ck)
                r.expire(ck, 60)
                self.count("incr")

    def appender(self):
        r = self.client()
        i = 0
        while not self.stop.is_set():
            i += 1
            key = "soak:append:%d" % (i % 50)
            r.append(key, b"x" * 1000)
            if i % 100 == 0:
                got = r.getdel(key)
                if got is not None and got != b"x" * len(got):
                    self.fail("APPEND value torn for %s" % key)
            self.count("append")

    def transactions(self):
        r = self.client()
        i = 0
        while not self.stop.is_set():
            i += 1
            p = r.pipeline(transaction=True)
            p.set("soak:tx:a", i)
            p.incr("soak:tx:n")
            p.get("soak:tx:a")
            res = p.execute()
            if res[0] is not True or int(res[2]) != i:
                self.fail("transaction replied %r" % (res,))
            self.count("multi")
            time.sleep(0.002)

    def pubsub(self):
        sub = self.client().pubsub()
        sub.subscribe("soak:ch")
        sub.get_message(timeout=5)  # the subscribe confirmation
        pub = self.client()
        n = 0
        while not self.stop.is_set():
            n += 1
            pub.publish("soak:ch", str(n))
            msg = None
            deadline = time.monotonic() + 10
            while msg is None and time.monotonic() < deadline:
                msg = sub.get_message(timeout=1)
                if msg is not None and msg["type"] != "message":
                    msg = None
            if msg is None or msg["data"] != str(n).encode():
                self.fail("pub/sub message %d: got %r" % (n, msg))
                return
            self.count("publish")
            time.sleep(0.005)

    def churn(self):
        while not self.stop.is_set():
            r = self.client()
            r.ping()
            r.close()
            self.count("connect")
            time.sleep(0.01)

    def fast_path(self):
        try:
            sys.path.insert(0, os.path.join(BUILD, "python"))
            import stratakv  # noqa: PLC0415
        except ImportError:
            self.count("fastpath-skipped")
            return
        kv = stratakv.Client("unix://" + self.unix_path)
        i = 0
        while not self.stop.is_set():
            i += 1
            key = "soak:fast:%d" % (i % 64)
            size = (1 + i % 8) * MiB
            data = value_of(key, i, size)
            kv.put(key, data)
            got = kv.get(key)
            if got is not None and got != data:
                self.fail("fast path: wrong bytes for %s" % key)
            self.count("kv.put")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--memory", default="256mb")
    ap.add_argument("--ssd", default="1gb")
    ap.add_argument("--server", default=os.path.join(BUILD, "bin", "stratakv-server"))
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--rss-bound", type=float, default=2.0,
                    help="RSS bound as a multiple of --memory plus 256 MiB for RocksDB and heap")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="stratakv-soak-")
    port = free_port()
    unix_path = os.path.join(work, "s.sock")
    cmd = [args.server, "--port", str(port), "--bind", "127.0.0.1", "--unixsocket", unix_path,
           "--memory.capacity", args.memory, "--maxmemory-policy", "allkeys-lru",
           "--tiering.ssd.enabled", "yes", "--tiering.ssd.path", os.path.join(work, "ssd"),
           "--tiering.ssd.capacity", args.ssd]
    log = open(os.path.join(work, "server.log"), "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        r = redis.Redis(port=port, socket_timeout=60)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        soak = Soak(args, port, unix_path)
        threads = [soak.guard("writer%d" % w, lambda w=w: soak.writer_reader(w))
                   for w in range(args.writers)]
        threads += [soak.guard(n, f) for n, f in (("append", soak.appender),
                                                  ("multi", soak.transactions),
                                                  ("pubsub", soak.pubsub),
                                                  ("churn", soak.churn),
                                                  ("fastpath", soak.fast_path))]
        samples = []
        start = time.monotonic()
        end = start + args.minutes * 60
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(args.sample)
            info = r.info()
            samples.append((time.monotonic() - start, rss_bytes(proc.pid), info["used_memory"],
                            info.get("ssd_disk_bytes", 0), info.get("evicted_keys", 0),
                            info.get("total_error_replies", 0)))
            print("t=%6.0f s  rss=%7.1f MiB  used=%7.1f MiB  ssd_disk=%7.1f MiB  evicted=%d  "
                  "errors=%d  largest_free=%.1f MiB  queued=%.1f MiB  ssd_live=%.1f MiB  "
                  "reclaim target=%.1f MiB runs=%d freed=%.1f MiB rewrites=%d last=%d ms" % (
                      samples[-1][0], samples[-1][1] / MiB, samples[-1][2] / MiB,
                      samples[-1][3] / MiB, samples[-1][4], samples[-1][5],
                      info.get("region_largest_free", 0) / MiB,
                      info.get("pending_demotion_bytes", 0) / MiB,
                      info.get("ssd_bytes", 0) / MiB,
                      info.get("ssd_reclaim_target_bytes", 0) / MiB,
                      info.get("ssd_reclaim_runs", 0), info.get("ssd_reclaimed_bytes", 0) / MiB,
                      info.get("ssd_reclaim_rewrites", 0), info.get("ssd_reclaim_last_ms", 0)),
                  flush=True)
        soak.stop.set()
        for t in threads:
            t.join(timeout=60)
        alive = proc.poll() is None
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()

    bound = args.rss_bound * size_arg(args.memory) + 256 * MiB
    rss = [s[1] for s in samples]
    third = max(1, len(rss) // 3)
    middle = sum(rss[third:2 * third]) / max(1, len(rss[third:2 * third]))
    last = sum(rss[-third:]) / len(rss[-third:])
    print()
    print("| minutes | ops | RSS max MiB | RSS bound MiB | RSS middle third MiB | RSS last third MiB "
          "| evicted keys | error replies | client failures |")
    print("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
    print("| %.0f | %s | %.0f | %.0f | %.0f | %.0f | %d | %d | %d |" % (
        args.minutes, ", ".join("%s %d" % kv for kv in sorted(soak.ops.items())),
        max(rss) / MiB, bound / MiB, middle / MiB, last / MiB,
        samples[-1][4] if samples else 0, samples[-1][5] if samples else 0, len(soak.errors)))
    ok = True
    for e in soak.errors:
        print("FAIL:", e)
        ok = False
    if not alive:
        print("FAIL: the server exited; log in", work)
        ok = False
    if max(rss) > bound:
        print("FAIL: RSS %.0f MiB passed the bound %.0f MiB" % (max(rss) / MiB, bound / MiB))
        ok = False
    if len(rss) >= 6 and last > middle * 1.10:
        print("FAIL: RSS kept growing: %.0f -> %.0f MiB" % (middle / MiB, last / MiB))
        ok = False
    if samples and samples[-1][5] != 0:
        print("FAIL: the server replied %d errors" % samples[-1][5])
        ok = False
    if ok:
        shutil.rmtree(work, ignore_errors=True)
        print("soak: every check passed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
