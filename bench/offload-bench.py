#!/usr/bin/env python3
"""offload-bench.py: large fast-path transfers off the I/O threads (issue 17, docs/fast-path.md
"Large transfers off the I/O threads"), before and after, in one run.

Each target gets a fresh server with ONE I/O thread (--threads 1: every connection shares it),
a Unix socket and a 2 GiB region. Targets:
  before   transfer.offload_threshold 0: every copy on the I/O thread (main before this change)
  after    the defaults (transfer.threads 2, transfer.offload_threshold 1mb)

Per target:
  1. throughput alone: one connection runs KV.MPUT (then KV.MGET) of BATCH values of SIZE bytes
     from/to a registered memfd, the same keys each time (their blocks are reused: no page
     faults); ROUNDS rounds of 1 s, alternating between the two servers; the median GB/s.
  2. latency under load: a loader process runs the same KV.MPUT loop for SECONDS while this
     process sends KV.PREFIX of 4 keys on another connection of the same I/O thread, one every
     millisecond (a fixed rate: the probe costs the loader the same CPU in both targets); p50/p99
     in ms, and the loader's GB/s meanwhile.
  3. latency idle: the same KV.PREFIX with no loader.

usage: bench/offload-bench.py [--size 4m] [--batch 8] [--seconds 5] [--rounds 7]
env: STRATAKV_SERVER (default build/release/bin/stratakv-server)
"""
import argparse, os, socket, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests/integration"))
from fastpath_util import FastConn, Segment  # noqa: E402

SERVER = os.environ.get("STRATAKV_SERVER", os.path.join(REPO, "build/release/bin/stratakv-server"))

LOADER = r"""
import sys, time
sys.path.insert(0, %(tests)r)
from fastpath_util import FastConn, Segment
from resp_util import Simple
c = FastConn(%(sock)r, timeout=120)
seg = Segment(%(batch)d * %(size)d)
c.register(seg)
seg.write(0, bytes(range(256)) * (%(batch)d * %(size)d // 256))
args = [%(batch)d]
for i in range(%(batch)d):
    args += ["load:%%d" %% i, %(size)d, 1, seg.id, i * %(size)d, %(size)d]
c.call("KV.MPUT", *args)  # the keys exist: later puts reuse freed blocks
print("ready", flush=True)
sys.stdin.readline()
n, t0 = 0, time.perf_counter()
end = t0 + %(seconds)f
while time.perf_counter() < end:
    r = c.call("KV.MPUT", *args)
    assert r == [Simple("OK")] * %(batch)d, r
    n += 1
print(n * %(batch)d * %(size)d / (time.perf_counter() - t0) / 1e9, flush=True)
"""


def parse_size(s):
    s = s.lower()
    for suffix, mul in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if s.endswith(suffix):
            return int(float(s[:-1]) * mul)
    return int(s)


