"""Clients that vanish mid-command (issue 16, "Injected faults"): killed mid-transfer of a large
SET, mid-pipeline of large SETs, mid-MULTI. No partial value is ever visible, the memory their
values took comes back, and the server keeps serving. Under ASan (CI) LeakSanitizer checks at
the server's exit that nothing of theirs leaked. (A fast-path client killed mid-KV.MPUT is
test_fastpath.py's test_client_killed_mid_batch_leaks_nothing.)"""

import socket
import struct

from harness import wait_until
from resp_util import OK, encode_command

MiB = 1024 * 1024


def pattern(key, size):
    seed = key.encode() + b"|"
    return (seed * (size // len(seed) + 1))[:size]


def value_bytes(r):
    """Bytes of value blocks in the memory region (INFO tiering memory_bytes)."""
    return r.info("tiering")["memory_bytes"]


def kill(conn):
    """Closes `conn`'s socket with a reset (SO_LINGER 0), as a killed process's would be."""
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.sock.close()


def test_killed_mid_large_set_leaves_no_value_and_no_memory(r, raw):
    base = value_bytes(r)
    c = raw(timeout=30)
    size = 32 * MiB
    head = encode_command("SET", "partial", b"x")[: -len(b"$1\r\nx\r\n")]
    c.send(head + b"$%d\r\n" % size + pattern("partial", 8 * MiB))  # a quarter of the bulk
    # The server has reserved the value's block and is reading into it: then the client dies.
    wait_until("the bulk's block", lambda: value_bytes(r) >= base + size)
    kill(c)
    wait_until("the block freed", lambda: value_bytes(r) <= base)
    assert r.exists("partial") == 0
    assert r.set("after", b"ok") and r.get("after") == b"ok"


def test_killed_mid_pipeline_of_large_sets_shows_whole_values_only(r, raw):
    base = value_bytes(r)
    c = raw(timeout=30)
    size = 4 * MiB
    keys = ["pipe:%d" % i for i in range(4)]
    data = b"".join(encode_command("SET", k, pattern(k, size)) for k in keys)
    last = encode_command("SET", "pipe:cut", pattern("pipe:cut", size))
    c.send(data + last[: len(last) // 2])  # the fifth SET stops halfway
    # Whatever of the first four the server read before the reset is there whole; the fifth
    # never is.
    wait_until("the complete SETs", lambda: r.exists(*keys) == 4 or value_bytes(r) > base)
    kill(c)
    wait_until("the cut value's block freed",
               lambda: value_bytes(r) <= base + r.exists(*keys) * (size + MiB))
    for k in keys:
        v = r.get(k)
        assert v is None or v == pattern(k, size), k
    assert r.exists("pipe:cut") == 0
    r.delete(*keys)
    wait_until("every block freed", lambda: value_bytes(r) <= base)


def test_killed_mid_multi_applies_nothing(r, raw):
    base = value_bytes(r)
    # Queued commands, large values among them, and no EXEC.
    c = raw(timeout=30)
    assert c.call("MULTI") == OK
    for k in ("m:small", "m:big"):
        c.send_cmd("SET", k, pattern(k, 8 * MiB if k == "m:big" else 10))
        assert c.read_reply() is not None  # QUEUED
    kill(c)
    # EXEC sent but cut short: never runs either.
    c = raw(timeout=30)
    assert c.call("MULTI") == OK
    c.send_cmd("SET", "m:cut", pattern("m:cut", 4 * MiB))
    assert c.read_reply() is not None
    c.send(encode_command("EXEC")[:-3])
    kill(c)
    # The queued values are dropped with their connections.
    wait_until("the queued values freed", lambda: value_bytes(r) <= base)
    assert r.exists("m:small", "m:big", "m:cut") == 0
    # A transaction on a live connection still runs.
    c = raw(timeout=30)
    assert c.call("MULTI") == OK
    c.send_cmd("SET", "m:small", b"v")
    c.read_reply()
    assert c.call("EXEC") == [OK]
    assert r.get("m:small") == b"v"
