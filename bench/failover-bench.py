#!/usr/bin/python3
"""failover-bench.py: failover times over repeated kill -9 of a shard's primary (etcd mode).

A real etcd (temporary data dir, loopback ports), a shard of a primary and a replica created
by stratakv-admin, a client writing (SET, then WAIT 1 every 20 writes) throughout. Each round
kills the primary with SIGKILL, times until the replica answers as primary (INFO cluster),
checks every write WAIT acknowledged is on it byte for byte, then restarts the killed node
(same port, same node id), which rejoins as a replica of the new primary. Prints the times
(min / median / max) as a markdown table.

usage: bench/failover-bench.py [--kills 10] [--lease-ttl 2] [--server BIN] [--admin BIN]
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from etcd_util import Etcd  # noqa: E402
from resp_util import RawConn, Simple  # noqa: E402
from bench_util import free_port  # noqa: E402

BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build", "release"))




class Node:
    def __init__(self, binary, etcd, prefix, ttl, work):
        self.port = free_port()
        self.dir = os.path.join(work, "node-%d" % self.port)
        os.makedirs(self.dir)
        self.args = [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                     "--cluster-enabled", "yes", "--cluster.etcd.endpoints", etcd.endpoint,
                     "--cluster.etcd.prefix", prefix, "--cluster.etcd.lease-ttl", str(ttl)]
        self.proc = None

    def start(self):
        log = open(os.path.join(self.dir, "server.log"), "ab")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                c = RawConn("127.0.0.1", self.port, timeout=1)
                c.close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("node on %d did not start" % self.port)

    def field(self, section, name):
        try:
            c = RawConn("127.0.0.1", self.port, timeout=2)
            text = c.call("INFO", section)
            c.close()
        except Exception:
            return None
        text = text.decode() if isinstance(text, bytes) else str(text)
        for line in text.splitlines():
            if line.startswith(name + ":"):
                return line.split(":", 1)[1]
        return None

    def role(self):
        return self.field("cluster", "cluster_my_role")


def wait(what, fn, timeout=30):
    deadline = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for " + what)
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--lease-ttl", type=int, default=2)
    ap.add_argument("--server", default=os.path.join(BUILD, "bin", "stratakv-server"))
    ap.add_argument("--admin", default=os.path.join(BUILD, "bin", "stratakv-admin"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="failover-bench-")
    etcd = Etcd()
    etcd.start()
    prefix = "/stratakv/bench"
    nodes = [Node(os.path.abspath(a.server), etcd, prefix, a.lease_ttl, work) for _ in range(2)]
    times, checked = [], 0
    try:
        for n in nodes:
            n.start()
        subprocess.run([os.path.abspath(a.admin), "--etcd", etcd.endpoint, "--prefix", prefix,
                        "create", "--shards", "1", "--replicas", "1", "--wait", "20"],
                       check=True, capture_output=True)
        for k in range(a.kills):
            wait("a primary", lambda: any(n.role() == "primary" for n in nodes))
            primary = next(n for n in nodes if n.role() == "primary")
            replica = next(n for n in nodes if n is not primary)
            wait("the replica's link", lambda: replica.field("replication", "master_link_status") == "up")
            wait("writes accepted", lambda: primary.field("cluster", "cluster_fenced") == "0")
            acked, pending, stop = {}, {}, threading.Event()

            def writer():
                try:
                    c = RawConn("127.0.0.1", primary.port, timeout=5)
                    i = 0
                    while not stop.is_set():
                        key, val = "r%d-%d" % (k, i), os.urandom(1000)
                        if c.call("SET", key, val) != Simple("OK"):
                            return
                        pending[key] = val
                        i += 1
                        if i % 20 == 0:
                            if c.call("WAIT", "1", "2000") == 1:
                                acked.update(pending)
                            pending.clear()
                except Exception:
                    return

            t = threading.Thread(target=writer)
            t.start()
            wait("acknowledged writes", lambda: len(acked) >= 100)
            t0 = time.monotonic()
            primary.proc.send_signal(signal.SIGKILL)
            primary.proc.wait()
            wait("the replica promoted", lambda: replica.role() == "primary")
            times.append(time.monotonic() - t0)
            stop.set()
            t.join()
            c = RawConn("127.0.0.1", replica.port, timeout=5)
            for key, val in acked.items():
                assert c.call("GET", key) == val, "lost an acknowledged write: " + key
            checked += len(acked)
            c.close()
            primary.start()  # rejoins as a replica of the new primary
            print("kill %d: %.2f s" % (k + 1, times[-1]), file=sys.stderr)
    finally:
        for n in nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.terminate()
                n.proc.wait(10)
        etcd.close()
        shutil.rmtree(work, ignore_errors=True)
    print("### Failover after kill -9 of the primary, %s UTC\n"
          % time.strftime("%Y-%m-%d %H:%M", time.gmtime()))
    print("%d kills, lease TTL %d s; %d writes acknowledged by WAIT 1 checked on the new "
          "primary, none lost.\n" % (len(times), a.lease_ttl, checked))
    print("| min s | median s | max s |")
    print("|--:|--:|--:|")
    print("| %.2f | %.2f | %.2f |" % (min(times), statistics.median(times), max(times)))


if __name__ == "__main__":
    sys.exit(main())
