"""The cluster family on one node (docs/cluster.md), against redis-server 7.0 in cluster mode in
the same run: CLUSTER INFO / SLOTS / SHARDS / NODES / MYID / KEYSLOT / COUNTKEYSINSLOT /
GETKEYSINSLOT / REPLICAS, ASKING / READONLY / READWRITE, -CROSSSLOT, hash tags, INFO cluster,
HELLO's mode, the node id kept across restarts, and the errors outside cluster mode.

A node in cluster mode with neither etcd nor a topology file serves every slot alone: what a
redis-server in cluster mode serves after CLUSTER ADDSLOTSRANGE 0 16383.
"""

import re
import time

import pytest

from harness import Server, launch_redis, launch_server, redis_binary, stop_servers
from resp_util import Err, Simple, Verbatim

OK = Simple("OK")
NODE_ID = re.compile(rb"^[0-9a-f]{40}$")


@pytest.fixture(scope="module")
def redis_cluster():
    """redis-server 7.0 in cluster mode, serving every slot alone."""
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    srv = launch_redis(cluster_enabled="yes")
    c = srv.raw()
    assert c.call("CLUSTER", "ADDSLOTSRANGE", 0, 16383) == OK
    deadline = time.monotonic() + 10
    while b"cluster_state:ok" not in c.call("CLUSTER", "INFO"):
        assert time.monotonic() < deadline, "redis-server's cluster did not become ok"
        time.sleep(0.05)
    c.close()
    yield srv
    stop_servers(srv)


@pytest.fixture(scope="module")
def node():
    srv = launch_server(cluster_enabled="yes")
    yield srv
    stop_servers(srv)


def both(node, redis_cluster):
    a, b = node.raw(), redis_cluster.raw()
    for c in (a, b):
        c.call("FLUSHALL")
    return a, b


def info_fields(text):
    if isinstance(text, Verbatim):
        text = text.data
    return dict(line.split(":", 1) for line in text.decode().split("\r\n") if ":" in line)


# ---------------------------------------------------------------- outside cluster mode

@pytest.mark.parametrize("cmd", [("CLUSTER", "INFO"), ("CLUSTER", "SLOTS"), ("CLUSTER", "KEYSLOT", "a"),
                                 ("CLUSTER", "MYID"), ("ASKING",), ("READONLY",), ("READWRITE",)])
def test_cluster_commands_outside_cluster_mode(raw, cmd):
    assert raw().call(*cmd) == Err("ERR This instance has cluster support disabled")


def test_info_and_hello_outside_cluster_mode(raw, r):
    assert r.info("cluster")["cluster_enabled"] == 0
    assert r.info("server")["redis_mode"] == "standalone"
    assert raw().hello3()[b"mode"] == b"standalone"


# ---------------------------------------------------------------- one node, every slot

def test_cluster_info_matches_redis(node, redis_cluster):
    a, b = both(node, redis_cluster)
    ours, theirs = info_fields(a.call("CLUSTER", "INFO")), info_fields(b.call("CLUSTER", "INFO"))
    assert list(ours) == list(theirs)  # the same fields in the same order
    for name in ("cluster_state", "cluster_slots_assigned", "cluster_slots_ok",
                 "cluster_slots_pfail", "cluster_slots_fail", "cluster_known_nodes",
                 "cluster_size"):
        assert ours[name] == theirs[name], name
    # RESP3: a verbatim string, as Redis's.
    a3, b3 = node.raw(), redis_cluster.raw()
    a3.hello3()
    b3.hello3()
    assert type(a3.call("CLUSTER", "INFO")) is type(b3.call("CLUSTER", "INFO")) is Verbatim


def shape(reply):
    """The types and structure of a reply, without its values (ids, ports differ)."""
    if isinstance(reply, list):
        return [shape(x) for x in reply]
    if isinstance(reply, dict):
        return {k: shape(v) for k, v in reply.items()}
    return type(reply).__name__


@pytest.mark.parametrize("resp3", [False, True])
def test_cluster_slots_and_shards_have_redis_shapes(node, redis_cluster, resp3):
    a, b = node.raw(), redis_cluster.raw()
    if resp3:
        a.hello3()
        b.hello3()
    for sub in ("SLOTS", "SHARDS"):
        ours, theirs = a.call("CLUSTER", sub), b.call("CLUSTER", sub)
        assert shape(ours) == shape(theirs), sub
    (slots,) = a.call("CLUSTER", "SLOTS")
    assert slots[:2] == [0, 16383]
    host, port, node_id = slots[2][:3]
    assert (host, port) == (b"127.0.0.1", node.port) and NODE_ID.match(node_id)
    assert node_id == a.call("CLUSTER", "MYID")


def test_cluster_nodes_line(node, redis_cluster):
    a, b = both(node, redis_cluster)
    (ours,) = a.call("CLUSTER", "NODES").decode().splitlines()
    (theirs,) = b.call("CLUSTER", "NODES").decode().splitlines()
    o, t = ours.split(" "), theirs.split(" ")
    assert len(o) == len(t)
    assert o[0] == a.call("CLUSTER", "MYID").decode()
    assert o[1] == "127.0.0.1:%d@0" % node.port
    assert o[2:] == t[2:]  # myself,master - 0 0 0 connected 0-16383


