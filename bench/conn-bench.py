#!/usr/bin/python3
"""Connection storms and idle connections: stratakv against redis-server in the same run
(issue 16).

  bench/conn-bench.py [--server build/dev/bin/stratakv-server] [--redis redis-server]
                      [--storm 5000] [--idle 10000] [--rounds 1] [--threads N]

Starts both servers itself (loopback, free ports, maxclients raised above --idle), then for each
(the order alternates between rounds, so neither always runs second):

  storm-keep   N connections opened one after another, each sends PING, reads +PONG and stays
               open (closed together afterwards);
  storm-close  the same, each closed after its +PONG;
  idle         --idle connections opened (each answers one PING, then stays idle), the server's
               VmRSS (/proc/PID/status) before and after, per connection: once right after the
               last one, and again after 3 s (Redis's clientsCron shrinks idle query buffers);
               this process raises its own RLIMIT_NOFILE first.

For each storm: the wall time, the slowest connect, and the listen-queue overflows of the whole
host (TcpExtListenOverflows / TcpExtListenDrops from /proc/net/netstat, before and after: other
processes' listeners count too, so run on a quiet host). Prints a table and the ratios
stratakv/redis. Raw sockets, standard library only.
"""

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from bench_util import free_port  # noqa: E402

PING = b"*1\r\n$4\r\nPING\r\n"




def listen_counters():
    """(ListenOverflows, ListenDrops) of the host, from /proc/net/netstat."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            d = dict(zip(names.split()[1:], map(int, values.split()[1:])))
            return d["ListenOverflows"], d["ListenDrops"]
    return 0, 0


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Srv:
    def __init__(self, kind, binary, maxclients, threads):
        self.kind = kind
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="conn-bench-%s-" % kind)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--maxclients", str(maxclients)]
        if kind == "redis":
            args += ["--save", "", "--appendonly", "no", "--databases", "1"]
        else:
            args += ["--memory.capacity", "1gb"]
            if threads:
                args += ["--threads", str(threads)]
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir)
        deadline = time.monotonic() + 20
        while True:
            try:
                c = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                c.sendall(PING)
                if c.recv(64) == b"+PONG\r\n":
                    c.close()
                    break
                c.close()
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("%s did not start (see %s)" % (kind, self.dir))
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def connect_ping(port):
    """One connection that answered PING. Returns (socket, seconds it took)."""
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(PING)
    got = b""
    while len(got) < 7:
        chunk = s.recv(64)
        if not chunk:
            raise RuntimeError("connection closed before +PONG: %r" % got)
        got += chunk
    if got != b"+PONG\r\n":
        raise RuntimeError("unexpected reply %r" % got)
    return s, time.perf_counter() - t


def storm(srv, n, keep):
    """n connections one after another; returns (seconds, slowest, overflows, drops)."""
    before = listen_counters()
    kept = []
    slowest = 0.0
    t0 = time.perf_counter()
    for _ in range(n):
        s, dt = connect_ping(srv.port)
        slowest = max(slowest, dt)
        if keep:
            kept.append(s)
        else:
            s.close()
    elapsed = time.perf_counter() - t0
    after = listen_counters()
    for s in kept:
        s.close()
    time.sleep(0.5)  # let the server notice the closes before the next phase
    return elapsed, slowest, after[0] - before[0], after[1] - before[1]


def burst(srv, n):
    """n connects one after another without waiting for replies (each sends PING at once), then
    every +PONG is read. Returns (seconds until all answered, slowest connect, overflows,
    drops)."""
    before = listen_counters()
    conns = []
    slowest = 0.0
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        slowest = max(slowest, time.perf_counter() - t)
        s.sendall(PING)
        conns.append(s)
    for s in conns:
        got = b""
        while len(got) < 7:
            chunk = s.recv(64)
            if not chunk:
                raise RuntimeError("connection closed before +PONG: %r" % got)
            got += chunk
        if got != b"+PONG\r\n":
            raise RuntimeError("unexpected reply %r" % got)
    elapsed = time.perf_counter() - t0
    after = listen_counters()
    for s in conns:
        s.close()
    time.sleep(0.5)
    return elapsed, slowest, after[0] - before[0], after[1] - before[1]


def idle(srv, n):
    """Opens n connections that each answer a PING, then idle. Returns KB of RSS per connection
    (right after, and after 3 s)."""
    time.sleep(0.5)
    before = rss_kb(srv.proc.pid)
    conns = [connect_ping(srv.port)[0] for _ in range(n)]
    time.sleep(0.3)
    now = rss_kb(srv.proc.pid)
    time.sleep(3.0)
    later = rss_kb(srv.proc.pid)
    for s in conns:
        s.close()
    time.sleep(0.5)
    return (now - before) / n, (later - before) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--server", default=os.path.join(here, "..", "build", "dev", "bin",
                                                      "stratakv-server"))
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--storm", type=int, default=5000)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="stratakv's I/O threads (0: default)")
    ap.add_argument("--label", default="stratakv")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(a.idle, a.storm) + 1000
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    maxclients = max(a.idle, a.storm) + 100

    results = {a.label: [], "redis": []}
    for r in range(a.rounds):
        order = [(a.label, a.server), ("redis", a.redis)]
        if r % 2:
            order.reverse()
        for kind, binary in order:
            srv = Srv("redis" if kind == "redis" else "stratakv", binary, maxclients, a.threads)
            try:
                keep = storm(srv, a.storm, True)
                close = storm(srv, a.storm, False)
                rush = burst(srv, a.storm)
                per_conn = idle(srv, a.idle) if a.idle else (0.0, 0.0)
            finally:
                srv.stop()
            results[kind].append((keep, close, per_conn, rush))
            print("round %d %-9s storm-keep %6.2f s (slowest %.3f s, overflows %d, drops %d)  "
                  "storm-close %6.2f s (slowest %.3f s, overflows %d, drops %d)  "
                  "burst %6.2f s (slowest %.3f s, overflows %d, drops %d)  "
                  "idle %.2f KB/conn, %.2f KB/conn after 3 s" %
                  ((r, kind) + keep + close + rush + per_conn), flush=True)

    def best(kind, f):
        return min(f(x) for x in results[kind])

    print()
    print("| %d connects, %d idle | %s | redis-server %s | ratio |" %
          (a.storm, a.idle, a.label, redis_version(a.redis)))
    print("|---|---|---|---|")
    rows = [
        ("storm, keep open (s, best)", lambda x: x[0][0], "%.2f"),
        ("storm, keep open: listen overflows (least)", lambda x: x[0][2], "%d"),
        ("storm, close each (s, best)", lambda x: x[1][0], "%.2f"),
        ("storm, close each: listen overflows (least)", lambda x: x[1][2], "%d"),
        ("burst: connects not waiting for replies (s, best)", lambda x: x[3][0], "%.2f"),
        ("burst: slowest connect (s, least)", lambda x: x[3][1], "%.3f"),
        ("burst: listen overflows (least)", lambda x: x[3][2], "%d"),
        ("idle RSS per connection (KB)", lambda x: x[2][0], "%.2f"),
        ("idle RSS per connection after 3 s (KB)", lambda x: x[2][1], "%.2f"),
    ]
    for name, f, fmt in rows:
        ours, theirs = best(a.label, f), best("redis", f)
        ratio = ("%.2fx" % (ours / theirs)) if theirs > 0 else "-"
        print("| %s | %s | %s | %s |" % (name, fmt % ours, fmt % theirs, ratio))


def redis_version(binary):
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
        return out.split("v=")[1].split()[0]
    except (OSError, IndexError):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
