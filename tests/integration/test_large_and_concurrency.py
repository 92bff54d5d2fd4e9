"""Big values, many concurrent connections, maxclients and idle timeout."""

import os
import threading
import time

import pytest
import redis

from resp_util import OK, Simple, RawConn, encode_command

MiB = 1024 * 1024


@pytest.mark.parametrize("size", [1, MiB, 64 * MiB], ids=["1B", "1MiB", "64MiB"])
def test_value_round_trip_byte_exact(r, raw, size):
    value = os.urandom(size)
    assert r.set("big", value) is True
    assert r.strlen("big") == size
    got = r.get("big")
    assert len(got) == size
    assert got == value
    # the raw reply is exactly $<len>\r\n<payload>\r\n (clients compare this header byte for byte)
    c = raw(timeout=60)
    c.send_cmd("GET", "big")
    header = b"$%d\r\n" % size
    assert c.read_exact(len(header), timeout=60) == header
    assert c.read_exact(size, timeout=60) == value
    assert c.read_exact(2) == b"\r\n"
    # overwrite with a different value of the same size (rotated by one byte)
    value2 = value[1:] + value[:1] if size > 1 else bytes([value[0] ^ 0xFF])
    assert c.call("SET", "big", value2, timeout=60) == OK
    assert r.get("big") == value2
    assert r.delete("big") == 1


def test_getrange_and_append_on_large_value(r):
    value = os.urandom(4 * MiB)
    r.set("lv", value)
    assert r.getrange("lv", MiB, 2 * MiB - 1) == value[MiB:2 * MiB]
    assert r.getrange("lv", -10, -1) == value[-10:]
    tail = os.urandom(MiB)
    assert r.append("lv", tail) == 5 * MiB
    assert r.get("lv") == value + tail


def test_mget_many_large_values(r, raw):
    values = {("mv:%d" % i).encode(): os.urandom(MiB + i) for i in range(8)}
    r.mset(values)
    keys = list(values)
    assert r.mget(keys + [b"mv:none"]) == [values[k] for k in keys] + [None]
    c = raw(timeout=30)
    c.send_cmd("MGET", *keys)
    assert c.read_exact(4) == b"*8\r\n"
    for k in keys:
        v = values[k]
        hdr = b"$%d\r\n" % len(v)
        assert c.read_exact(len(hdr)) == hdr
        assert c.read_exact(len(v)) == v
        assert c.read_exact(2) == b"\r\n"


