"""Three stratakv primaries over a static topology file (cluster.topology-file, no etcd;
docs/cluster.md): every node tells the same slot map, redirects keys it does not serve with
-MOVED, and real cluster clients (redis-py's RedisCluster, redis-cli -c) store and read 10,000
keys byte-exact across them. The fast path's batches route each key (per-key -MOVED entries).
A shard without a primary takes its slots down (-CLUSTERDOWN)."""

import hashlib
import subprocess

import pytest
import redis
from redis.cluster import RedisCluster

from cluster_util import StaticCluster
from fastpath_util import FastConn, Segment
from resp_util import Err, Simple

OK = Simple("OK")
MiB = 1 << 20


@pytest.fixture(scope="module")
def cluster():
    c = StaticCluster(3).start()
    yield c
    c.stop()


def key_slot(c, key):
    return c.nodes[0].raw().call("CLUSTER", "KEYSLOT", key)


def value_of(key):
    return hashlib.sha256(key.encode()).digest() * (1 + len(key) % 7)


def test_every_node_tells_the_same_slot_map(cluster):
    maps = [srv.raw().call("CLUSTER", "SLOTS") for srv in cluster.nodes]
    assert maps[0] == maps[1] == maps[2]
    assert [r[:2] for r in maps[0]] == [[0, 5461], [5462, 10922], [10923, 16383]]
    for i, (first, last, (host, port, node_id, _meta)) in enumerate(maps[0]):
        assert [first, last] == cluster.topology["shards"][i]["slots"][0]
        assert (host, port, node_id) == (b"127.0.0.1", cluster.ports[i], cluster.ids[i].encode())
    for i, srv in enumerate(cluster.nodes):
        c = srv.raw()
        assert c.call("CLUSTER", "MYID") == cluster.ids[i].encode()
        assert c.call("CLUSTER", "MYSHARDID") == cluster.shard_ids[i].encode()
        info = dict(l.split(":", 1) for l in c.call("CLUSTER", "INFO").decode().split("\r\n") if l)
        assert info["cluster_state"] == "ok" and info["cluster_known_nodes"] == "3"
        assert info["cluster_size"] == "3" and info["cluster_current_epoch"] == "1"
        nodes = c.call("CLUSTER", "NODES").decode().splitlines()
        assert len(nodes) == 3
        assert sum("myself" in line for line in nodes) == 1


def test_cluster_topology_is_the_record(cluster):
    import json
    for srv in cluster.nodes:
        record = json.loads(srv.raw().call("CLUSTER", "TOPOLOGY"))
        assert record["version"] == 1
        assert [n["unix_socket"] for n in record["nodes"]] == cluster.sockets
        assert [n["host_id"] for n in record["nodes"]] == ["test-host"] * 3
        assert [s["slots"] for s in record["shards"]] == [
            s["slots"] for s in cluster.topology["shards"]]


def test_keys_another_node_serves_are_moved(cluster):
    for key in ("foo", "bar", "somekey", "{tag}a", "model@1@0@ab12@bf16"):
        slot = key_slot(cluster, key)
        owner = cluster.owner_of(slot)
        for i, srv in enumerate(cluster.nodes):
            reply = srv.raw().call("SET", key, "v")
            if i == owner:
                assert reply == OK
            else:
                assert reply == Err("MOVED %d 127.0.0.1:%d" % (slot, cluster.ports[owner])), key
        assert cluster.nodes[owner].raw().call("DEL", key) == 1


def test_redis_py_cluster_client_10000_keys(cluster):
    rc = RedisCluster(host="127.0.0.1", port=cluster.ports[1], socket_timeout=20)
    keys = ["key:%05d" % i for i in range(10000)]
    for k in keys:
        assert rc.set(k, value_of(k))
    for k in keys:
        assert rc.get(k) == value_of(k), k
    # Each node holds exactly the keys of its own slots.
    per_node = [srv.client().dbsize() for srv in cluster.nodes]
    assert sum(per_node) == 10000 and min(per_node) > 2500, per_node
    for srv in cluster.nodes:
        owned = [k for k in keys if cluster.owner_of(key_slot(cluster, k)) == cluster.nodes.index(srv)]
        assert len(owned) == srv.client().dbsize()
    # Multi-key commands within one slot, through the client.
    assert rc.mset_nonatomic({"{u}a": b"1", "{u}b": b"2"})
    assert rc.mget_nonatomic(["{u}a", "{u}b"]) == [b"1", b"2"]
    assert rc.delete(*keys[:100]) == 100
    rc.close()


