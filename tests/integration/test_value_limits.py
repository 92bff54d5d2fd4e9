"""Values too large to store get a clear error at their header, naming the size and the limit,
and cost nothing else (issue 17, "Limits with clear errors"): no allocation, no eviction of
other keys, no byte moved on the fast path, and a client still sending the value reads the
error instead of a broken pipe."""

import os

import pytest
import redis

from harness import TARGET, launch_server, stop_servers
from fastpath_util import FastConn, Segment
from resp_util import Err

STRATAKV_ONLY = pytest.mark.skipif(TARGET == "redis", reason="stratakv's own limits")

MiB = 1 << 20


@pytest.fixture
def small_server(tmp_path):
    srv = launch_server(memory__capacity="64mb", unixsocket=str(tmp_path / "s.sock"))
    yield srv
    stop_servers(srv)


def fill(r, n, size=MiB):
    for i in range(n):
        r.set("keep%d" % i, bytes([i]) * size)


def kept(r, n, size=MiB):
    return all(r.get("keep%d" % i) == bytes([i]) * size for i in range(n))


@STRATAKV_ONLY
def test_value_larger_than_memory_is_refused_at_its_header(small_server):
    r = small_server.client()
    fill(r, 8)
    before = r.info("memory")["used_memory_peak"]
    with pytest.raises(redis.exceptions.ResponseError) as e:
        r.set("huge", os.urandom(100 * MiB))
    assert str(e.value) == ("OOM value of 104857600 bytes is larger than memory.capacity "
                            "(67108864 bytes)")
    # Dropped unread: never allocated (the peak did not move by its size), nothing evicted,
    # and the connection goes on.
    assert r.info("memory")["used_memory_peak"] < before + 8 * MiB
    assert r.exists("huge") == 0 and kept(r, 8)
    assert r.ping() is True
    # With maxmemory set, the error names it.
    r.config_set("maxmemory", str(32 * MiB))
    with pytest.raises(redis.exceptions.ResponseError,
                       match=r"^OOM value of 41943040 bytes is larger than maxmemory \(33554432 bytes\)$"):
        r.set("huge", b"x" * (40 * MiB))
    assert kept(r, 8)


@STRATAKV_ONLY
def test_fast_path_put_larger_than_memory_moves_no_byte(small_server):
    r = small_server.client()
    fill(r, 8)
    seg = Segment(100 * MiB)
    conn = FastConn(small_server.config["unixsocket"])
    try:
        conn.register(seg)
        before = r.info("fastpath")["kv_put_bytes"]
        reply = conn.call("KV.PUT", "huge", 100 * MiB, seg.id, 0, 100 * MiB)
        assert reply == Err("OOM value of 104857600 bytes is larger than memory.capacity "
                            "(67108864 bytes)")
        assert r.info("fastpath")["kv_put_bytes"] == before
        assert r.exists("huge") == 0 and kept(r, 8)
    finally:
        conn.close()
        seg.close()


@STRATAKV_ONLY
def test_value_over_proto_max_bulk_len_client_reads_the_error(start_server):
    # A client writes its whole request before reading the reply (redis-py, the SDKs): the
    # server answers the header's error, then keeps reading (and dropping) the rest for a
    # moment, so the client's write completes and it reads the error instead of a reset.
    # (Redis 7.0 closes at once: redis-py gets "Error 32 while writing to socket. Broken pipe.")
    srv = start_server(proto_max_bulk_len="1mb")
    r = srv.client()
    with pytest.raises(redis.exceptions.ResponseError) as e:
        r.set("k", b"x" * (20 * MiB))
    assert str(e.value) == ("Protocol error: invalid bulk length 20971520 "
                            "(proto-max-bulk-len is 1048576)")
    assert r.ping() is True  # a new connection; the server goes on
    assert r.exists("k") == 0


@STRATAKV_ONLY
def test_sdk_shows_the_servers_text_for_values_too_large(tmp_path):
    # The SDK's Python module (PYTHONPATH: the build's python/ directory); sanitizer builds
    # do not build it.
    stratakv = pytest.importorskip("stratakv", reason="the SDK's Python module is not built here")

    srv = launch_server(memory__capacity="64mb", proto_max_bulk_len="32mb",
                        unixsocket=str(tmp_path / "s.sock"))
    try:
        for url in ("redis://127.0.0.1:%d" % srv.port, "unix://%s" % (tmp_path / "s.sock")):
            kv = stratakv.Client(url)
            # Over proto-max-bulk-len, twice: the connection the first error closed is not
            # reused for the second put.
            for _ in range(2):
                with pytest.raises(stratakv.Error) as e:
                    kv.put("k", b"x" * (40 * MiB))
                assert "proto-max-bulk-len" in str(e.value), str(e.value)
            # Within it but over the region: the size and the limit.
            srv.client().config_set("proto-max-bulk-len", str(512 * MiB))
            with pytest.raises(stratakv.Error) as e:
                kv.put("k", b"x" * (100 * MiB))
            assert "value of 104857600 bytes is larger than memory.capacity (67108864 bytes)" in \
                str(e.value), str(e.value)
            srv.client().config_set("proto-max-bulk-len", str(32 * MiB))
            assert kv.put("k", b"y" * MiB) is True and kv.get("k") == b"y" * MiB
    finally:
        stop_servers(srv)
