"""The fast path end to end (docs/fast-path.md): client memory registered over the Unix socket
(memfd + SCM_RIGHTS), KV.PUT/KV.GET/KV.MPUT/KV.MGET moving bytes between it and the keyspace,
checked descriptors, KV.PREFIX leases, and the same keyspace as SET/GET."""

import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from fastpath_util import FastConn, Segment
from resp_util import Err, Simple

pytestmark = pytest.mark.skipif(os.environ.get("STRATAKV_TARGET", "stratakv") == "redis",
                                reason="stratakv's own commands")

MiB = 1 << 20
OK = Simple("OK")


@pytest.fixture
def sock_path():
    d = tempfile.mkdtemp(prefix="skv-")
    yield os.path.join(d, "s.sock")


@pytest.fixture
def fast(start_server, sock_path):
    srv = start_server(unixsocket=sock_path, memory__capacity="256mb")
    conns = []

    def connect():
        c = FastConn(sock_path)
        conns.append(c)
        return c

    connect.server = srv
    yield connect
    for c in conns:
        c.close()


def data(n, seed):
    return random.Random(seed).randbytes(n)


def test_put_from_segment_reads_back_with_get_and_kv_get(fast):
    c = fast()
    seg = Segment(4 * MiB)
    c.register(seg)
    payload = data(3 * MiB + 17, 1)
    seg.write(100, payload)
    assert c.call("KV.PUT", "k", len(payload), seg.id, 100, len(payload)) == OK
    r = fast.server.client()
    assert r.get("k") == payload  # one keyspace: RESP GET sees the value
    r.set("s", b"from SET")
    assert c.call("KV.GET", "s", seg.id, 0, 4096) == 8
    assert seg.read(0, 8) == b"from SET"
    assert c.call("KV.GET", "k", seg.id, 0, 4 * MiB) == len(payload)
    assert seg.read(0, len(payload)) == payload
    assert c.call("KV.GET", "missing", seg.id, 0, 10) is None


@pytest.mark.parametrize("size", [1, 100, 16 * 1024, MiB, 32 * MiB, 64 * MiB])
def test_sizes_byte_exact(fast, size):
    c = fast()
    seg = Segment(size)
    out = Segment(size)
    c.register(seg)
    c.register(out)
    payload = data(size, size)
    seg.write(0, payload)
    assert c.call("KV.PUT", "v", size, seg.id, 0, size) == OK
    assert c.call("KV.GET", "v", out.id, 0, size) == size
    assert out.read(0, size) == payload
    assert c.call("STRLEN", "v") == size


@pytest.mark.parametrize("pieces", [1, 2, 7, 64])
def test_scatter_gather_pieces_across_segments(fast, pieces):
    c = fast()
    a, b = Segment(MiB), Segment(MiB)
    c.register(a)
    c.register(b)
    rng = random.Random(pieces)
    sgl, expect = [], b""
    off = {a.id: 0, b.id: 0}
    for i in range(pieces):
        seg = a if i % 2 == 0 else b
        n = rng.randint(1, 5000)
        chunk = data(n, i)
        seg.write(off[seg.id], chunk)
        sgl += [seg.id, off[seg.id], n]
        off[seg.id] += n + rng.randint(0, 100)
        expect += chunk
    assert c.call("KV.PUT", "sg", len(expect), *sgl) == OK
    assert fast.server.client().get("sg") == expect
    # Read back scattered over different boundaries: halves into two segments.
    out1, out2 = Segment(MiB), Segment(MiB)
    c.register(out1)
    c.register(out2)
    half = len(expect) // 2 or 1
    rest = len(expect) - half
    args = [out1.id, 0, half] + ([out2.id, 10, rest] if rest else [])
    assert c.call("KV.GET", "sg", *args) == len(expect)
    assert out1.read(0, half) + (out2.read(10, rest) if rest else b"") == expect