def start(sock, extra):
    port_sock = socket.socket()
    port_sock.bind(("127.0.0.1", 0))
    port = port_sock.getsockname()[1]
    port_sock.close()
    log = open(sock + ".log", "w")
    p = subprocess.Popen([SERVER, "--port", str(port), "--bind", "127.0.0.1", "--unixsocket", sock,
                          "--threads", "1", "--memory.capacity", "2gb"] + extra,
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(400):
        if os.path.exists(sock):
            try:
                c = FastConn(sock)
                c.call("PING")
                return p, c
            except OSError:
                pass
        time.sleep(0.025)
    raise RuntimeError("server did not start")


def batch_args(cmd, seg, batch, size):
    args = [batch]
    for i in range(batch):
        if cmd == "KV.MPUT":
            args += ["load:%d" % i, size, 1, seg.id, i * size, size]
        else:
            args += ["load:%d" % i, 1, seg.id, i * size, size]
    return args


def throughput(c, seg, cmd, batch, size, seconds):
    args = batch_args(cmd, seg, batch, size)
    c.call(cmd, *args)  # warm
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        c.call(cmd, *args)
        n += 1
    return n * batch * size / (time.perf_counter() - t0) / 1e9


def latencies(c, seconds, interval=0.001):
    # A probe every `interval` s (a fixed rate, so the probe costs the loader the same CPU in
    # both targets); one that comes back late is followed at once by the next.
    out = []
    end = time.perf_counter() + seconds
    due = time.perf_counter()
    while time.perf_counter() < end:
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        due += interval
        t = time.perf_counter()
        c.call("KV.PREFIX", "p:0", "p:1", "p:2", "p:3")
        out.append((time.perf_counter() - t) * 1e3)
    out.sort()
    return out[len(out) // 2], out[int(len(out) * 0.99)], len(out)


def open_target(name, extra, a):
    d = tempfile.mkdtemp(prefix="skv-offload-")
    sock = os.path.join(d, "s.sock")
    p, c = start(sock, extra)
    for i in range(4):
        c.call("SET", "p:%d" % i, "x")
    seg = Segment(a.batch * a.size)
    c.register(seg)
    seg.write(0, bytes(range(256)) * (a.batch * a.size // 256))
    return dict(name=name, p=p, c=c, sock=sock, seg=seg, put=[], get=[])


def run_target(t, a):
    p, c, sock = t["p"], t["c"], t["sock"]
    try:
        put, get = sorted(t["put"])[len(t["put"]) // 2], sorted(t["get"])[len(t["get"]) // 2]
        idle = latencies(c, min(a.seconds, 2))
        loader = subprocess.Popen(
            [sys.executable, "-c", LOADER % dict(tests=os.path.join(REPO, "tests/integration"),
                                                 sock=sock, batch=a.batch, size=a.size,
                                                 seconds=a.seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert loader.stdout.readline().strip() == "ready"
        loader.stdin.write("go\n")
        loader.stdin.flush()
        time.sleep(0.2)
        loaded = latencies(c, a.seconds - 0.5)
        load_gbs = float(loader.stdout.readline())
        loader.wait()
        info = c.call("INFO", "fastpath")
        info = info.decode() if isinstance(info, bytes) else info
        off = [l for l in info.splitlines() if l.startswith("transfers_offloaded")][0]
        return dict(name=t["name"], put=put, get=get, idle=idle, loaded=loaded, load_gbs=load_gbs,
                    offloaded=off.split(":")[1])
    finally:
        c.close()
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="4m")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    a.size = parse_size(a.size)
    targets = [open_target("before", ["--transfer.offload_threshold", "0"], a),
               open_target("after", [], a)]
    # Throughput alone: short rounds alternating between the two servers (the machine's load
    # drifts; each figure is the median of its rounds).
    for _ in range(a.rounds):
        for t in targets:
            t["put"].append(throughput(t["c"], t["seg"], "KV.MPUT", a.batch, a.size, 1.0))
            t["get"].append(throughput(t["c"], t["seg"], "KV.MGET", a.batch, a.size, 1.0))
    rows = [run_target(t, a) for t in targets]
    print("KV.MPUT/KV.MGET of %d x %d bytes, --threads 1, %.0f s per phase" %
          (a.batch, a.size, a.seconds))
    print("| target | KV.MPUT GB/s alone | KV.MGET GB/s alone | KV.PREFIX p50/p99 ms idle | "
          "KV.PREFIX p50/p99 ms behind KV.MPUT (samples) | KV.MPUT GB/s meanwhile | offloaded |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %.2f | %.2f | %.3f / %.3f | %.3f / %.3f (%d) | %.2f | %s |" % (
            r["name"], r["put"], r["get"], r["idle"][0], r["idle"][1], r["loaded"][0],
            r["loaded"][1], r["loaded"][2], r["load_gbs"], r["offloaded"]))
    b, f = rows
    print("after/before: KV.MPUT alone %.2fx, KV.MGET alone %.2fx, KV.MPUT under PREFIX load "
          "%.2fx; KV.PREFIX p50 %.2fx, p99 %.2fx" % (
              f["put"] / b["put"], f["get"] / b["get"], f["load_gbs"] / b["load_gbs"],
              f["loaded"][0] / b["loaded"][0], f["loaded"][1] / b["loaded"][1]))


if __name__ == "__main__":
    main()
