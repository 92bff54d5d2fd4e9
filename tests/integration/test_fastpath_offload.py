"""Large fast-path copies off the I/O threads (docs/fast-path.md, "Large transfers off the I/O
threads"): KV.PUT/KV.GET/KV.MPUT/KV.MGET of transfer.offload_threshold bytes or more run on the
transfer pool while the connection waits; its pipelined requests are answered after it, in order;
other connections of the same I/O thread are served meanwhile; a client killed mid-copy costs
nothing. INFO's transfers_offloaded says which path each command took."""

import os
import random
import signal
import subprocess
import sys
import tempfile

import pytest

from fastpath_util import FastConn, Segment
from harness import wait_until
from resp_util import Err, Simple, encode_command as encode

pytestmark = pytest.mark.skipif(os.environ.get("STRATAKV_TARGET", "stratakv") == "redis",
                                reason="stratakv's own commands")

MiB = 1 << 20
OK = Simple("OK")


def data(n, seed):
    return random.Random(seed).randbytes(n)


@pytest.fixture
def sock_path():
    d = tempfile.mkdtemp(prefix="skv-")
    yield os.path.join(d, "s.sock")


def offloaded(r):
    info = r.info("fastpath")
    return info["transfers_offloaded"], info["transfer_offloaded_bytes"]


@pytest.mark.parametrize("threshold", ["1mb", "0"])
def test_large_puts_and_gets_byte_exact_on_and_off_the_pool(start_server, sock_path, threshold):
    srv = start_server(unixsocket=sock_path, memory__capacity="512mb",
                       transfer__offload_threshold=threshold)
    r = srv.client()
    c = FastConn(sock_path)
    src, dst = Segment(64 * MiB), Segment(64 * MiB)
    c.register(src)
    c.register(dst)
    # KV.PUT / KV.GET of one value above the threshold, and one below it.
    big, small = data(24 * MiB + 3, 1), data(1000, 2)
    src.write(5, big)
    assert c.call("KV.PUT", "big", len(big), src.id, 5, len(big)) == OK
    src.write(0, small)
    assert c.call("KV.PUT", "small", len(small), src.id, 0, len(small)) == OK
    assert r.get("big") == big and r.get("small") == small
    assert c.call("KV.GET", "big", dst.id, 0, 64 * MiB) == len(big)
    assert dst.read(0, len(big)) == big
    # KV.MPUT / KV.MGET: 12 values of 1-5 MiB in scattered pieces, one failing entry, NX.
    values = [data(random.Random(i).randint(MiB, 5 * MiB), 10 + i) for i in range(12)]
    args, at = [len(values) + 1], 0
    for i, v in enumerate(values):
        src.write(at, v)
        half = len(v) // 2
        args += ["m:%d" % i, len(v), 2, src.id, at, half, src.id, at + half, len(v) - half]
        at += len(v)
    args += ["bad", 10, 1, 424242, 0, 10]
    got = c.call("KV.MPUT", *args)
    assert got[:-1] == [OK] * len(values)
    assert got[-1] == Err("ERR segment 424242 is not registered on this connection")
    for i, v in enumerate(values):
        assert r.get("m:%d" % i) == v
    args, at = [len(values) + 1], 0
    for i, v in enumerate(values):
        args += ["m:%d" % i, 1, dst.id, at, len(v)]
        at += len(v)
    args += ["missing", 1, dst.id, at, 10]
    assert c.call("KV.MGET", *args) == [len(v) for v in values] + [None]
    at = 0
    for v in values:
        assert dst.read(at, len(v)) == v
        at += len(v)
    # NX on an offloaded batch: existing keys are left as they were, new ones are put.
    src.write(0, big[:2 * MiB])
    got = c.call("KV.MPUT", 2, "m:0", 2 * MiB, 1, src.id, 0, 2 * MiB, "new", MiB, 1, src.id, 0,
                 MiB, "NX")
    assert got == [None, OK]
    assert r.get("m:0") == values[0] and r.get("new") == big[:MiB]
    count, nbytes = offloaded(r)
    if threshold == "0":
        assert (count, nbytes) == (0, 0)
    else:
        # big put and get, the two batches, the NX batch; the 1000-byte put stayed inline.
        total = 2 * len(big) + 2 * sum(len(v) for v in values) + 3 * MiB
        assert (count, nbytes) == (5, total)
    assert r.info("fastpath")["transfers_in_flight"] == 0
    c.close()