def test_bad_descriptors_move_nothing(fast):
    c, other = fast(), fast()
    seg = Segment(8192)
    c.register(seg)
    theirs = Segment(4096)
    other.register(theirs)
    seg.write(0, b"A" * 8192)
    assert c.call("KV.PUT", "x", 10, 999999, 0, 10) == \
        Err("ERR segment 999999 is not registered on this connection")
    assert c.call("KV.PUT", "x", 10, theirs.id, 0, 10) == \
        Err("ERR segment %d is not registered on this connection" % theirs.id)
    assert c.call("KV.PUT", "x", 10, seg.id, 8190, 10) == \
        Err("ERR descriptor (%d 8190 10) is outside its segment of 8192 bytes" % seg.id)
    assert c.call("KV.PUT", "x", 0, seg.id, 0, 0) == \
        Err("ERR descriptor (%d 0 0) is outside its segment of 8192 bytes" % seg.id)
    assert c.call("KV.PUT", "x", 11, seg.id, 0, 10) == \
        Err("ERR scatter-gather list is 10 bytes, total_length is 11")
    assert c.call("KV.PUT", "x", 10, seg.id, -1, 10) == Err("ERR value is not an integer or out of range")
    assert c.call("KV.PUT", "x", 10, seg.id, 0, 10, "BOGUS") == Err("ERR syntax error")
    assert c.call("EXISTS", "x") == 0
    # A window too small: an error, and not one byte written.
    assert c.call("SET", "big", b"B" * 5000) == OK
    assert c.call("KV.GET", "big", seg.id, 0, 4096) == \
        Err("ERR window of 4096 bytes is smaller than the value (5000 bytes)")
    assert seg.read(0, 8192) == b"A" * 8192
    # No descriptor passed with KV.REGISTER, and KV.REGISTER over TCP.
    assert c.call("KV.REGISTER", "SHM", 4096) == \
        Err("ERR KV.REGISTER SHM needs a file descriptor passed over the Unix socket")
    tcp = fast.server.raw()
    assert tcp.call("KV.REGISTER", "SHM", 4096) == \
        Err("ERR KV.REGISTER SHM needs a file descriptor passed over the Unix socket")
    # A segment longer than its file.
    small = Segment(4096)
    assert c.call_with_fd(small.fd, "KV.REGISTER", "SHM", 8192) == \
        Err("ERR segment length 8192 exceeds the shared memory file (4096 bytes)")
    assert c.call("KV.CONNECT", "VERBS", "0" * 32, 1, 1, 1024) == \
        Err("ERR RDMA is not available on this server")
    assert c.call("PING") == Simple("PONG")


def test_unregister_and_segments_freed_on_close(fast):
    c = fast()
    r = fast.server.client()
    base = r.info("fastpath")["fastpath_segments"]
    segs = [Segment(MiB) for _ in range(3)]
    for s in segs:
        c.register(s)
    assert r.info("fastpath")["fastpath_segments"] == base + 3
    assert r.info("fastpath")["fastpath_segment_bytes"] >= 3 * MiB
    assert c.call("KV.UNREGISTER", segs[0].id) == 1
    assert c.call("KV.UNREGISTER", segs[0].id) == 0
    assert c.call("KV.PUT", "k", 1, segs[0].id, 0, 1) == \
        Err("ERR segment %d is not registered on this connection" % segs[0].id)
    c.close()
    deadline = time.time() + 5
    while r.info("fastpath")["fastpath_segments"] != base and time.time() < deadline:
        time.sleep(0.02)
    assert r.info("fastpath")["fastpath_segments"] == base


def test_put_options_nx_and_expiry(fast):
    c = fast()
    seg = Segment(4096)
    c.register(seg)
    seg.write(0, b"first")
    assert c.call("KV.PUT", "k", 5, seg.id, 0, 5, "NX") == OK
    seg.write(0, b"again")
    assert c.call("KV.PUT", "k", 5, seg.id, 0, 5, "NX") is None
    assert c.call("GET", "k") == b"first"
    assert c.call("KV.PUT", "t", 5, seg.id, 0, 5, "PX", 100000) == OK
    assert 0 < c.call("PTTL", "t") <= 100000
    assert c.call("KV.PUT", "t", 5, seg.id, 0, 5, "EX", 0) == \
        Err("ERR invalid expire time in 'kv.put' command")
    assert c.call("KV.PUT", "e", 0) == OK  # an empty value needs no descriptor
    assert c.call("STRLEN", "e") == 0


def test_batches_of_256_with_a_missing_key_failing_alone(fast):
    c = fast()
    n, size = 256, 4096
    src, dst = Segment(n * size), Segment(n * size)
    c.register(src)
    c.register(dst)
    values = [data(size - i, i) for i in range(n)]
    args = [n]
    for i, v in enumerate(values):
        src.write(i * size, v)
        args += ["b:%d" % i, len(v), 1, src.id, i * size, len(v)]
    assert c.call("KV.MPUT", *args) == [OK] * n
    assert c.call("DEL", "b:7") == 1
    args = [n]
    for i in range(n):
        args += ["b:%d" % i, 1, dst.id, i * size, size]
    got = c.call("KV.MGET", *args)
    assert got[7] is None
    for i, v in enumerate(values):
        if i == 7:
            continue
        assert got[i] == len(v)
        assert dst.read(i * size, len(v)) == v
    # One bad descriptor fails its key only.
    got = c.call("KV.MPUT", 2, "ok", 3, 1, src.id, 0, 3, "bad", 3, 1, 424242, 0, 3)
    assert got[0] == OK
    assert got[1] == Err("ERR segment 424242 is not registered on this connection")
    assert c.call("KV.MPUT", 2, "ok", 3, 1, src.id, 0) == Err("ERR syntax error")


