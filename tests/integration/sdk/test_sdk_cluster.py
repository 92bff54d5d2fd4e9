"""stratakv (Python) on a cluster: a redis+cluster:// Client over three stratakv primaries
(StaticCluster: a static topology file, each node with a Unix socket on this host).

Batches are split by node and run in parallel (one KV.MGET per node for 1,000 keys), every node
is reached over shm, prefix lookups join the nodes' counts and lease on each, -MOVED (slots
handed over with DEBUG SET-SLOT-OWNER, or a new topology version after a restart) and -ASK are
followed. Striped values: test_sdk_cluster_striping.py."""

import threading

import pytest

import stratakv
from cluster_util import StaticCluster
from sdk_cluster_util import (  # noqa: F401  (fixtures)
    MiB, OK, calls, cluster, info, key_slot, kv, pattern, reset_stats, url_of,
)


# ---- routing and batches ------------------------------------------------------------------

def test_cluster_url_seeds_and_transport(cluster, kv, sdk_server):
    assert kv.cluster and kv.transport == "shm"  # every node found by its Unix socket
    # Any seed will do, the first unreachable one is skipped.
    dead = "redis+cluster://127.0.0.1:1,127.0.0.1:%d" % cluster.ports[2]
    assert stratakv.Client(dead).cluster
    assert stratakv.Client(url_of(cluster), cluster_unix_sockets=False).transport == "resp"
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client("redis+cluster://127.0.0.1:1")
    assert e.value.kind == "connection"
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client("redis+cluster://127.0.0.1:1,")
    assert e.value.kind == "usage"
    assert not stratakv.Client("unix://" + cluster.sockets[0]).cluster
    # A server outside cluster mode behind a cluster URL is the one node of every slot (and is
    # found on its Unix socket by its port, having no node id).
    one = stratakv.Client("redis+cluster://127.0.0.1:%d" % sdk_server.port)
    assert one.cluster and one.transport == "shm"
    assert one.batch_put(["solo:%d" % i for i in range(50)], [b"v"] * 50) == [True] * 50
    assert one.prefix_match(["solo:%d" % i for i in range(50)]) == 50


def test_batches_across_three_nodes_byte_exact_over_shm(cluster, kv):
    reset_stats(cluster)
    before = [info(srv, "fastpath")["kv_put_bytes"] for srv in cluster.nodes]
    keys = ["blk:%d" % i for i in range(300)]
    values = [pattern(1000 + (i * 7919) % (300 << 10), i) for i in range(300)]
    owner = [cluster.owner_of(key_slot(k)) for k in keys]
    assert set(owner) == {0, 1, 2}
    assert kv.batch_put(keys, values) == [True] * 300
    targets = [bytearray(len(v) + 5) for v in values]
    assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
    for v, t in zip(values, targets):
        assert bytes(t[:len(v)]) == v
    for i, srv in enumerate(cluster.nodes):
        mine = sum(len(v) for v, o in zip(values, owner) if o == i)
        assert info(srv, "fastpath")["kv_put_bytes"] - before[i] == mine  # over shm, this node's keys
        assert srv.client().dbsize() == owner.count(i)
        assert calls(srv, "kv.mput") == 1 and calls(srv, "kv.mget") == 1
    assert kv.get(keys[7]) == values[7] and kv.get("nope") is None
    assert kv.batch_exists(keys[:3] + ["nope"]) == [True, True, True, False]
    assert kv.batch_remove(keys[:100]) == 100
    assert kv.batch_exists(keys[98:102]) == [False, False, True, True]
    # Scatter-gather pieces and registered memory route the same way.
    buf = kv.alloc_buffer(MiB)
    assert buf.zero_copy
    memoryview(buf)[:] = pattern(MiB, 9)
    kv.put("sg", [memoryview(buf)[:1000], b"middle", memoryview(buf)[5000:9000]])
    mv = memoryview(buf)
    assert kv.get("sg") == bytes(mv[:1000]) + b"middle" + bytes(mv[5000:9000])