def test_pipelined_requests_behind_an_offloaded_copy_answer_in_order(start_server, sock_path):
    srv = start_server(unixsocket=sock_path, memory__capacity="512mb", threads=1)
    r = srv.client()
    c = FastConn(sock_path)
    src, dst = Segment(64 * MiB), Segment(64 * MiB)
    c.register(src)
    c.register(dst)
    v = data(48 * MiB, 3)
    src.write(0, v)
    r.set("n", 10)
    # One write: a large put, then commands that read what it wrote and what came before.
    c.send(b"".join(encode(*cmd) for cmd in [
        ("KV.PUT", "p", len(v), src.id, 0, len(v)),
        ("STRLEN", "p"),
        ("INCR", "n"),
        ("KV.GET", "p", dst.id, 0, 64 * MiB),
        ("KV.MGET", 2, "p", 1, dst.id, 0, 64 * MiB, "nope", 1, dst.id, 0, 1),
        ("INCR", "n"),
        ("PING",),
    ]))
    assert c.read_reply() == OK
    assert c.read_reply() == len(v)  # the put was published before the next request ran
    assert c.read_reply() == 11
    assert c.read_reply() == len(v)
    assert c.read_reply() == [len(v), None]
    assert c.read_reply() == 12
    assert c.read_reply() == Simple("PONG")
    assert dst.read(0, len(v)) == v
    assert offloaded(r)[0] == 3
    c.close()


def in_flight(info):
    """transfers_in_flight from the raw reply of INFO fastpath."""
    text = info.decode() if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        if line.startswith("transfers_in_flight:"):
            return int(line.split(":")[1])
    raise AssertionError("no transfers_in_flight in %r" % text)


def test_other_connections_of_the_thread_are_served_during_a_copy(start_server, sock_path):
    # One I/O thread: every connection shares it. While a large KV.MPUT copies on the pool,
    # another connection's PING is answered, and INFO, pipelined right behind that PING, shows
    # the copy still in flight: the PING was answered before the KV.MPUT's reply was written (it
    # is written after the copy ends). With the copy inline (threshold 0) the PING waits behind
    # it and transfers_in_flight is never seen above 0.
    srv = start_server(unixsocket=sock_path, memory__capacity="1gb", threads=1)
    c, other = FastConn(sock_path), FastConn(sock_path)
    src = Segment(256 * MiB)
    c.register(src)
    src.write(0, data(MiB, 4) * 256)
    n, size = 64, 4 * MiB
    args = [n]
    for i in range(n):
        args += ["big:%d" % i, size, 1, src.id, i * size, size]
    seen_in_flight = 0
    for attempt in range(5):
        c.send_cmd("KV.MPUT", *args)
        while True:
            other.send(encode("PING") + encode("INFO", "fastpath"))
            assert other.read_reply() == Simple("PONG")
            if in_flight(other.read_reply()) == 0:
                break  # the copy is over (or not begun): its reply comes next
            seen_in_flight += 1
        assert c.read_reply(timeout=60) == [OK] * n
        if seen_in_flight:
            break
    assert seen_in_flight > 0
    assert srv.client().get("big:63") == data(MiB, 4) * 4
    c.close()
    other.close()


