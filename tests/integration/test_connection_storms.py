"""Connection storms and what idle connections cost (issue 16), side by side with redis-server
(Redis 7.0) in the same run: thousands of connects one after another are all answered while
another client's commands keep being answered; idle connections cost a few KB of the server's
memory; a connection that once held a large request gives its buffers back when it goes idle.
bench/conn-bench.py measures the same at larger scale (bench/RESULTS.md)."""

import re
import threading
import time

import pytest

from harness import launch_redis, launch_server, redis_binary, stop_servers, wait_until
from resp_util import RawConn, Simple, encode_command

# An idle connection's cost in the server's memory, per connection, once idle clients gave their
# read buffers back (bench/RESULTS.md, issue 16): by the allocator's count (INFO used_memory)
# about 5.5 KB, where it was 22 KB before (a 16 KiB read buffer each, held for good); resident
# memory 2.5-4 KB with 10,000 connections and 7-10 KB with this test's 2,000, where it was 13-16
# KB before and never went down (redis-server 7.0: 0-4 KB and about 9 KB in the same runs, its
# allocator too keeping freed pages a while). The bounds leave a margin both ways.
IDLE_KB_PER_CONNECTION = 12.0      # VmRSS
IDLE_USED_KB_PER_CONNECTION = 8.0  # used_memory


@pytest.fixture
def servers():
    """servers(**config) -> [stratakv, redis-server] (redis-server when installed); stopped at
    teardown."""
    started = []

    def start(**config):
        out = [launch_server(**config)]
        if redis_binary() is not None:
            out.append(launch_redis(**config))
        started.extend(out)
        return out

    yield start
    stop_servers(*started)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def connect_ping(srv):
    c = RawConn(srv.host, srv.port, timeout=30)
    assert c.call_raw("PING") == b"+PONG\r\n"
    return c


def used_memory(conn):
    return int(re.search(r"used_memory:(\d+)", conn.call("INFO", "memory").decode()).group(1))


def client_fields(conn, client_id):
    """CLIENT LIST's fields of the client `client_id`, as a dict of strings."""
    listing = conn.call("CLIENT", "LIST", "ID", str(client_id)).decode()
    return dict(kv.split("=", 1) for kv in listing.split())


def test_sequential_connect_storm(servers):
    """5,000 connects one after another, each answered +PONG and kept open: none refused or
    reset, while another client's commands keep being answered all along."""
    for srv in servers():
        busy = RawConn(srv.host, srv.port, timeout=30)
        stop = threading.Event()
        answered = []  # (time, ok) of each of the busy client's replies
        errors = []

        def keep_busy():
            try:
                i = 0
                while not stop.is_set():
                    i += 1
                    busy.send(encode_command("SET", "busy", i) + encode_command("GET", "busy"))
                    ok = busy.read_raw_reply() == b"+OK\r\n"
                    ok = ok and busy.read_raw_reply() == b"$%d\r\n%d\r\n" % (len(str(i)), i)
                    answered.append((time.monotonic(), ok))
            except Exception as e:  # reported by the main thread
                errors.append(e)

        t = threading.Thread(target=keep_busy)
        t.start()
        kept = []
        try:
            start = time.monotonic()
            for _ in range(5000):
                kept.append(connect_ping(srv))  # a refused or reset connect raises here
            end = time.monotonic()
        finally:
            stop.set()
            t.join(30)
        try:
            assert not errors, (srv.name, errors)
            assert answered and all(ok for _, ok in answered), srv.name
            during = [at for at, _ in answered if start <= at <= end]
            assert during, srv.name
            # Answered all along: no stall of the other client of the kind the SYN retries of
            # an overflowing listen queue cause (1 s each) or worse. Liveness, not speed.
            gaps = [b - a for a, b in zip([start] + during, during + [end])]
            assert max(gaps) < 5.0, (srv.name, max(gaps))
            info = busy.call("INFO", "clients").decode()
            assert int(re.search(r"connected_clients:(\d+)", info).group(1)) >= 5001, srv.name
            for c in kept[::500]:
                assert c.call("PING") == Simple("PONG")
        finally:
            for c in kept:
                c.close()
            busy.close()