def test_prefix_counts_leading_keys_and_pins_them(fast):
    c = fast()
    for k in ("c1", "c2", "c3", "c5"):
        c.call("SET", k, b"x")
    assert c.call("KV.PREFIX", "c1", "c2", "c3", "c4", "c5") == 3
    assert c.call("KV.PREFIX", "c4", "c5") == 0
    r = fast.server.client()
    assert r.info("fastpath")["leased_keys"] == 0
    assert c.call("KV.PREFIX", "c1", "c2", "c3", "c4", "PIN", 5000) == 3
    assert r.info("fastpath")["leased_keys"] == 3
    assert c.call("KV.UNPIN", "c1", "c4") == 1
    assert r.info("fastpath")["leased_keys"] == 2
    assert c.call("KV.PREFIX", "c2", "PIN", 50) == 1  # extends, never shortens
    time.sleep(0.1)
    assert r.info("fastpath")["leased_keys"] == 2
    # Each client ends only its own leases: another's KV.UNPIN leaves c's in place ...
    other = fast()
    assert other.call("KV.PREFIX", "c2", "PIN", 5000) == 1
    assert other.call("KV.UNPIN", "c2", "c3") == 1
    assert r.info("fastpath")["leased_keys"] == 2
    # ... and closing a connection ends its leases.
    assert other.call("KV.PREFIX", "c5", "PIN", 5000) == 1
    assert r.info("fastpath")["leased_keys"] == 3
    other.close()
    deadline = time.time() + 5
    while r.info("fastpath")["leased_keys"] != 2 and time.time() < deadline:
        time.sleep(0.02)
    assert r.info("fastpath")["leased_keys"] == 2


def test_pinned_keys_survive_eviction_and_leases_expire(start_server, sock_path):
    srv = start_server(unixsocket=sock_path, memory__capacity="128mb", maxmemory="48mb",
                       maxmemory_policy="allkeys-lru", lease__ttl=3000)
    c = FastConn(sock_path)
    r = srv.client()
    big = data(MiB, 9)
    for i in range(8):
        r.set("pin:%d" % i, big)
    assert c.call("KV.PREFIX", *["pin:%d" % i for i in range(8)], "PIN", 60000) == 8  # capped at 3 s
    for i in range(80):  # 80 MiB through a 48 MiB limit; the pinned keys are the oldest
        r.set("cold:%d" % i, big)
    for i in range(8):
        assert r.get("pin:%d" % i) == big
    assert r.info()["evicted_keys"] > 30
    time.sleep(3.2)  # the leases end (lease.ttl caps PIN)
    assert r.info("fastpath")["leased_keys"] == 0
    for i in range(80, 160):
        r.set("cold:%d" % i, big)
    assert sum(r.exists("pin:%d" % i) for i in range(8)) < 8
    c.close()


def test_concurrent_clients_and_resp_mixed(fast):
    errors = []

    def worker(t):
        try:
            c = fast()
            seg = Segment(2 * MiB)
            c.register(seg)
            r = fast.server.client()
            for i in range(40):
                v = data(random.Random(t * 1000 + i).randint(1, 2 * MiB), t * 1000 + i)
                key = "t%d:%d" % (t, i)
                if i % 2:
                    seg.write(0, v)
                    assert c.call("KV.PUT", key, len(v), seg.id, 0, len(v)) == OK
                    assert r.get(key) == v
                else:
                    r.set(key, v)
                    assert c.call("KV.GET", key, seg.id, 0, 2 * MiB) == len(v)
                    assert seg.read(0, len(v)) == v
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_client_killed_mid_batch_leaks_nothing(fast, sock_path):
    r = fast.server.client()
    base = r.info("fastpath")["fastpath_segments"]
    script = r"""
import sys
sys.path.insert(0, %r)
from fastpath_util import FastConn, Segment
c = FastConn(%r)
seg = Segment(64 << 20)
for i in range(64):  # each value its own bytes: a partial or mixed one would show
    seg.write(i << 20, (b"%%08d" %% i) * (1 << 17))
c.register(seg)
n = 64
args = [n]
for i in range(n):
    args += ["kill:%%d" %% i, 1 << 20, 1, seg.id, i << 20, 1 << 20]
print("ready", flush=True)
while True:
    c.send_cmd("KV.MPUT", *args)
""" % (os.path.dirname(__file__), sock_path)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 10
    while r.info("fastpath")["fastpath_segments"] != base and time.time() < deadline:
        time.sleep(0.05)
    assert r.info("fastpath")["fastpath_segments"] == base
    # No partial value visible: each key is absent or whole.
    for i in range(64):
        v = r.get("kill:%d" % i)
        assert v is None or v == (b"%08d" % i) * (1 << 17), i
    assert r.ping()


def test_absurd_counts_are_syntax_errors(fast):
    c = fast()
    assert c.call("KV.MGET", 1, "k", 10 ** 15, 1, 0, 1) == Err("ERR syntax error")
    assert c.call("KV.MGET", 10 ** 15, "k", 1, 1, 0, 1) == Err("ERR syntax error")
    assert c.call("KV.MPUT", 1, "k", 1, 10 ** 15, 1, 0, 1) == Err("ERR syntax error")
    assert c.call("PING") == Simple("PONG")
