"""A cluster over TLS: StaticCluster(2, replicas=1) whose nodes each have a tls-port (in their
config and in the topology), certificates of tls_util.py.

What is checked: asked over TLS, CLUSTER SLOTS, CLUSTER NODES and -MOVED (of a small request
and of one whose large value is dropped unread) name the nodes' tls-ports; asked over plain TCP,
their ports (Redis 7.0 under tls-cluster: the port of the client's kind). redis-py's
RedisCluster with ssl=True follows them. The SDK on a rediss+cluster:// URL stores and reads
byte-exact values of 1 B to 8 MiB on both shards, one by one and in batches, reads from the
replicas with read_from=replicas, and reaches every node on its tls-port (CLIENT LIST's laddr),
never on its plain port or Unix socket; a wrong CA is refused."""

import shutil
import time

import pytest
import redis
import redis.cluster

import stratakv
from cluster_util import StaticCluster
from harness import tmp_root
from sdk_cluster_util import MiB, key_slot, pattern
from tls_util import make_tls_files

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")


@pytest.fixture(scope="module")
def certs():
    return make_tls_files(tmp_root() / "sdk-cluster-tls-files")


@pytest.fixture(scope="module")
def cl(certs):
    c = StaticCluster(2, replicas=1, tls=certs.server_config(tls_auth_clients="no"))
    c.start()
    for r in c.nodes[2:]:
        wait_link_up(r)
    yield c
    c.stop()


def wait_link_up(srv, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if srv.client().info("replication").get("master_link_status") == "up":
            return
        time.sleep(0.05)
    raise AssertionError("replica link of %s not up" % srv)


def tls_client(certs, port):
    return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=certs.ca)


def url(cl, certs, *query):
    q = "&".join(("ssl_ca_certs=" + certs.ca,) + query)
    return "rediss+cluster://127.0.0.1:%d?%s" % (cl.tls_ports[0], q)


def key_of_shard(cl, shard, prefix="k"):
    i = 0
    while cl.owner_of(key_slot("%s:%d" % (prefix, i))) != shard:
        i += 1
    return "%s:%d" % (prefix, i)


def test_cluster_replies_name_the_port_of_the_clients_kind(cl, certs):
    over_tls = tls_client(certs, cl.tls_ports[0])
    plain = cl.nodes[0].client()
    for conn, ports in ((over_tls, cl.tls_ports), (plain, cl.ports)):
        slots = conn.execute_command("CLUSTER", "SLOTS")
        seen = sorted(node[1] for rng in slots for node in rng[2:])
        assert seen == sorted(ports), (slots, ports)
        nodes = conn.execute_command("CLUSTER", "NODES")
        nodes = nodes.decode() if isinstance(nodes, bytes) else nodes
        if isinstance(nodes, dict):  # redis-py parses CLUSTER NODES
            listed = sorted(int(addr.split(":")[1].split("@")[0]) for addr in nodes)
        else:
            listed = sorted(int(line.split()[1].split(":")[1].split("@")[0])
                            for line in nodes.splitlines())
        assert listed == sorted(ports), nodes
    other = key_of_shard(cl, 1)
    for conn, port in ((over_tls, cl.tls_ports[1]), (plain, cl.ports[1])):
        with pytest.raises(redis.exceptions.ResponseError) as e:
            conn.execute_command("GET", other)
        assert str(e.value) == "MOVED %d 127.0.0.1:%d" % (key_slot(other), port)
        # A value large enough to be dropped unread is redirected the same way.
        with pytest.raises(redis.exceptions.ResponseError) as e:
            conn.execute_command("SET", other, b"x" * (4 * MiB))
        assert str(e.value) == "MOVED %d 127.0.0.1:%d" % (key_slot(other), port)
        assert conn.ping()  # the connection goes on


def test_redis_py_cluster_over_tls(cl, certs):
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=cl.tls_ports[0], ssl=True,
                                    ssl_ca_certs=certs.ca)
    try:
        keys = [key_of_shard(cl, s, "rc%d" % j) for s in (0, 1) for j in range(3)]
        for i, k in enumerate(keys):
            assert rc.set(k, pattern(100 + i, i))
        for i, k in enumerate(keys):
            assert rc.get(k) == pattern(100 + i, i)
        assert {n.port for n in rc.get_nodes()} == set(cl.tls_ports)
    finally:
        rc.close()


