"""stratakv (Python, over libstratakv) reading from replicas: a redis+cluster:// Client with
read_from = "replicas" | "nearest" on a static cluster of two shards, each a primary and one
replica that replicates for real (StaticCluster(2, replicas=1)).

What is checked, with INFO commandstats of every node: reads (get, get_into, batch_get_into,
batch_exists, prefix_match without a pin) are served by the replicas and not by the primaries; writes still go to the
primaries only, and so do pinning prefix lookups; replicas are reached over shm like primaries; a key a replica misses (here a
value too large for its memory region, which it drops) is read right from the primary; a
replica that is down is skipped; "nearest" sends reads to the node it measured fastest (a node
stopped with SIGSTOP while it serves a read measures slow)."""

import threading
import time

import pytest

import stratakv
from cluster_util import StaticCluster
from sdk_cluster_util import MiB, calls, info, key_slot, pattern, reset_stats, url_of

READS = ("get", "kv.get", "kv.mget", "exists")
WRITES = ("set", "kv.put", "kv.mput")


def total(srv, commands):
    stats = info(srv, "commandstats")
    return sum(stats.get("cmdstat_" + c, {}).get("calls", 0) for c in commands)


def wait_until(what, fn, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def synced(cl):
    """Every write so far is on the replicas (WAIT 1 on each primary)."""
    for p in cl.nodes[:2]:
        assert p.client().execute_command("WAIT", 1, 10000) == 1


@pytest.fixture(scope="module")
def cl():
    c = StaticCluster(2, replicas=1)
    # Shard 0's replica has a small memory region: a value larger than it is dropped there
    # (replica_dropped_values), so its reads miss while the primary has it.
    c.nodes[2].config["memory.capacity"] = "4mb"
    c.start()
    for r in c.nodes[2:]:
        wait_until("replica link up", lambda r=r: info(r, "replication").get("master_link_status") == "up")
    yield c
    c.stop()


def shard_keys(cl, prefix, n):
    """n keys of each shard (index 0: shard 0's)."""
    out = [[], []]
    i = 0
    while min(len(out[0]), len(out[1])) < n:
        k = "%s:%d" % (prefix, i)
        s = 0 if cl.owner_of(key_slot(k)) == 0 else 1
        if len(out[s]) < n:
            out[s].append(k)
        i += 1
    return out


def test_read_from_replicas_reads_on_replicas_writes_on_primaries(cl):
    p0, p1, r0, r1 = cl.nodes
    kv = stratakv.Client(url_of(cl) + "?read_from=replicas")
    assert kv.transport == "shm"  # the replicas are on this host too: their Unix sockets, shm
    keys = [k for ks in shard_keys(cl, "rr", 50) for k in ks]
    values = [pattern(100 + i * 37, i) for i in range(len(keys))]
    reset_stats(cl)
    assert kv.batch_put(keys, values) == [True] * len(keys)
    assert kv.put("rr:single", b"one")
    synced(cl)
    for p in (p0, p1):
        assert total(p, WRITES) >= 1
    for r in (r0, r1):
        assert total(r, WRITES) == 0  # a replica only applies its primary's stream
    reset_stats(cl)
    targets = [bytearray(len(v)) for v in values]
    assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
    assert [bytes(t) for t in targets] == values
    assert kv.get("rr:single") == b"one"
    assert kv.get(keys[3]) == values[3]
    buf = bytearray(len(values[60]))
    assert kv.get_into(keys[60], buf) == len(values[60]) and bytes(buf) == values[60]
    assert kv.batch_exists(keys[:10]) == [True] * 10 and kv.exists(keys[70])
    for p in (p0, p1):
        assert total(p, READS) == 0, info(p, "commandstats")
    for r in (r0, r1):
        assert calls(r, "kv.mget") == 1  # the batch: one KV.MGET per replica
    assert calls(r0, "exists") + calls(r1, "exists") == 11
    assert total(r0, ("get", "kv.get")) + total(r1, ("get", "kv.get")) >= 3
    # The Python keyword overrides the URL; "primary" reads from the primaries.
    prim = stratakv.Client(url_of(cl), read_from="primary")
    reset_stats(cl)
    assert prim.get(keys[0]) == values[0] and prim.get(keys[-1]) == values[-1]
    assert total(r0, READS) + total(r1, READS) == 0 and total(p0, READS) + total(p1, READS) == 2
    with pytest.raises(ValueError):
        stratakv.Client(url_of(cl), read_from="replica")
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client(url_of(cl) + "?read_from=far")
    assert e.value.kind == "usage"


def test_a_replica_miss_is_read_from_the_primary(cl):
    p0, p1, r0, r1 = cl.nodes
    kv = stratakv.Client(url_of(cl), read_from="replicas")
    big_key = shard_keys(cl, "big", 1)[0][0]  # shard 0: its replica's region is 4 MiB
    big = pattern(6 * MiB, 7)
    dropped = info(r0, "replication").get("replica_dropped_values", 0)
    assert kv.put(big_key, big)
    synced(cl)
    wait_until("the replica drops the value",
               lambda: info(r0, "replication").get("replica_dropped_values", 0) > dropped)
    reset_stats(cl)
    assert kv.get(big_key) == big  # the replica misses, the primary answers
    assert total(r0, READS) >= 1 and total(p0, READS) >= 1
    target = bytearray(len(big))
    assert kv.batch_get_into([big_key], [target]) == [len(big)] and bytes(target) == big
    assert total(r0, READS) >= 2 and total(p0, READS) >= 2
    assert kv.exists(big_key)
    # Prefix lookups without a pin: the replica's run, continued on the primary from the first
    # key the replica misses. With a pin: the primary only (leases belong where evictions are).
    chain = shard_keys(cl, "chain", 3)[0]
    assert kv.batch_put(chain, [b"c"] * 3) == [True] * 3
    synced(cl)
    reset_stats(cl)
    assert kv.prefix_match(chain) == 3
    assert calls(r0, "kv.prefix") == 1 and calls(p0, "kv.prefix") == 0
    reset_stats(cl)
    assert kv.prefix_match(chain + [big_key]) == 4  # the replica has 3, the primary the 4th
    assert calls(r0, "kv.prefix") == 1 and calls(p0, "kv.prefix") == 1
    assert kv.prefix_match(chain + ["chain-absent", big_key]) == 3
    assert kv.prefix_match([big_key] + chain) == 4
    reset_stats(cl)
    assert kv.prefix_match(chain, pin_ms=5000) == 3
    assert calls(r0, "kv.prefix") == 0 and calls(p0, "kv.prefix") == 1
    assert kv.unpin(chain) == 3
    # Keys written just before are read right: from the replica once the stream brought them,
    # else from the primary.
    for round_ in range(5):
        keys = ["fresh:%d:%d" % (round_, i) for i in range(200)]
        vals = [pattern(64, round_ * 1000 + i) for i in range(200)]
        assert kv.batch_put(keys, vals) == [True] * 200
        targets = [bytearray(64) for _ in keys]
        assert kv.batch_get_into(keys, targets) == [64] * 200
        assert [bytes(t) for t in targets] == vals
        assert [kv.get(k) for k in keys[:20]] == vals[:20]
    assert kv.get("never-written") is None


def stopped_while_reading(srv, kv, key, seconds=0.5):
    """Stops srv (SIGSTOP, every thread stopped) and reads `key` meanwhile: a read srv serves
    takes `seconds`. Returns the value and the read's wall time."""
    srv.pause()
    t = threading.Timer(seconds, srv.resume)
    t.start()
    try:
        start = time.monotonic()
        value = kv.get(key)
        return value, time.monotonic() - start
    finally:
        t.join()
        srv.resume()


def timed_get(kv, key):
    start = time.monotonic()
    value = kv.get(key)
    return value, time.monotonic() - start


@pytest.mark.parametrize("slow", ["replica", "primary"])
def test_nearest_reads_from_the_node_measured_fastest(cl, slow):
    p0, p1, r0, r1 = cl.nodes
    key = shard_keys(cl, "near", 1)[0][0]
    kv = stratakv.Client(url_of(cl), read_from="nearest")
    assert kv.put(key, b"v")  # connects the primary (its first figure: a PING)
    synced(cl)
    # The replica has no figure: the first read is its, and connects it. Every node is
    # connected before one is stopped, so the stop delays a read and not a connect (whose
    # round trips are not timed).
    assert kv.get(key) == b"v"
    slow_node, fast_node = (r0, p0) if slow == "replica" else (p0, r0)
    # Every figure is older than a second: the next reads of the shard refresh them, the
    # replica's first. The slow node's refresh takes 0.5 s.
    time.sleep(1.1)
    if slow == "replica":
        slow_read = stopped_while_reading(r0, kv, key)  # the replica's refresh: slow
        fast_read = timed_get(kv, key)                  # the primary's refresh: fast
    else:
        fast_read = timed_get(kv, key)                  # the replica's refresh: fast
        slow_read = stopped_while_reading(p0, kv, key)  # the primary's refresh: slow
    assert slow_read[0] == fast_read[0] == b"v"
    assert slow_read[1] >= 0.45, (slow_read, fast_read)  # the stop held the read
    reset_stats(cl)
    start = time.monotonic()
    for _ in range(100):
        assert kv.get(key) == b"v"
    assert time.monotonic() - start < 0.9  # within the refresh period: no node is refreshed
    assert total(fast_node, READS) == 100, (slow_read, fast_read, info(fast_node, "commandstats"),
                                            info(slow_node, "commandstats"))
    assert total(slow_node, READS) == 0


def test_a_replica_that_is_down_is_skipped(cl):
    """Last in this module: it stops shard 1's replica."""
    p0, p1, r0, r1 = cl.nodes
    kv = stratakv.Client(url_of(cl), read_from="replicas")
    keys = shard_keys(cl, "down", 20)[1]
    vals = [pattern(100, i) for i in range(20)]
    assert kv.batch_put(keys, vals) == [True] * 20
    synced(cl)
    reset_stats(cl)
    r1.stop()
    targets = [bytearray(100) for _ in keys]
    assert kv.batch_get_into(keys, targets) == [100] * 20  # the replica is lost: the primary
    assert [bytes(t) for t in targets] == vals
    assert [kv.get(k) for k in keys] == vals  # skipped now: straight to the primary
    assert calls(p1, "kv.mget") == 1 and total(p1, READS) == 1 + 20
    # A new client whose replica cannot be reached at all reads from the primary too.
    assert stratakv.Client(url_of(cl) + "?read_from=nearest").get(keys[0]) == vals[0]


def test_a_replica_that_answers_moved_falls_back_and_the_map_is_refreshed(cl):
    """Last in this module (after shard 1's replica stopped): shard 0's replica restarts as a
    replica of shard 1 in topology version 2, while the primaries still serve version 1. A
    client whose map is version 1 reads shard 0's keys from it: -MOVED, so the primary answers,
    and the map is refreshed (version 2: shard 0 has no replica, its reads go to the primary)."""
    p0, p1, r0, r1 = cl.nodes
    keys = shard_keys(cl, "moved", 10)[0]
    vals = [pattern(50, i) for i in range(10)]
    assert stratakv.Client(url_of(cl)).batch_put(keys, vals) == [True] * 10
    cl.topology["version"] = 2
    cl.topology["shards"][0]["replicas"] = []
    cl.topology["shards"][1]["replicas"] = [cl.ids[2]]
    cl.write()
    r0.stop()
    r0.start()
    wait_until("replica link up", lambda: info(r0, "replication").get("master_link_status") == "up")
    kv = stratakv.Client(url_of(cl, 0), read_from="replicas")  # the map from p0: version 1
    for srv in (p0, r0):
        srv.client().config_resetstat()
    targets = [bytearray(50) for _ in keys]
    assert kv.batch_get_into(keys, targets) == [50] * 10
    assert [bytes(t) for t in targets] == vals
    assert calls(r0, "kv.mget") == 1 and "errorstat_MOVED" in info(r0, "errorstats")  # -MOVED entries
    assert calls(p0, "kv.mget") == 1
    for srv in (p0, r0):
        srv.client().config_resetstat()
    assert [kv.get(k) for k in keys] == vals  # version 2: shard 0 has no replica
    assert total(r0, READS) == 0 and total(p0, READS) == 10