def test_client_killed_mid_offload_costs_nothing(start_server, sock_path):
    srv = start_server(unixsocket=sock_path, memory__capacity="1gb", threads=1)
    r = srv.client()
    base_segments = r.info("fastpath")["fastpath_segments"]
    script = r"""
import sys
sys.path.insert(0, %r)
from fastpath_util import FastConn, Segment
c = FastConn(%r)
seg = Segment(256 << 20)
c.register(seg)
n = 64
args = [n]
for i in range(n):
    args += ["kill:%%d" %% i, 4 << 20, 1, seg.id, i << 22, 4 << 20]
c.send_cmd("KV.MPUT", *args)
print("sent", flush=True)
while True:
    c.send_cmd("KV.MPUT", *args)
""" % (os.path.dirname(__file__), sock_path)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"sent"
        # Killed while a copy is on the pool.
        other = FastConn(sock_path)
        for _ in range(5000):
            if in_flight(other.call("INFO", "fastpath")) > 0:
                break
        else:
            raise AssertionError("no copy was ever seen in flight")
        p.send_signal(signal.SIGKILL)
    finally:
        p.kill()
        p.wait()
    # The pool finishes the copy, the result is dropped, the segment unmapped.
    wait_until("segments freed", lambda: r.info("fastpath")["fastpath_segments"] == base_segments,
               timeout=30)
    wait_until("no copy in flight", lambda: r.info("fastpath")["transfers_in_flight"] == 0,
               timeout=30)
    assert r.info("fastpath")["transfers_offloaded"] >= 1
    assert r.ping()
    assert r.set("after", b"x") and r.get("after") == b"x"
    # Whatever was published is whole.
    for i in range(64):
        v = r.get("kill:%d" % i)
        assert v is None or len(v) == 4 * MiB


def test_exec_copies_inline_and_scripts_are_refused(start_server, sock_path):
    srv = start_server(unixsocket=sock_path, memory__capacity="256mb")
    r = srv.client()
    c = FastConn(sock_path)
    src = Segment(8 * MiB)
    c.register(src)
    v = data(4 * MiB, 5)
    src.write(0, v)
    assert c.call("MULTI") == OK
    assert c.call("KV.PUT", "t", len(v), src.id, 0, len(v)) == Simple("QUEUED")
    assert c.call("STRLEN", "t") == Simple("QUEUED")
    assert c.call("EXEC") == [OK, len(v)]
    assert r.get("t") == v
    # Scripts are refused the fast path's commands, as before.
    got = c.call("EVAL", "return redis.call('KV.PUT', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[1])",
                 1, "s", len(v), src.id)
    assert isinstance(got, Err) and "kv.put" in got
    assert r.exists("s") == 0
    assert offloaded(r) == (0, 0)  # inside EXEC nothing suspends: the copy ran inline
    assert c.call("KV.PUT", "u", len(v), src.id, 0, len(v)) == OK
    assert offloaded(r) == (1, len(v))
    c.close()


def test_sdk_large_values_through_the_pool(start_server, sock_path):
    stratakv = pytest.importorskip("stratakv")
    srv = start_server(unixsocket=sock_path, memory__capacity="512mb")
    r = srv.client()
    kv = stratakv.Client("unix://" + sock_path)
    if kv.transport != "shm":
        pytest.skip("no shm fast path")
    big = data(40 * MiB + 7, 6)
    assert kv.put("sdk:big", big) is True
    assert kv.get("sdk:big") == big
    keys = ["sdk:%d" % i for i in range(8)]
    values = [data(3 * MiB + i, 20 + i) for i in range(8)]
    assert kv.batch_put(keys, values) == [True] * 8
    targets = [bytearray(len(v)) for v in values]
    assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
    assert [bytes(t) for t in targets] == values
    assert r.get("sdk:3") == values[3]
    assert offloaded(r)[0] >= 4


