"""The SSD tier (docs/ssd-tier.md): values past maxmemory are demoted to RocksDB and read back
byte-exact, writes and deletes of demoted keys behave as in Redis, restarts recover the SSD
keys (kill -9 included: never a stale or torn value), flush_on_shutdown keeps every key, and a
tiny ssd capacity or a full disk gives clear behaviour without losing what memory holds."""

import os
import random
import tempfile
import threading
import time

import pytest
import redis

import harness
from harness import tier, wait_until
from resp_util import Err

pytestmark = pytest.mark.skipif(harness.TARGET == "redis", reason="stratakv's SSD tier")

MiB = 1 << 20


def pattern(tag, i, size=MiB):
    """A value unique to (tag, i), cheap to rebuild for checking."""
    unit = ("%s:%08d|" % (tag, i)).encode()
    return (unit * (size // len(unit) + 1))[:size]


def ssd_server(start_server, path, **config):
    """A server whose tier writes every victim (tiering.ssd.admission wait): these tests check
    that nothing demoted is lost; test_ssd_admission.py covers the default, reuse."""
    config.setdefault("memory__capacity", "64mb")
    config.setdefault("maxmemory", "16mb")
    config.setdefault("tiering__ssd__admission", "wait")
    return start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(path), **config)




def counted_memory(r):
    m = r.info("memory")
    return m["used_memory"] - m["mem_not_counted_for_evict"]


def restart(srv):
    """Graceful stop (SIGTERM) and start again on the same config (and SSD path)."""
    problem = srv.stop()
    assert problem is None, problem
    srv.start()
    return srv.client()


def kill9_and_restart(srv):
    srv.proc.kill()
    srv.proc.wait(10)
    return srv.start_again()


def test_working_set_of_5x_maxmemory_reads_back_byte_exact_with_ttls(start_server, tmp_path):
    srv = ssd_server(start_server, tmp_path / "ssd")
    r = srv.client()
    short = ["short:%d" % i for i in range(4)]
    for i, k in enumerate(short):  # written first: the coldest, demoted first
        r.set(k, pattern("short", i, 200 << 10), ex=3600)
    large = 80  # 80 x 1 MiB = 5x maxmemory
    small = 3000  # and 100-byte values among them
    max_counted, at_max = 0, None
    for i in range(large):
        ttl = 3600 if i % 3 == 0 else None
        assert r.set("big:%d" % i, pattern("big", i), ex=ttl)
        for j in range(i * small // large, (i + 1) * small // large):
            assert r.set("small:%d" % j, pattern("small", j, 100), ex=3600 if j % 2 else None)
        if i % 8 == 0:
            m = r.info("memory")
            counted = m["used_memory"] - m["mem_not_counted_for_evict"]
            if counted > max_counted:
                max_counted, at_max = counted, (m, r.info("tiering"))
    # Memory stays within maxmemory (one value in flight beyond it), the rest went to SSD.
    assert max_counted <= 16 * MiB + 2 * MiB, at_max
    info = r.info("tiering")
    assert info["ssd_status"] == "ok" and info["ssd_read_only"] == 0, info
    assert info["demotions"] > 40, info
    assert info["ssd_only_keys"] > 40, info
    assert r.info("stats")["evicted_keys"] == 0
    assert any(tier(r, k) == "ssd" for k in short)
    assert tier(r, "big:0") == "ssd"
    assert r.dbsize() == large + small + len(short)
    # TTLs are kept across tiers, without loading the value.
    assert 3500 < r.ttl("big:0") <= 3600 and tier(r, "big:0") == "ssd"
    assert r.ttl("big:1") == -1
    # Every value back, byte-exact (each read of a demoted value loads it).
    for i in range(large):
        assert r.get("big:%d" % i) == pattern("big", i), i
    for j in range(small):
        assert r.get("small:%d" % j) == pattern("small", j, 100), j
    assert r.ttl("big:0") > 3500 and r.ttl("small:1") > 3500 and r.ttl("small:2") == -1
    info = r.info("tiering")
    assert info["ssd_reads"] >= 40 and info["promotions"] >= 40
    assert info["ssd_read_latency_p99_us"] > 0
    assert counted_memory(r) <= 16 * MiB + 2 * MiB
    # Short TTLs run out on SSD as in memory (set now: a slow machine may take seconds above).
    on_ssd = [k for k in short if tier(r, k) == "ssd"]
    for k in short:
        assert r.pexpire(k, 300)
    assert on_ssd and all(tier(r, k) == "ssd" for k in on_ssd)  # PEXPIRE loads nothing
    wait_until("the short TTLs", lambda: all(r.exists(k) == 0 for k in short), timeout=10)
    for k in short:
        assert r.get(k) is None
    # Pipelined replies keep their order across memory and SSD keys.
    pipe = r.pipeline(transaction=False)
    order = [random.randrange(large) for _ in range(30)]
    for i in order:
        pipe.get("big:%d" % i)
        pipe.get("small:%d" % i)
    replies = pipe.execute()
    for n, i in enumerate(order):
        assert replies[2 * n] == pattern("big", i)
        assert replies[2 * n + 1] == pattern("small", i, 100)


def test_pipelined_gets_of_demoted_keys_prefetch_yet_see_the_writes_between(start_server,
                                                                           tmp_path):
    """A pipeline of GETs of keys on SSD loads them together (the keys behind the first are
    prefetched), but each reply is still what its command sees in order: a DEL or SET pipelined
    between two GETs of a key shows in the second."""
    keys = ["p:%d" % i for i in range(12)]
    _, r = demoted(start_server, tmp_path / "ssd", keys)
    assert all(tier(r, k) == "ssd" for k in keys)
    before = r.info("tiering")["ssd_reads"]
    pipe = r.pipeline(transaction=False)
    for k in keys[:6]:
        pipe.get(k)
    pipe.delete(keys[6])
    pipe.get(keys[6])
    pipe.set(keys[7], b"new")
    pipe.get(keys[7])
    for k in keys[8:]:
        pipe.get(k)
    replies = pipe.execute()
    assert replies[:6] == [pattern(k, i) for i, k in enumerate(keys[:6])]
    assert replies[6:10] == [1, None, True, b"new"]
    assert replies[10:] == [pattern(k, i + 8) for i, k in enumerate(keys[8:])]
    assert r.info("tiering")["ssd_reads"] - before >= 10


def demoted(start_server, path, keys, **config):
    """A server where each of `keys` (1 MiB values) is on SSD only."""
    srv = ssd_server(start_server, path, **config)
    r = srv.client()
    for i, k in enumerate(keys):
        r.set(k, pattern(k, i))
    for i in range(24):  # push them out
        r.set("filler:%d" % i, pattern("filler", i))
    wait_until("demotion", lambda: all(tier(r, k) == "ssd" for k in keys))
    wait_until("quiet writer", lambda: r.info("tiering")["pending_demotion_bytes"] == 0)
    return srv, r


def test_del_overwrite_and_other_writes_of_demoted_keys_behave_as_in_redis(start_server, tmp_path):
    keys = ["d:%d" % i for i in range(10)]
    srv, r = demoted(start_server, tmp_path / "ssd", keys)
    ssd_keys = r.info("tiering")["ssd_keys"]
    # DEL/UNLINK/EXISTS/TTL/EXPIRE/PERSIST only need the entry: nothing is loaded.
    assert r.exists("d:0", "d:1") == 2 and tier(r, "d:0") == "ssd"
    assert r.delete("d:0", "nope") == 1
    assert r.get("d:0") is None and r.exists("d:0") == 0 and tier(r, "d:0") is None
    assert r.unlink("d:1") == 1
    assert r.expire("d:2", 1000) and 990 < r.ttl("d:2") <= 1000 and tier(r, "d:2") == "ssd"
    assert r.persist("d:2") and r.ttl("d:2") == -1 and tier(r, "d:2") == "ssd"
    assert r.pexpire("d:3", 1) and (time.sleep(0.05) or True)
    assert r.get("d:3") is None
    assert r.info("tiering")["ssd_keys"] <= ssd_keys - 2  # the records went with the keys
    # Overwrites: the new value wins, the old record is superseded.
    assert r.set("d:4", b"new value")
    assert r.get("d:4") == b"new value" and tier(r, "d:4") == "memory"
    assert r.set("d:5", b"v5", get=True) == pattern("d:5", 5)  # SET ... GET loads the old value
    assert r.getset("d:6", b"v6") == pattern("d:6", 6)
    assert r.append("d:7", b"+tail") == MiB + 5
    assert r.get("d:7") == pattern("d:7", 7) + b"+tail"
    assert r.getdel("d:8") == pattern("d:8", 8) and r.exists("d:8") == 0
    assert r.strlen("d:9") == MiB and r.getrange("d:9", 0, 9) == pattern("d:9", 9)[:10]
    # RENAME/COPY move a demoted value under a new name.
    assert r.rename("d:9", "d:9b") and r.get("d:9b") == pattern("d:9", 9)
    assert r.exists("d:9") == 0
    # Counters and SETRANGE on a demoted key.
    r.set("n", b"41")
    r.set("s", b"hello world")
    for i in range(24):
        r.set("filler2:%d" % i, pattern("filler2", i))
    wait_until("demotion", lambda: tier(r, "n") == "ssd" and tier(r, "s") == "ssd")
    assert r.incr("n") == 42 and r.get("n") == b"42"
    assert r.setrange("s", 6, b"WORLD") == 11 and r.get("s") == b"hello WORLD"
    # What was written survives a restart; what was deleted does not come back.
    r = restart(srv)
    assert r.get("d:0") is None and r.get("d:1") is None and r.get("d:8") is None
    for k, v in [("d:4", b"new value"), ("d:5", b"v5"), ("d:6", b"v6")]:
        assert r.get(k) in (v, None)  # in memory at the stop: maybe lost, never the old value
    assert r.get("d:2") == pattern("d:2", 2) and r.ttl("d:2") == -1


def test_flushall_empties_both_tiers(start_server, tmp_path):
    keys = ["f:%d" % i for i in range(6)]
    srv, r = demoted(start_server, tmp_path / "ssd", keys)
    r.flushall()
    assert r.dbsize() == 0
    assert r.info("tiering")["ssd_keys"] == 0
    r = restart(srv)
    assert r.dbsize() == 0


def test_warm_restart_recovers_demoted_keys_with_their_ttls(start_server, tmp_path):
    keys = ["w:%d" % i for i in range(12)]
    srv, r = demoted(start_server, tmp_path / "ssd", keys)
    r.expire("w:0", 1000)
    r.pexpire("w:1", 300)
    time.sleep(0.4)
    r = restart(srv)
    info = r.info("tiering")
    assert info["ssd_recovered_keys"] >= 11, info
    assert r.get("w:1") is None  # expired while down
    assert 990 < r.ttl("w:0") <= 1000
    for i, k in enumerate(keys[2:], 2):
        assert tier(r, k) == "ssd"
        assert r.get(k) == pattern(k, i)


def test_flush_on_shutdown_keeps_every_key(start_server, tmp_path):
    srv = ssd_server(start_server, tmp_path / "ssd", tiering__ssd__flush_on_shutdown="yes",
                     maxmemory="32mb")
    r = srv.client()
    for i in range(40):
        r.set("k:%d" % i, pattern("k", i), ex=5000 if i % 2 else None)
    for i in range(500):
        r.set("s:%d" % i, pattern("s", i, 100))
    in_memory = sum(1 for i in range(40) if tier(r, "k:%d" % i) == "memory")
    assert in_memory > 0
    r = restart(srv)
    assert r.dbsize() == 540
    for i in range(40):
        assert r.get("k:%d" % i) == pattern("k", i)
        assert (r.ttl("k:%d" % i) > 4900) if i % 2 else (r.ttl("k:%d" % i) == -1)
    for i in range(500):
        assert r.get("s:%d" % i) == pattern("s", i, 100)


@pytest.mark.parametrize("wal_values", ["yes", "no"])
def test_kill9_during_writes_then_recover_gives_old_new_or_missing_never_torn(start_server,
                                                                              tmp_path,
                                                                              wal_values):
    # wal_values no: batches of demoted values skip the WAL; removals must still not be lost.
    # (Small memtables: flushes happen during the run, so records survive without the WAL too.)
    srv = ssd_server(start_server, tmp_path / "ssd", maxmemory="8mb",
                     tiering__ssd__wal_values=wal_values, tiering__ssd__write_buffer_size="1mb")
    nkeys, size = 48, 256 << 10
    acked = {}   # key -> last acknowledged version (None: deleted)
    pending = {}  # key -> version sent, not yet acknowledged (None: a DEL)
    stop = threading.Event()

    def writer():
        w = srv.client()
        rng = random.Random(7)
        version = 0
        try:
            while not stop.is_set():
                k = rng.randrange(nkeys)
                key = "c:%d" % k
                version += 1
                if rng.random() < 0.1:
                    pending[key] = None
                    w.delete(key)
                    acked[key] = None
                else:
                    pending[key] = version
                    w.set(key, pattern(key, version, size))
                    acked[key] = version
                del pending[key]
        except Exception:
            pass  # the server was killed mid-command

    t = threading.Thread(target=writer)
    t.start()
    r = srv.client()
    wait_until("demotions", lambda: r.info("tiering")["demotions"] > 60, timeout=30)
    time.sleep(0.3)
    r = kill9_and_restart(srv)
    stop.set()
    t.join(10)
    assert r.info("tiering")["ssd_recovered_keys"] > 0
    for k in range(nkeys):
        key = "c:%d" % k
        v = r.get(key)
        allowed = {acked.get(key)}
        if key in pending:
            allowed.add(pending[key])
        if v is None:
            continue  # missing: it was only in memory, or deleted
        versions = [n for n in allowed if n is not None and v == pattern(key, n, size)]
        assert versions, "%s: not its last acknowledged value (len %d, head %r)" % (
            key, len(v), v[:24])


@pytest.mark.parametrize("size_mib", [1, 8])
def test_writers_faster_than_the_disk_wait_for_demotion_instead_of_failing(start_server,
                                                                          tmp_path, size_mib):
    """Memory as large as the region (maxmemory 0): values queued for demotion still take room
    there, so 4 writers pushing 6x the region through it must wait for the disk (back-pressure)
    rather than get -OOM or push out values that are not on SSD yet."""
    srv = ssd_server(start_server, tmp_path / "ssd", memory__capacity="48mb", maxmemory="0")
    size = size_mib * MiB
    per_writer = (6 * 48 // size_mib) // 4
    errors = []

    def writer(w):
        c = srv.client()
        try:
            for i in range(per_writer):
                assert c.set("w%d:%d" % (w, i), pattern("w%d" % w, i, size))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    peak = 0
    r = srv.client()
    while any(t.is_alive() for t in threads):
        peak = max(peak, r.info("memory")["region_allocated"])
        time.sleep(0.01)
    for t in threads:
        t.join()
    assert errors == []
    info = r.info("tiering")
    assert info["unwritten_evictions"] == 0, info
    assert r.info("stats")["evicted_keys"] == 0
    assert info["ssd_write_waits"] > 0, info  # the writers did outrun the disk
    assert peak <= 48 * MiB
    assert r.dbsize() == 4 * per_writer
    for w in range(4):
        for i in range(per_writer):
            assert r.get("w%d:%d" % (w, i)) == pattern("w%d" % w, i, size), (w, i)


def test_noeviction_with_the_tier_on_refuses_writes_past_maxmemory(start_server, tmp_path):
    """noeviction demotes nothing: writes past maxmemory get Redis's -OOM, with no wait."""
    srv = ssd_server(start_server, tmp_path / "ssd", maxmemory_policy="noeviction")
    r = srv.client()
    stored = 0
    with pytest.raises(Exception, match="OOM command not allowed"):
        for i in range(64):
            r.set("n:%d" % i, pattern("n", i))
            stored += 1
    assert 8 <= stored < 20  # 16 MiB of maxmemory
    info = r.info("tiering")
    assert info["demotions"] == 0 and info["ssd_write_waits"] == 0, info
    assert r.info("stats")["evicted_keys"] == 0
    for i in range(stored):
        assert r.get("n:%d" % i) == pattern("n", i)


def test_volatile_policy_without_volatile_keys_refuses_writes_past_maxmemory(start_server,
                                                                           tmp_path):
    """volatile-lru demotes only keys with a TTL: with none, a write past maxmemory waits for
    room that never comes, then gets Redis's -OOM."""
    srv = ssd_server(start_server, tmp_path / "ssd", maxmemory_policy="volatile-lru")
    r = srv.client()
    with pytest.raises(Exception, match="OOM command not allowed"):
        for i in range(64):
            r.set("v:%d" % i, pattern("v", i))
    assert r.info("tiering")["demotions"] == 0
    assert r.info("stats")["evicted_keys"] == 0


def test_tiny_ssd_capacity_drops_oldest_records_and_keeps_memory(start_server, tmp_path):
    srv = ssd_server(start_server, tmp_path / "ssd", tiering__ssd__capacity="6mb")
    r = srv.client()
    for i in range(60):
        assert r.set("t:%d" % i, pattern("t", i))  # never an error
        time.sleep(0.002)  # distinct LRU clocks (ms): demotion order is write order
    time.sleep(0.3)
    info = r.info("tiering")
    assert info["ssd_bytes"] <= 6 * MiB, info
    assert info["ssd_dropped_keys"] > 20, info
    assert r.info("stats")["evicted_keys"] >= info["ssd_dropped_keys"]
    present = [i for i in range(60) if r.exists("t:%d" % i)]
    assert len(present) >= 12  # what memory holds plus what fits the capacity
    assert info["unwritten_evictions"] == 0, info
    assert present[-1] == 59 and present == list(range(60 - len(present), 60))  # FIFO
    # Read back with room in memory: promotions then demote nothing (a demotion would drop the
    # oldest records again, which is the policy, not what this test reads back).
    r.config_set("maxmemory", "1gb")
    for i in present:
        assert r.get("t:%d" % i) == pattern("t", i)


def test_full_disk_keeps_values_in_memory_and_says_so(tmpfs, start_server):
    small_filesystem = tmpfs("24m", "stratakv-full-")
    srv = ssd_server(start_server, small_filesystem + "/ssd", maxmemory="16mb",
                     memory__capacity="128mb", tiering__ssd__write_buffer_size="1mb")
    r = srv.client()
    acked = []
    errors = set()
    for i in range(80):
        try:
            r.set("x:%d" % i, pattern("x", i))
            acked.append(i)
        except Exception as e:  # -OOM once memory is full and nothing can be demoted
            errors.add(str(e).split()[0])
    info = r.info("tiering")
    assert info["ssd_write_errors"] > 0 and info["ssd_status"] == "error", info
    assert "space" in info["ssd_last_error"].lower(), info
    # The free-space check refused the writes: RocksDB never met ENOSPC, so nothing halted.
    assert info["ssd_read_only"] == 0, info
    assert errors <= {"OOM"}, errors
    for i in acked:  # nothing acknowledged is lost
        assert r.get("x:%d" % i) == pattern("x", i), i
    assert srv.alive()


def test_promote_after_keeps_a_value_on_ssd_until_its_nth_read(start_server, tmp_path):
    srv, r = demoted(start_server, tmp_path / "ssd", ["p"], tiering__promote_after="3")
    assert r.get("p") == pattern("p", 0) and tier(r, "p") == "ssd"
    assert r.get("p") == pattern("p", 0) and tier(r, "p") == "ssd"
    assert r.get("p") == pattern("p", 0) and tier(r, "p") == "memory+ssd"
    info = r.info("tiering")
    assert info["ssd_reads"] == 3 and info["promotions"] == 1


def test_tier_command_config_and_info(start_server, tmp_path):
    srv = ssd_server(start_server, tmp_path / "ssd")
    r = srv.client()
    raw = srv.raw()
    assert raw.call("TIER") == Err("ERR wrong number of arguments for 'tier' command")
    assert r.execute_command("TIER", "missing") is None
    r.set("a", "b")
    assert tier(r, "a") == "memory"
    cfg = r.config_get("tiering.*")
    assert cfg["tiering.ssd.enabled"] == "yes"
    assert cfg["tiering.ssd.path"] == str(tmp_path / "ssd")
    assert cfg["tiering.promote_after"] == "1"
    assert r.config_set("tiering.promote_after", "2")
    info = r.info("tiering")
    for field in ("memory_keys", "memory_bytes", "ssd_keys", "ssd_bytes", "demotions",
                  "promotions", "ssd_reads", "ssd_read_bytes", "ssd_read_latency_p50_us",
                  "ssd_read_latency_p99_us", "pending_demotion_bytes"):
        assert field in info, field
    assert "tiering" in r.info("everything") or "ssd_enabled" in r.info("everything")


def test_an_unusable_path_leaves_the_server_running_without_the_tier(start_server, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    srv = ssd_server(start_server, blocker / "ssd")
    r = srv.client()
    info = r.info("tiering")
    assert info["ssd_enabled"] == 0 and info["ssd_status"] == "error", info
    assert info["ssd_last_error"], info
    for i in range(40):  # plain eviction then
        assert r.set("k:%d" % i, pattern("k", i))
    assert r.info("stats")["evicted_keys"] > 0


def test_fast_path_reads_values_on_ssd(start_server, tmp_path):
    """KV.GET / KV.MGET of demoted keys load them first; KV.PREFIX counts them without a load."""
    from fastpath_util import FastConn, Segment
    sock = os.path.join(tempfile.mkdtemp(prefix="skv-"), "s.sock")
    keys = ["f:%d" % i for i in range(4)]
    srv, r = demoted(start_server, tmp_path / "ssd", keys, tiering__promote_after="2",
                    unixsocket=sock)
    c = FastConn(sock)
    seg = Segment(8 * MiB)
    c.register(seg)
    reads = r.info("tiering")["ssd_reads"]
    assert c.call("KV.PREFIX", *keys, "missing") == 4
    assert r.info("tiering")["ssd_reads"] == reads  # existence needs no load
    assert c.call("KV.GET", keys[0], seg.id, 0, 2 * MiB) == MiB
    assert seg.read(0, MiB) == pattern(keys[0], 0)
    args = [3]
    for i, k in enumerate(keys[1:]):
        args += [k, 1, seg.id, (i + 1) * 2 * MiB, 2 * MiB]
    assert c.call("KV.MGET", *args) == [MiB, MiB, MiB]
    for i, k in enumerate(keys[1:]):
        assert seg.read((i + 1) * 2 * MiB, MiB) == pattern(k, i + 1)
    assert r.info("tiering")["ssd_reads"] == reads + 4
    c.close()


def test_a_read_that_fails_mid_get_is_an_error_for_that_command_not_a_hang(start_server, tmp_path):
    """A value on SSD whose blob file went bad under the server (truncated: RocksDB's read comes
    back short) is an error reply for the command that reads it, promptly; the key stays on SSD,
    other keys read on, the server serves on. (Injected I/O errors, unit level: ssd_fault_test.)"""
    keys = ["bad:%d" % i for i in range(8)]
    srv, r = demoted(start_server, tmp_path / "ssd", keys, tiering__ssd__write_buffer_size="1mb")
    blobs = list((tmp_path / "ssd").glob("*.blob"))
    wait_until("blob files", lambda: any(b.stat().st_size > 0 for b in
                                         (tmp_path / "ssd").glob("*.blob")))
    for b in (tmp_path / "ssd").glob("*.blob"):
        os.truncate(b, 0)
    failed = []
    for i, k in enumerate(keys):
        try:
            v = r.get(k)
        except redis.ResponseError as e:
            assert str(e).startswith("SSD tier read failed: read: "), e
            failed.append(k)
            continue
        assert v == pattern(k, i), k  # still in a memtable: read right
    assert failed, "no read met the truncated files: %s" % blobs
    info = r.info("tiering")
    assert info["ssd_read_errors"] >= len(failed), info
    for k in failed:
        assert tier(r, k) == "ssd"  # not dropped: a later read may succeed
    assert r.set("after", b"v") and r.get("after") == b"v"
    assert srv.alive()

