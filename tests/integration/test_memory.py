"""Memory: maxmemory with the noeviction policy (Redis's OOM error for writes, nothing stored is
lost, reservations for large bulks in flight do not count against other clients), the memory
region every value lives in (memory.capacity bounds writes when maxmemory is 0), INFO's region
figures, MEMORY USAGE and MEMORY STATS."""

import os
import time

import pytest
import redis

from resp_util import Err, RawConn, Simple

OOM = "command not allowed when used memory > 'maxmemory'."
MiB = 1024 * 1024
STRATAKV_ONLY = pytest.mark.skipif(os.environ.get("STRATAKV_TARGET", "stratakv") == "redis",
                                   reason="stratakv's memory region")


def fill_until_oom(client, size, limit_keys):
    value = b"v" * size
    for i in range(limit_keys):
        try:
            client.set("fill:%d" % i, value)
        except redis.exceptions.ResponseError as e:
            return i, str(e)
        time.sleep(0.002)  # let the cron (hz 10 -> 100 ms) refresh used_memory now and then
    return limit_keys, None


def test_noeviction_replies_oom_and_keeps_data(start_server):
    srv = start_server(maxmemory="8mb", maxmemory_policy="noeviction")
    r = srv.client()
    stored, error = fill_until_oom(r, 64 * 1024, 2000)
    assert error is not None, "no OOM after %d writes of 64 KiB" % stored
    assert OOM in error
    assert stored > 10
    # Every value stored before the OOM is still there, byte-exact.
    for i in range(stored):
        assert r.get("fill:%d" % i) == b"v" * 64 * 1024
    # Reads and deletes are not refused; after freeing memory writes work again.
    assert r.delete(*["fill:%d" % i for i in range(stored)]) == stored
    deadline = time.monotonic() + 5
    while True:
        try:
            assert r.set("after", "ok")
            break
        except redis.exceptions.ResponseError:
            assert time.monotonic() < deadline, "writes still refused after freeing memory"
            time.sleep(0.05)
    assert r.get("after") == b"ok"


@pytest.mark.skipif(os.environ.get("STRATAKV_TARGET", "stratakv") == "redis",
                    reason="Redis counts a client's query buffer in used_memory")