def laddr_ports(srv):
    """The local ports of srv's TCP clients (CLIENT LIST's laddr; Unix socket clients have
    a path there)."""
    out = []
    for c in srv.client().client_list():
        laddr = c.get("laddr", "")
        if ":" in laddr and not laddr.startswith("/"):
            out.append(int(laddr.rsplit(":", 1)[1]))
        else:
            out.append(laddr)
    return out


def test_sdk_rediss_cluster_url_byte_exact_on_both_shards(cl, certs):
    before = {i: laddr_ports(n) for i, n in enumerate(cl.nodes)}
    kv = stratakv.Client(url(cl, certs))
    assert kv.cluster
    keys = [key_of_shard(cl, s, "sdk%d" % j) for s in (0, 1) for j in range(4)]
    sizes = [1, 1000, MiB, 8 * MiB, 3, 64 * 1024, 2 * MiB, 8 * MiB + 5]
    values = [pattern(n, i) for i, n in enumerate(sizes)]
    for k, v in zip(keys, values):
        assert kv.put(k, v)
    for k, v in zip(keys, values):
        assert kv.get(k) == v
    assert kv.transport == "resp"
    # Batches across both shards: one pipeline per node.
    bkeys = [key_of_shard(cl, s, "batch%d" % j) for s in (0, 1) for j in range(10)]
    bvals = [pattern(1000 + 97 * i, 50 + i) for i in range(len(bkeys))]
    assert kv.batch_put(bkeys, bvals) == [True] * len(bkeys)
    targets = [bytearray(len(v)) for v in bvals]
    assert kv.batch_get_into(bkeys, targets) == [len(v) for v in bvals]
    assert [bytes(t) for t in targets] == bvals
    # The values are on the shards' primaries, read over plain TCP by redis-py.
    for k, v in zip(keys + bkeys, values + bvals):
        owner = cl.nodes[cl.owner_of(key_slot(k))]
        assert owner.client().get(k) == v
    # Every new connection of the SDK is on a node's tls-port.
    for i in (0, 1):
        new = [p for p in laddr_ports(cl.nodes[i])]
        for p in before[i]:
            if p in new:
                new.remove(p)
        new = [p for p in new if p != cl.ports[i]]  # this test's own client(): plain
        assert new and all(p == cl.tls_ports[i] for p in new), (new, cl.tls_ports[i])


def test_sdk_rediss_cluster_reads_from_replicas(cl, certs):
    kv = stratakv.Client(url(cl, certs, "read_from=replicas"))
    keys = [key_of_shard(cl, s, "rep%d" % j) for s in (0, 1) for j in range(3)]
    values = [pattern(5000 + i, 90 + i) for i in range(len(keys))]
    assert kv.batch_put(keys, values) == [True] * len(keys)
    for p in cl.nodes[:2]:
        assert p.client().execute_command("WAIT", 1, 10000) == 1
    for r in cl.nodes[2:]:
        r.client().config_resetstat()
    for k, v in zip(keys, values):
        assert kv.get(k) == v
    reads = sum(r.client().info("commandstats").get("cmdstat_kv.get", {}).get("calls", 0) +
                r.client().info("commandstats").get("cmdstat_get", {}).get("calls", 0)
                for r in cl.nodes[2:])
    assert reads == len(keys)


def test_sdk_rediss_cluster_wrong_ca_is_refused(cl, certs):
    rogue_ca = str(certs.dir / "rogue-ca.crt")
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client("rediss+cluster://127.0.0.1:%d?ssl_ca_certs=%s" % (cl.tls_ports[0], rogue_ca))
    assert e.value.kind == "connection", str(e.value)
    assert "certificate verify failed" in str(e.value), str(e.value)
    # The keyword overrides the URL's query (redis-py's names), for every node.
    kv = stratakv.Client("rediss+cluster://127.0.0.1:%d?ssl_ca_certs=%s" % (cl.tls_ports[0], rogue_ca),
                         ssl_ca_certs=certs.ca)
    keys = [key_of_shard(cl, s, "kw") for s in (0, 1)]
    assert kv.batch_put(keys, [b"a", b"b"]) == [True, True]
    assert [kv.get(k) for k in keys] == [b"a", b"b"]