def test_mget_of_1000_keys_costs_one_request_per_node(cluster, kv):
    keys = ["m:%d" % i for i in range(1000)]
    values = [pattern(64 + i % 200, i) for i in range(1000)]
    assert all(kv.batch_put(keys, values))
    reset_stats(cluster)
    out = kv.alloc_buffer(1000 * 512)
    targets = [memoryview(out)[i * 512:(i + 1) * 512] for i in range(1000)]
    assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
    for i, v in enumerate(values):
        assert bytes(targets[i][:len(v)]) == v
    for srv in cluster.nodes:
        stats = info(srv, "commandstats")
        assert stats["cmdstat_kv.mget"]["calls"] == 1, stats
        assert "cmdstat_get" not in stats and "cmdstat_kv.get" not in stats


# ---- prefix lookups -----------------------------------------------------------------------

def test_prefix_lookup_spans_nodes_and_leases_on_each(cluster, kv):
    chain = ["chain:%d" % i for i in range(40)]
    owner = [cluster.owner_of(key_slot(k)) for k in chain]
    assert set(owner) == {0, 1, 2}
    assert kv.prefix_match(chain) == 0
    assert all(kv.batch_put(chain, [b"x"] * 40))
    assert kv.prefix_match(chain) == 40
    # A miss on the second node the chain visits (its second key) ends the run there.
    second = next(o for o in owner if o != owner[0])
    j = [i for i, o in enumerate(owner) if o == second][1]
    assert kv.remove(chain[j])
    assert kv.prefix_match(chain) == j
    assert kv.prefix_match(chain[:j]) == j
    # Leases: each node leases the leading run of its own keys.
    assert kv.prefix_match(chain, pin_ms=10000) == j
    leased = [info(srv, "fastpath")["leased_keys"] for srv in cluster.nodes]
    for n in range(3):
        mine = [i for i, o in enumerate(owner) if o == n]
        expect = len([i for i in mine if i < j]) if n == owner[j] else len(mine)
        assert leased[n] == expect, (n, leased)
    assert all(leased[o] for o in set(owner[:j]))  # every node the run visits leased
    assert kv.unpin(chain) == sum(leased)
    assert [info(srv, "fastpath")["leased_keys"] for srv in cluster.nodes] == [0, 0, 0]


# ---- redirects ----------------------------------------------------------------------------

def test_moved_when_slots_are_handed_over():
    # A cluster of its own: DEBUG SET-SLOT-OWNER changes who serves slots (CLUSTER SLOTS keeps
    # telling the old map, which the client must not fall back to).
    c = StaticCluster(3).start()
    try:
        kv = stratakv.Client(url_of(c))
        keys = ["mv:%d" % i for i in range(200)]
        values = [pattern(500 + i, i) for i in range(200)]
        moved = [k for k in keys if c.owner_of(key_slot(k)) == 0]
        assert moved
        first, last = c.topology["shards"][0]["slots"][0]
        to_node1 = "127.0.0.1:%d" % c.ports[1]
        assert c.nodes[0].raw().call("DEBUG", "SET-SLOT-OWNER", first, last, to_node1) == OK
        assert c.nodes[1].raw().call("DEBUG", "SET-SLOT-OWNER", first, last, "MYSELF") == OK
        reset_stats(c)
        assert kv.batch_put(keys, values) == [True] * 200  # per-key -MOVED, retried on node 1
        assert c.nodes[0].client().dbsize() == 0
        assert c.nodes[1].client().dbsize() == len(moved) + sum(c.owner_of(key_slot(k)) == 1 for k in keys)
        assert calls(c.nodes[0], "kv.mput") == 1 and calls(c.nodes[1], "kv.mput") == 2
        # The map learnt the slots: one KV.MGET per node that serves them now, none to node 0.
        reset_stats(c)
        targets = [bytearray(1000) for _ in keys]
        assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
        assert all(bytes(t[:len(v)]) == v for t, v in zip(targets, values))
        assert calls(c.nodes[0], "kv.mget") == 0
        assert calls(c.nodes[1], "kv.mget") == 1 and calls(c.nodes[2], "kv.mget") == 1
        # Prefix lookups join what every node has, the moved slots' keys included.
        assert kv.prefix_match(keys) == 200
        kv.remove(keys[150])
        assert kv.prefix_match(keys, pin_ms=1000) == 150
        assert kv.put(keys[150], values[150])
        # Single-key calls and prefix lookups follow too (a fresh client, with the old map). A
        # node's own CLUSTER SLOTS still tells the old map here, so a prefix lookup learns one
        # slot per round: until its rounds run out its answer may be short, never long.
        fresh = stratakv.Client(url_of(c, 2))
        assert fresh.get(moved[0]) == values[keys.index(moved[0])]
        assert fresh.prefix_match(keys) <= 200
        assert all(fresh.batch_exists(keys))  # learns every moved slot of the chain at once
        assert fresh.prefix_match(keys) == 200
        assert fresh.put("mv:new:%d" % 0, b"v") and fresh.exists("mv:new:0")
        # With one attempt, a redirected key keeps its -MOVED.
        once = stratakv.Client(url_of(c), cluster_max_attempts=1)
        key = next(k for k in ("once:%d" % i for i in range(1000)) if first <= key_slot(k) <= last)
        with pytest.raises(stratakv.Error, match="^MOVED %d 127.0.0.1:%d$" % (key_slot(key), c.ports[1])):
            once.put(key, b"v")
    finally:
        c.stop()