def test_redis_cli_follows_moved(cluster):
    def cli(*args):
        out = subprocess.run(["redis-cli", "-c", "-p", str(cluster.ports[0])] + list(args),
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    for i in range(20):
        key = "cli-%d" % i
        assert cli("SET", key, "value-%d" % i) == "OK"
        assert cli("GET", key) == "value-%d" % i
    owners = {cluster.owner_of(key_slot(cluster, "cli-%d" % i)) for i in range(20)}
    assert owners == {0, 1, 2}


def test_fast_path_batches_route_each_key(cluster):
    # Keys of all three nodes in one batch, sent to node 0.
    keys = ["blk-%d" % i for i in range(12)]
    owner = [cluster.owner_of(key_slot(cluster, k)) for k in keys]
    assert set(owner) == {0, 1, 2}
    c = FastConn(cluster.sockets[0])
    seg = Segment(MiB)
    c.register(seg)
    for i in range(len(keys)):
        seg.write(i * 100, bytes([i]) * 100)
    args = [len(keys)]
    for i, k in enumerate(keys):
        args += [k, 100, 1, seg.id, i * 100, 100]
    reply = c.call("KV.MPUT", *args)
    for k, o, r in zip(keys, owner, reply):
        if o == 0:
            assert r == OK, k
        else:
            slot = key_slot(cluster, k)
            assert r == Err("MOVED %d 127.0.0.1:%d" % (slot, cluster.ports[o])), (k, r)
    # Only node 0's keys are there, and only node 0's bytes moved.
    assert cluster.nodes[0].client().info("fastpath")["kv_put_bytes"] == 100 * owner.count(0)
    args = [len(keys)]
    for i, k in enumerate(keys):
        args += [k, 1, seg.id, 2048 + i * 100, 100]
    reply = c.call("KV.MGET", *args)
    for i, (k, o, r) in enumerate(zip(keys, owner, reply)):
        if o == 0:
            assert r == 100 and seg.read(2048 + i * 100, 100) == bytes([i]) * 100
        else:
            assert isinstance(r, Err) and r.startswith("MOVED "), r
    # KV.PREFIX: the run over node 0's keys; where it leaves node 0.
    first_foreign = next(i for i, o in enumerate(owner) if o != 0)
    reply = c.call("KV.PREFIX", *keys)
    assert reply[0] == owner.count(0)
    assert reply[1] == first_foreign
    assert reply[2].startswith("MOVED %d " % key_slot(cluster, keys[first_foreign]))
    own = [k for k, o in zip(keys, owner) if o == 0]
    assert c.call("KV.PREFIX", *own) == len(own)  # all its own: a plain count
    # Leases: taken on node 0's keys only; KV.UNPIN of the whole chain releases those.
    assert c.call("KV.PREFIX", *own, "PIN", 10000) == len(own)
    assert c.call("KV.UNPIN", *keys) == len(own)
    c.close()
    seg.close()


def test_a_shard_without_primary_takes_its_slots_down(tmp_path):
    c = StaticCluster(2)
    c.topology["shards"][1]["primary"] = ""
    c.write()
    c.start()
    try:
        r = c.nodes[0].raw()
        info = dict(l.split(":", 1) for l in r.call("CLUSTER", "INFO").decode().split("\r\n") if l)
        assert info["cluster_state"] == "fail"
        assert info["cluster_slots_assigned"] == "16384" and info["cluster_slots_ok"] == "8192"
        down_key = next(k for k in ("a%d" % i for i in range(100))
                        if key_slot(c, k) >= 8192)
        up_key = next(k for k in ("a%d" % i for i in range(100)) if key_slot(c, k) < 8192)
        assert r.call("GET", down_key) == Err("CLUSTERDOWN Hash slot not served")
        assert r.call("GET", up_key) == Err("CLUSTERDOWN The cluster is down")
        assert r.call("PING") == Simple("PONG")  # no keys: served
    finally:
        c.stop()
    # Without full coverage required, the served half goes on.
    c = StaticCluster(2, cluster_require_full_coverage="no")
    c.topology["shards"][1]["primary"] = ""
    c.write()
    c.start()
    try:
        r = c.nodes[0].raw()
        up_key = next(k for k in ("a%d" % i for i in range(100)) if key_slot(c, k) < 8192)
        assert r.call("SET", up_key, "1") == OK
    finally:
        c.stop()