def test_pipelined_large_values_over_several_connections(server, r):
    """LMCache style: several connections, each pipelining batches of 8 MiB values."""
    errors = []
    nconn, per_conn, size = 4, 4, 8 * MiB

    def worker(w):
        try:
            c = RawConn(server.host, server.port, timeout=60)
            try:
                base = os.urandom(size)
                vals = [base[k * 4099:] + base[:k * 4099] + b"" for k in range(1, per_conn + 1)]
                vals = [bytes([w]) + v[1:] for v in vals]  # distinct per worker and per key
                c.send(b"".join(encode_command("SET", "lm:%d:%d" % (w, i), v) for i, v in enumerate(vals)))
                for _ in range(per_conn):
                    assert c.read_raw_reply(timeout=60) == b"+OK\r\n"
                c.send(b"".join(encode_command("GET", "lm:%d:%d" % (w, i)) for i in range(per_conn)))
                hdr = b"$%d\r\n" % size
                for v in vals:
                    assert c.read_exact(len(hdr), timeout=60) == hdr
                    assert c.read_exact(size, timeout=60) == v
                    assert c.read_exact(2, timeout=60) == b"\r\n"
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((w, repr(e)))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(nconn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert r.dbsize() == nconn * per_conn


def test_value_in_flight_is_not_torn_by_overwrite_or_delete(r, raw):
    size = 32 * MiB
    original = os.urandom(size)
    r.set("inflight", original)
    replacement = original[::-1]
    reader = raw(timeout=60)
    writer = raw(timeout=60)
    reader.send_cmd("GET", "inflight")
    hdr = b"$%d\r\n" % size
    assert reader.read_exact(len(hdr), timeout=60) == hdr
    first = reader.read_exact(MiB, timeout=60)
    # while the reply is still being transferred, overwrite and then delete the key
    assert writer.call("SET", "inflight", replacement, timeout=60) == OK
    assert writer.call("DEL", "inflight") == 1
    rest = reader.read_exact(size - MiB, timeout=60)
    assert reader.read_exact(2) == b"\r\n"
    assert first + rest == original
    assert r.exists("inflight") == 0


def test_200_concurrent_connections(server, r):
    n, ops = 200, 20
    errors = []
    counts = {}
    barrier = threading.Barrier(n + 1, timeout=60)

    def worker(i):
        client = redis.Redis(host=server.host, port=server.port, socket_timeout=30,
                             socket_connect_timeout=10, single_connection_client=True)
        try:
            assert client.ping() is True
            barrier.wait()  # all connected at once
            for j in range(ops):
                key = "conc:%d:%d" % (i, j)
                val = ("%d-%d-" % (i, j)).encode() * (1 + j)
                assert client.set(key, val) is True
                assert client.get(key) == val
            assert client.incrby("conc:counter", ops) > 0
            barrier.wait()  # keep every connection open until all are done
        except BaseException as e:  # noqa: BLE001
            errors.append((i, repr(e)))
            barrier.abort()
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
        counts["connected"] = r.info("clients")["connected_clients"]
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    assert counts["connected"] >= n + 1
    assert r.dbsize() == n * ops + 1
    assert r.get("conc:counter") == str(n * ops).encode()
    for i in (0, 77, 199):
        assert r.get("conc:%d:%d" % (i, ops - 1)) == ("%d-%d-" % (i, ops - 1)).encode() * ops


def test_maxclients(start_server):
    srv = start_server(maxclients=5)
    conns = []

    def connect_accepted():
        # The harness's own readiness connection may still hold a slot for a moment: the
        # server frees it when it reads that connection's close, on another thread.
        deadline = time.monotonic() + 3
        while True:
            c = RawConn(srv.host, srv.port)
            reply = c.call("PING")
            if reply == Simple("PONG") or time.monotonic() > deadline:
                return c, reply
            c.close()
            time.sleep(0.05)

    try:
        for _ in range(5):
            c, reply = connect_accepted()
            conns.append(c)
            assert reply == Simple("PONG")
        extra = RawConn(srv.host, srv.port)
        data, closed = extra.read_until_closed(timeout=5)
        extra.close()
        assert data == b"-ERR max number of clients reached\r\n"
        assert closed
        with pytest.raises(redis.ConnectionError):
            redis.Redis(host=srv.host, port=srv.port, socket_timeout=5).ping()
        # the 5 accepted connections still work
        for c in conns:
            assert c.call("PING") == Simple("PONG")
        # after one leaves, a new client is accepted
        conns.pop().close()
        deadline = time.monotonic() + 3
        while True:
            c = RawConn(srv.host, srv.port)
            try:
                c.send_cmd("PING")
                reply = c.read_reply(timeout=2)
            except Exception as e:  # noqa: BLE001
                reply = e
            if reply == Simple("PONG"):
                conns.append(c)
                break
            c.close()
            assert time.monotonic() < deadline, "slot was not freed: %r" % (reply,)
            time.sleep(0.05)
    finally:
        for c in conns:
            c.close()


def test_idle_timeout_closes_idle_connections(start_server):
    srv = start_server(timeout=1)
    idle = RawConn(srv.host, srv.port)
    active = RawConn(srv.host, srv.port)
    try:
        assert idle.call("PING") == Simple("PONG")
        t0 = time.monotonic()
        closed_at = None
        while time.monotonic() - t0 < 3.5:
            if closed_at is not None and time.monotonic() - t0 > 2.0:
                break
            assert active.call("PING") == Simple("PONG")
            if closed_at is None:
                data, closed = idle.read_until_closed(timeout=0.25)
                assert data == b""
                if closed:
                    closed_at = time.monotonic() - t0
        assert closed_at is not None, "idle connection was not closed within 3.5 s (timeout 1)"
        assert 0.9 <= closed_at <= 3.5, closed_at
        assert active.call("PING") == Simple("PONG")
    finally:
        idle.close()
        active.close()