def test_moved_after_a_restart_with_a_new_topology():
    c = StaticCluster(3).start()
    try:
        kv = stratakv.Client(url_of(c))
        keys = ["rs:%d" % i for i in range(300)]
        assert all(kv.batch_put(keys, [b"old"] * 300))
        # Version 2: slots 0..2000 move from node 0 to node 2. Every node restarts with it.
        c.stop()
        c.topology["version"] = 2
        c.topology["shards"][0]["slots"] = [[2001, 5461]]
        c.topology["shards"][2]["slots"] = [[0, 2000], [10923, 16383]]
        c.write()
        c.start()
        values = [pattern(300 + i, i) for i in range(300)]
        assert kv.batch_put(keys, values) == [True] * 300  # lost connections, then the new map
        reset_stats(c)
        targets = [bytearray(1000) for _ in keys]
        assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
        assert all(bytes(t[:len(v)]) == v for t, v in zip(targets, values))
        for i, srv in enumerate(c.nodes):
            assert srv.client().dbsize() == sum(c.owner_of(key_slot(k)) == i for k in keys)
            assert calls(srv, "kv.mget") == 1
        assert kv.transport == "shm"
    finally:
        c.stop()


class AskingSeed:
    """A fake cluster node: it says it serves every slot, then answers every key with
    -ASK <slot> <the real node>, which serves it after ASKING."""

    def __init__(self, real_port):
        import socket
        self.real_port = real_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.asks = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.session, args=(conn,), daemon=True).start()

    def session(self, conn):
        f = conn.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                args = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    args.append(f.read(n + 2)[:-2])
                conn.sendall(self.reply(args))
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def reply(self, args):
        cmd = b" ".join(args[:2]).upper()
        if cmd == b"CLUSTER INFO":
            text = b"cluster_state:ok\r\ncluster_current_epoch:1\r\n"
            return b"$%d\r\n%s\r\n" % (len(text), text)
        if cmd == b"CLUSTER SLOTS":
            return b"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n$4\r\nfake\r\n" % self.port
        if args[0].upper() in (b"SET", b"GET", b"EXISTS", b"DEL"):
            self.asks += 1
            return b"-ASK %d 127.0.0.1:%d\r\n" % (key_slot(args[1]), self.real_port)
        return b"-ERR unknown command\r\n"  # CONFIG, KV.*: no fast path, no socket


def test_ask_is_followed_once_after_asking():
    real = StaticCluster(1).start()  # a cluster of one: serves every slot, accepts ASKING
    seed = AskingSeed(real.ports[0])
    try:
        kv = stratakv.Client("redis+cluster://127.0.0.1:%d" % seed.port, cluster_unix_sockets=False)
        assert kv.transport == "resp"
        assert kv.put("asked", b"value")
        assert kv.get("asked") == b"value"
        assert kv.batch_put(["a1", "a2"], [b"1", b"2"]) == [True, True]
        assert kv.exists("a1") and kv.remove("a2")
        r = real.nodes[0].client()
        assert [r.get(k) for k in ("asked", "a1", "a2")] == [b"value", b"1", None]
        assert calls(real.nodes[0], "asking") >= 6
        assert seed.asks >= 6
    finally:
        seed.sock.close()
        real.stop()