def test_connection_killed_mid_offload_drops_the_result(start_server, sock_path):
    # CLIENT KILL from another connection of the same I/O thread while the copy is on the pool:
    # the copy finishes, nothing of it is published, no reply is written.
    srv = start_server(unixsocket=sock_path, memory__capacity="1gb", threads=1)
    r = srv.client()
    c, other = FastConn(sock_path), FastConn(sock_path)
    cid = c.call("CLIENT", "ID")
    src = Segment(256 * MiB)
    c.register(src)
    n, size = 64, 4 * MiB
    args = [n]
    for i in range(n):
        args += ["dropped:%d" % i, size, 1, src.id, i * size, size]
    for attempt in range(5):
        c.send_cmd("KV.MPUT", *args)
        for _ in range(5000):
            if in_flight(other.call("INFO", "fastpath")) > 0:
                break
        if in_flight(other.call("INFO", "fastpath")) > 0:
            break
        assert c.read_reply(timeout=60) == [OK] * n  # over before it was seen: try again
        assert other.call("DEL", *["dropped:%d" % i for i in range(n)]) == n
    else:
        raise AssertionError("no copy was ever seen in flight")
    assert other.call("CLIENT", "KILL", "ID", cid) == 1
    wait_until("no copy in flight", lambda: r.info("fastpath")["transfers_in_flight"] == 0,
               timeout=30)
    with pytest.raises(Exception):
        c.read_reply(timeout=10)  # closed with no reply
    assert r.exists(*["dropped:%d" % i for i in range(n)]) == 0
    assert other.call("PING") == Simple("PONG")
    other.close()


def store_rounds(sock_path, n_clients, rounds, per_batch, size, stop_at_oom=False):
    """n_clients threads, each on its own connection and segment, store `rounds` KV.MPUTs of
    `per_batch` values of `size` bytes (keys t<client>:<round>:<i>). Returns the replies that
    were not +OK, and the values last stored per key."""
    import threading
    bad, stored, lock = [], {}, threading.Lock()
    seen_oom = threading.Event()

    def client(t):
        c = FastConn(sock_path)
        seg = Segment(per_batch * size)
        c.register(seg)
        # The segment is written once: each round stores the same bytes under new keys, so
        # the clients keep the server busy.
        blobs = [data(size, t * 100 + i) for i in range(per_batch)]
        for i, v in enumerate(blobs):
            seg.write(i * size, v)
        for rnd in range(rounds):
            if stop_at_oom and seen_oom.is_set():
                break
            args, values = [per_batch], []
            for i, v in enumerate(blobs):
                args += ["t%d:%d:%d" % (t, rnd, i), size, 1, seg.id, i * size, size]
                values.append(("t%d:%d:%d" % (t, rnd, i), v))
            got = c.call("KV.MPUT", *args)
            replies = got if isinstance(got, list) else [got]
            with lock:
                for (k, v), rep in zip(values, replies):
                    if rep == OK:
                        stored[k] = v
                bad.extend(rep for rep in replies if rep != OK)
            if any(rep != OK for rep in replies):
                seen_oom.set()
        c.close()
        seg.close()

    threads = [threading.Thread(target=client, args=(t,)) for t in range(n_clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return bad, stored


def test_stores_wait_for_the_memory_copies_hold(start_server, sock_path):
    """Four clients each store batches of 4 x 6 MiB into 64 MiB under allkeys-lru: copies in
    flight (96 MiB asked at once) hold more than memory, and nothing else is evictable. A
    store that finds no room waits for them (memory.max_room_wait) and is never refused;
    with the wait off (0) the same load gets -OOM, as every store did before the wait."""
    srv = start_server(unixsocket=sock_path, memory__capacity="64mb", maxmemory="64mb",
                       maxmemory_policy="allkeys-lru", transfer__offload_threshold="1mb")
    r = srv.client()
    bad, stored = store_rounds(sock_path, n_clients=4, rounds=12, per_batch=4, size=6 * MiB)
    assert bad == [], bad[:3]
    assert r.info("memory")["write_room_waits"] > 0
    # What is left is byte-exact (the background eviction pass may still take some).
    found = 0
    for k, v in stored.items():
        got = r.get(k)
        if got is not None:
            assert got == v, k
            found += 1
    assert found >= 1
    assert r.info("stats")["evicted_keys"] > 0
    # The control: without the wait, -OOM (the stage-5 refusal or a per-entry one).
    assert r.config_set("memory.max_room_wait", 0)
    bad, _ = store_rounds(sock_path, n_clients=4, rounds=40, per_batch=4, size=6 * MiB, stop_at_oom=True)
    assert bad and all(b == Err("OOM command not allowed when used memory > 'maxmemory'.") for b in bad), bad[:3]