def test_idle_connections_cost_a_few_kb(servers):
    """2,000 connections that each answered a PING and went idle: once their buffers went back
    (idle for 2 s, as Redis's clientsCron frees idle query buffers), the server's RSS grew by
    less than IDLE_KB_PER_CONNECTION per connection. A connection that never sent a byte holds
    no read buffer at all."""
    n = 2000
    results = {}
    sanitized = False
    for srv in servers():
        probe = srv.raw()
        probe_id = probe.call("CLIENT", "ID")
        time.sleep(0.5)
        before = rss_kb(srv.proc.pid)
        used_before = used_memory(probe)
        conns = [connect_ping(srv) for _ in range(n)]
        sample = [str(c.call("CLIENT", "ID")) for c in conns[::100]]
        fresh = RawConn(srv.host, srv.port)
        try:
            # Ids count up from the probe's: the 2,000, then the fresh one.
            fresh_line = wait_until("the fresh client registered", lambda: probe.call(
                "CLIENT", "LIST", "ID", str(probe_id + n + 1)).decode(), timeout=10)
            if srv.kind == "stratakv":
                # Idle for 2 s and swept by the once-a-second cron: no read buffer left.
                assert " rbs=16384 " in probe.call("CLIENT", "LIST", "ID", *sample).decode()
                wait_until("idle clients giving back their read buffers",
                           lambda: probe.call("CLIENT", "LIST", "ID", *sample).decode()
                           .count(" rbs=0 ") == len(sample), timeout=20)
                assert " rbs=0 " in fresh_line and " qbuf-free=0 " in fresh_line, fresh_line
                time.sleep(0.3)  # used_memory is refreshed by the cron, 10 times a second
                used_per_conn = (used_memory(probe) - used_before) / n / 1024
                assert used_per_conn < IDLE_USED_KB_PER_CONNECTION, used_per_conn
                # The allocator hands freed pages back to the system within ~10 s (jemalloc's
                # dirty page decay): memory settles below the bound, and stays there. A
                # sanitizer build has ASan's allocator instead (redzones, a quarantine of freed
                # blocks, no decay): its RSS says nothing of ours, and used_memory above still
                # counts what the connections hold.
                sanitized = "libasan" in open("/proc/%d/maps" % srv.proc.pid).read()
                if not sanitized:
                    wait_until("RSS per idle connection below %.1f KB" % IDLE_KB_PER_CONNECTION,
                               lambda: (rss_kb(srv.proc.pid) - before) / n
                               < IDLE_KB_PER_CONNECTION, timeout=30)
            else:
                time.sleep(3.5)
            per_conn = (rss_kb(srv.proc.pid) - before) / n
            results[srv.kind] = per_conn
            for c in conns[::200]:
                assert c.call("PING") == Simple("PONG")  # and they still work
        finally:
            fresh.close()
            for c in conns:
                c.close()
    print("idle RSS KB per connection: %r" % results)
    if not sanitized:
        assert results["stratakv"] < IDLE_KB_PER_CONNECTION, results


def test_large_request_buffers_given_back_when_idle(servers):
    """A connection that sent an 8 MB MSET and a pipeline of GETs holds what they grew (qbuf-free
    counts the parser's kept capacity) until it is idle for 2 s; then CLIENT LIST shows qbuf=0
    qbuf-free=0, as Redis's after clientsCron, and stratakv's used_memory went down with it."""
    pairs = 80000
    args = ["MSET"]
    for i in range(pairs):
        args += ["k%06d" % i, "v" * 90]
    mset = encode_command(*args)
    assert len(mset) > 8 * 1024 * 1024
    value = "x" * 8000
    gets = encode_command("GET", "big") * 200
    for srv in servers():
        big = srv.raw(timeout=60)
        probe = srv.raw()
        big_id = big.call("CLIENT", "ID")
        big.send(mset)
        assert big.read_raw_reply(timeout=60) == b"+OK\r\n"
        assert big.call_raw("SET", "big", value) == b"+OK\r\n"
        big.send(gets)
        for _ in range(200):
            assert big.read_reply() == value.encode()
        used_busy = used_memory(probe)
        fields = client_fields(probe, big_id)
        if srv.kind == "stratakv":
            # What the MSET grew (its argument vectors) is still held: the check below can fail.
            assert int(fields["qbuf-free"]) > 4 * 1024 * 1024, fields
        wait_until("the idle client's buffers given back",
                   lambda: client_fields(probe, big_id)["qbuf-free"] == "0", timeout=20)
        fields = client_fields(probe, big_id)
        assert fields["qbuf"] == "0", (srv.name, fields)
        if srv.kind == "stratakv":
            assert fields["rbs"] == "0", fields
            time.sleep(0.3)  # used_memory is refreshed by the cron, 10 times a second
            used_idle = used_memory(probe)
            assert used_busy - used_idle > 4 * 1024 * 1024, (used_busy, used_idle)
        # The connection works as before, taking a new buffer.
        assert big.call_raw("GET", "k079999") == b"$90\r\n" + b"v" * 90 + b"\r\n"
        assert client_fields(probe, big_id)["qbuf-free"] != "0", srv.name