def test_reserved_large_bulk_does_not_refuse_other_writes(start_server):
    srv = start_server(maxmemory="64mb", maxmemory_policy="noeviction")
    r = srv.client()
    greedy = RawConn(srv.host, srv.port)
    # Promise a 400 MB value and send none of it: past maxmemory, so no region block is
    # reserved for it (the bytes would be staged as they arrive).
    greedy.send(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$400000000\r\n")
    time.sleep(0.3)  # past a cron tick
    assert r.info("memory")["query_buffers_reserved"] < 1_000_000
    for i in range(20):
        assert r.set("small:%d" % i, "x" * 1000)
    greedy.close()


@STRATAKV_ONLY
def test_reserved_large_bulk_never_evicts_other_keys(start_server):
    srv = start_server(memory__capacity="64mb", maxmemory_policy="allkeys-lru")
    r = srv.client()
    for i in range(40):
        assert r.set("k:%d" % i, b"v" * (1 << 20))
    greedy = RawConn(srv.host, srv.port)
    greedy.send(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$40000000\r\n")  # 40 MB promised
    time.sleep(0.5)
    assert r.info()["evicted_keys"] == 0
    assert r.dbsize() == 40
    greedy.close()


@STRATAKV_ONLY
def test_region_capacity_refuses_writes_past_it_and_keeps_data(start_server):
    srv = start_server(memory__capacity="64mb", maxmemory_policy="noeviction")
    r = srv.client()
    info = r.info("memory")
    assert info["region_capacity"] == 64 * MiB
    assert info["maxmemory"] == 0  # 0: the region's capacity is the bound
    stored = {}
    error = None
    for i in range(100):
        value = os.urandom(MiB)
        try:
            r.set("big:%d" % i, value)
        except redis.exceptions.ResponseError as e:
            error = str(e)
            break
        stored["big:%d" % i] = value
    assert error is not None, "no OOM after %d MiB in a 64 MiB region" % len(stored)
    assert OOM in error
    # Nearly all of the region holds values (a 1 MiB value takes exactly 1 MiB of it).
    assert 56 <= len(stored) <= 64, len(stored)
    info = r.info("memory")
    assert info["region_allocated"] >= len(stored) * MiB
    assert info["region_allocated"] <= 64 * MiB
    assert info["used_memory"] >= info["region_allocated"]
    # Still refused, on a fresh raw connection too, and the connection stays usable. Used
    # memory counts the heap too, which moves by a little as connections' buffers come and go:
    # when the first refusal came from the heap's share, a write or two may still fit the
    # region, never more than it holds.
    c = srv.raw()
    refused = None
    for i in range(8):
        reply = c.call("SET", "one-more-%d" % i, b"x" * MiB)
        if reply == Err("OOM " + OOM):
            refused = "one-more-%d" % i
            break
        assert reply == Simple("OK"), reply
        stored["one-more-%d" % i] = b"x" * MiB
    assert refused is not None, "a full region took 8 MiB more"
    assert len(stored) <= 64
    assert c.call("PING") == Simple("PONG")
    # Nothing stored was lost or torn.
    for key, value in stored.items():
        assert r.get(key) == value
    assert r.exists(refused) == 0
    # Freeing values makes room again.
    victims = list(stored)[:8]
    assert r.delete(*victims) == 8
    r.set("after", os.urandom(4 * MiB))
    assert r.strlen("after") == 4 * MiB


@STRATAKV_ONLY
def test_info_memory_shows_the_region(r):
    r.set("v", b"x" * 100000)
    info = r.info("memory")
    assert info["region_capacity"] == 1024 * MiB  # the harness's explicit memory.capacity
    assert info["region_capacity_human"] == "1.00G"
    assert info["region_allocated"] >= 100000
    assert info["region_active"] >= info["region_allocated"] - 16 * 1024
    assert info["region_hugepages"] == "no"
    # used_memory keeps Redis's meaning: everything allocated, heap and value blocks.
    assert info["used_memory"] >= info["used_memory_heap"] + info["region_allocated"] - 100000
    assert r.config_get("memory.capacity") == {"memory.capacity": str(1024 * MiB)}
    assert r.config_get("memory.hugepages") == {"memory.hugepages": "no"}
    with pytest.raises(redis.exceptions.ResponseError, match="immutable"):
        r.config_set("memory.capacity", "2gb")


def machine_memory():
    """Physical memory, or the cgroup's limit when lower (as the server reads it)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGESIZE")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


@STRATAKV_ONLY
def test_default_capacity_is_sized_to_the_machine(start_server):
    # memory.capacity 0 (the default outside the test harness): 80% of the machine's memory,
    # reserved but not touched, stated by INFO, CONFIG GET and the log.
    srv = start_server(memory__capacity="0")
    r = srv.client()
    want = int(machine_memory() * 0.8) // (2 * MiB) * (2 * MiB)
    info = r.info("memory")
    assert info["region_capacity"] == want
    assert r.config_get("memory.capacity") == {"memory.capacity": str(want)}
    assert "machine memory" in srv.log_path.read_text(errors="replace")
    # Reserved, not resident: the process's RSS is a small part of it.
    rss = int(open("/proc/%d/status" % srv.proc.pid).read().split("VmRSS:")[1].split()[0]) * 1024
    assert rss < want // 10
    r.set("k", b"v" * MiB)
    assert r.get("k") == b"v" * MiB


def proc_minor_faults(pid):
    return int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[7])


def proc_rss(pid):
    return int(open("/proc/%d/status" % pid).read().split("VmRSS:")[1].split()[0]) * 1024


@STRATAKV_ONLY
def test_freed_value_pages_stay_resident_until_purged(start_server):
    # The first touch of a page costs more than a copy into it: freed values' pages serve the
    # next values without a page fault (tiering/resident_policy.h); MEMORY PURGE returns them.
    srv = start_server(memory__capacity="512mb")
    r = srv.client()
    pid = srv.proc.pid
    value = os.urandom(32 * MiB)
    for i in range(8):
        r.set("a%d" % i, value)
    assert r.delete(*["a%d" % i for i in range(8)]) == 8
    assert r.info("memory")["region_dirty"] >= 8 * 32 * MiB
    faults = proc_minor_faults(pid)
    for i in range(8):
        r.set("b%d" % i, value)
    refill = proc_minor_faults(pid) - faults
    # 256 MiB of fresh pages would be 65536 faults; buffers and bookkeeping take a few.
    assert refill < 2048, refill
    assert all(r.get("b%d" % i) == value for i in range(8))
    assert r.delete(*["b%d" % i for i in range(8)]) == 8
    before = proc_rss(pid)
    assert r.memory_purge() is True
    assert r.info("memory")["region_dirty"] == 0
    assert before - proc_rss(pid) >= 200 * MiB


@STRATAKV_ONLY
def test_prefault_touches_the_region_up_to_maxmemory(start_server):
    srv = start_server(memory__capacity="256mb", maxmemory="64mb", memory__prefault="1gb")
    r = srv.client()
    assert r.info("memory")["region_dirty"] == 64 * MiB  # never beyond maxmemory
    assert proc_rss(srv.proc.pid) >= 64 * MiB
    assert "memory.prefault: touched 64.00M" in srv.log_path.read_text(errors="replace")


def test_memory_stats_shape(r):
    for i in range(10):
        r.set("k:%d" % i, b"v" * 1000)
    r.set("volatile", "x", ex=100)
    stats = r.memory_stats()  # redis-py: a dict, db.0 a nested dict
    for name in ("peak.allocated", "total.allocated", "startup.allocated", "replication.backlog",
                 "clients.slaves", "clients.normal", "aof.buffer", "lua.caches",
                 "overhead.total", "keys.count", "keys.bytes-per-key", "dataset.bytes",
                 "allocator.allocated", "allocator.active", "allocator.resident",
                 "fragmentation", "fragmentation.bytes"):
        assert name in stats, name
        float(stats[name])  # integers, and doubles as RESP2 bulk strings
    assert stats["keys.count"] == 11
    assert stats["total.allocated"] > 0
    assert stats["peak.allocated"] >= stats["total.allocated"]
    assert stats["total.allocated"] >= stats["dataset.bytes"]
    assert stats["keys.bytes-per-key"] > 0
    assert isinstance(stats["db.0"], dict)
    assert "overhead.hashtable.main" in stats["db.0"]
    assert "overhead.hashtable.expires" in stats["db.0"]
    assert float(stats["fragmentation"]) > 0
    if os.environ.get("STRATAKV_TARGET", "stratakv") != "redis":
        assert stats["region.capacity"] == 1024 * MiB
        assert stats["region.allocated"] >= 10 * 1000
        assert stats["total.allocated"] >= stats["region.allocated"]
    # RESP3: a real map.
    c = RawConn(r.connection_pool.connection_kwargs["host"],
                r.connection_pool.connection_kwargs["port"])
    c.hello3()
    reply = c.call("MEMORY", "STATS")
    assert isinstance(reply, dict) and b"keys.count" in reply and isinstance(reply[b"db.0"], dict)
    c.close()


@STRATAKV_ONLY
def test_memory_usage_counts_the_real_allocation(r):
    r.set("k100", b"x" * 100)
    r.set("k1m", b"x" * MiB)
    small = r.memory_usage("k100")
    big = r.memory_usage("k1m")
    # 100 bytes + a 16-byte header: jemalloc's 128-byte class; plus the hash node and its slot.
    assert 128 + 40 <= small <= 128 + 128, small
    # 1 MiB exactly in the region; its header (32 bytes) on the heap with the hash node.
    assert MiB + 32 <= big <= MiB + 256, big