def test_keyslot_and_hash_tags_match_redis(node, redis_cluster):
    a, b = both(node, redis_cluster)
    for key in ("foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
                "foo{{bar}}zap", "a" * 300, "model@1@0@abcdef@bf16"):
        assert a.call("CLUSTER", "KEYSLOT", key) == b.call("CLUSTER", "KEYSLOT", key), key


def test_crossslot_and_hash_tags(node, redis_cluster):
    a, b = both(node, redis_cluster)
    for cmd in (("MSET", "a", "1", "b", "2"), ("MGET", "a", "b"), ("DEL", "a", "b"),
                ("EXISTS", "a", "b"), ("RENAME", "a", "b"),
                ("MSET", "{t}a", "1", "{t}b", "2"), ("MGET", "{t}a", "{t}b"),
                ("EXISTS", "{t}a", "{t}b", "{t}c"), ("DEL", "{t}a", "{t}b")):
        assert a.call(*cmd) == b.call(*cmd), cmd
    assert a.call("MSET", "a", "1", "b", "2") == Err(
        "CROSSSLOT Keys in request don't hash to the same slot")


def test_countkeysinslot_and_getkeysinslot(node, redis_cluster):
    a, b = both(node, redis_cluster)
    keys = ["{slot}%d" % i for i in range(25)]
    for c in (a, b):
        for k in keys:
            assert c.call("SET", k, "v") == OK
    slot = a.call("CLUSTER", "KEYSLOT", "{slot}")
    assert a.call("CLUSTER", "COUNTKEYSINSLOT", slot) == b.call("CLUSTER", "COUNTKEYSINSLOT", slot) == 25
    assert sorted(a.call("CLUSTER", "GETKEYSINSLOT", slot, 100)) == sorted(k.encode() for k in keys)
    assert len(a.call("CLUSTER", "GETKEYSINSLOT", slot, 10)) == 10
    for cmd in (("CLUSTER", "COUNTKEYSINSLOT", 16384), ("CLUSTER", "COUNTKEYSINSLOT", -1),
                ("CLUSTER", "COUNTKEYSINSLOT", "x"), ("CLUSTER", "GETKEYSINSLOT", 1, -1),
                ("CLUSTER", "GETKEYSINSLOT", 16384, 1), ("CLUSTER", "GETKEYSINSLOT", "x", 1),
                ("CLUSTER", "GETKEYSINSLOT", 1, "x"), ("CLUSTER", "KEYSLOT"),
                ("CLUSTER", "REPLICAS", "abc"), ("CLUSTER", "NOPE"), ("CLUSTER",)):
        assert a.call(*cmd) == b.call(*cmd), cmd


def test_replicas_of_a_primary_without_replicas(node, redis_cluster):
    a, b = both(node, redis_cluster)
    assert a.call("CLUSTER", "REPLICAS", a.call("CLUSTER", "MYID")) == []
    assert b.call("CLUSTER", "REPLICAS", b.call("CLUSTER", "MYID")) == []


def test_asking_readonly_readwrite(node, redis_cluster):
    a, b = both(node, redis_cluster)
    for cmd in ("ASKING", "READONLY", "READWRITE"):
        assert a.call(cmd) == b.call(cmd) == OK


def test_gossip_commands_name_the_admin_tool(node):
    c = node.raw()
    for cmd in (("CLUSTER", "MEET", "127.0.0.1", "7000"), ("CLUSTER", "ADDSLOTS", "1"),
                ("CLUSTER", "SETSLOT", "1", "STABLE"), ("CLUSTER", "FORGET", "x")):
        reply = c.call(*cmd)
        assert isinstance(reply, Err) and "stratakv-admin" in reply, (cmd, reply)
        assert reply.startswith("ERR CLUSTER %s " % cmd[1]), reply


def test_info_and_hello_in_cluster_mode(node):
    r = node.client()
    info = r.info("cluster")
    assert info["cluster_enabled"] == 1 and info["cluster_state"] == "ok"
    assert info["cluster_topology_source"] == "self"
    assert r.info("server")["redis_mode"] == "cluster"
    assert node.raw().hello3()[b"mode"] == b"cluster"


def test_node_id_is_kept_across_restarts(start_server):
    srv = start_server(cluster_enabled="yes")
    first = srv.raw().call("CLUSTER", "MYID")
    assert NODE_ID.match(first)
    text = (srv.workdir / "nodes.conf").read_text()
    assert ("id %s\n" % first.decode()) in text
    assert srv.stop() is None
    srv.start()
    assert srv.raw().call("CLUSTER", "MYID") == first


def test_a_malformed_node_id_file_stops_the_start():
    srv = Server(cluster_enabled="yes")
    (srv.workdir / "nodes.conf").write_text("id not-an-id\n")
    with pytest.raises(RuntimeError) as e:
        srv.start()
    assert "node id file" in str(e.value)
