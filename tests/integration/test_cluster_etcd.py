"""A cluster whose topology lives in a real etcd (docs/cluster.md): nodes register under leases,
stratakv-admin creates the cluster and changes it by compare-and-swap, nodes follow each new
version (clients see -MOVED after an empty slot changes hands), and an etcd outage under load
changes nothing: no client error, no ownership change, a node restarted meanwhile routes from
its saved copy, and the link comes back when etcd does. scripts/cluster.sh brings up and down a
local cluster the same way."""

import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from etcd_util import etcd_binary
from harness import Server, cluster_sh_base_port, free_port, server_binary, stop_servers, wait_until
from resp_util import Err, Simple

OK = Simple("OK")

REPO = Path(__file__).resolve().parents[2]
LEASE_TTL = 2  # seconds: short, so an outage of several TTLs stays short


def admin_binary():
    return str(Path(server_binary()).parent / "stratakv-admin")


def admin(etcd, prefix, *args, check=True):
    out = subprocess.run([admin_binary(), "--etcd", etcd.endpoint, "--prefix", prefix] + list(args),
                         capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def info(srv, section="cluster"):
    return srv.client().info(section)




def start_nodes(etcd, prefix, n):
    nodes = []
    for _ in range(n):
        # A fixed port: a restarted node keeps the address its topology names.
        srv = Server(cluster_enabled="yes", cluster__etcd__endpoints=etcd.endpoint,
                     cluster__etcd__prefix=prefix, cluster__etcd__lease_ttl=LEASE_TTL,
                     port=free_port())
        srv.config["unixsocket"] = str(srv.workdir / "s.sock")
        nodes.append(srv.start())
    return nodes


def test_nodes_wait_for_a_topology_then_follow_etcd(etcd):
    prefix = "/stratakv/t%d" % random.randrange(1 << 30)
    nodes = start_nodes(etcd, prefix, 3)
    try:
        # Registered, serving nothing yet.
        wait_until("3 registrations", lambda: len(etcd.get_prefix(prefix + "/nodes/")) == 3)
        c = nodes[0].raw()
        assert c.call("GET", "foo") == Err("CLUSTERDOWN Hash slot not served")
        assert info(nodes[0])["cluster_state"] == "fail"
        out = admin(etcd, prefix, "create", "--shards", "3", "--wait", "20")
        assert "created cluster" in out.stdout
        for srv in nodes:
            wait_until("cluster_state ok", lambda: info(srv)["cluster_state"] == "ok")
        assert admin(etcd, prefix, "create", "--shards", "3", check=False).returncode == 1
        slots = [srv.raw().call("CLUSTER", "SLOTS") for srv in nodes]
        assert slots[0] == slots[1] == slots[2] and len(slots[0]) == 3
        status = admin(etcd, prefix, "status").stdout
        assert "topology version 1" in status and status.count("primary") == 3

        # An empty slot changes hands: the old owner redirects to the new one.
        slot = c.call("CLUSTER", "KEYSLOT", "moving-key")
        owner = next(i for i, r in enumerate(slots[0]) if r[0] <= slot <= r[1])
        target = (owner + 1) % 3
        port = lambda i: int(slots[0][i][2][1])
        old = next(s for s in nodes if s.port == port(owner))
        new = next(s for s in nodes if s.port == port(target))
        admin(etcd, prefix, "assign-slots", str(slot), "--to", "127.0.0.1:%d" % new.port)
        for srv in nodes:  # every node, so that the new owner serves the slot too
            wait_until("version 2", lambda: info(srv)["cluster_topology_version"] == 2)
        assert old.raw().call("SET", "moving-key", "v") == Err(
            "MOVED %d 127.0.0.1:%d" % (slot, new.port))
        assert new.raw().call("SET", "moving-key", "v") == OK
        assert new.raw().call("GET", "moving-key") == b"v"
        # A slot with keys does not move by assign-slots.
        out = admin(etcd, prefix, "assign-slots", str(slot), "--to", "127.0.0.1:%d" % old.port,
                    check=False)
        assert out.returncode == 1 and "holds 1 key" in out.stderr
        # The node record says which version each node serves.
        wait_until("records at version 2", lambda: all(
            b'"topology_version":2' in v for v in etcd.get_prefix(prefix + "/nodes/").values()))
    finally:
        stop_servers(*nodes)


def test_etcd_outage_under_load_changes_nothing(etcd):
    prefix = "/stratakv/o%d" % random.randrange(1 << 30)
    nodes = start_nodes(etcd, prefix, 3)
    try:
        admin(etcd, prefix, "create", "--shards", "3", "--wait", "20")
        for srv in nodes:
            wait_until("cluster_state ok", lambda: info(srv)["cluster_state"] == "ok")
        before = nodes[0].raw().call("CLUSTER", "SLOTS")
        rc = RedisCluster(host="127.0.0.1", port=nodes[0].port, socket_timeout=10)
        errors, done, ops = [], threading.Event(), [0]

        def load():
            i = 0
            while not done.is_set():
                k = "load-%d" % (i % 2000)
                try:
                    rc.set(k, k * 3)
                    v = rc.get(k)
                    if v != (k * 3).encode():
                        errors.append("%s read %r" % (k, v))
                except Exception as e:  # any client error fails the test
                    errors.append(repr(e))
                i += 1
                ops[0] += 1

        t = threading.Thread(target=load)
        t.start()
        time.sleep(0.5)
        etcd.stop()
        wait_until("link down", lambda: info(nodes[0])["cluster_etcd_link"] == "down", timeout=15)
        time.sleep(3 * LEASE_TTL)  # several lease TTLs without etcd
        ops_during = ops[0]
        done.set()
        t.join()
        assert errors == [], errors[:5]
        assert ops_during > 100
        for srv in nodes:
            assert srv.raw().call("CLUSTER", "SLOTS") == before  # no ownership change
            assert info(srv)["cluster_state"] == "ok"

        # A node restarted while etcd is away routes from its saved copy.
        restarted = nodes[1]
        assert restarted.stop() is None
        restarted.start()
        assert restarted.raw().call("CLUSTER", "SLOTS") == before
        assert info(restarted)["cluster_topology_version"] == 1
        assert info(restarted)["cluster_etcd_link"] == "down"
        first, last = next((r[0], r[1]) for r in before if int(r[2][1]) == restarted.port)
        c = restarted.raw()
        k = next("r%d" % i for i in range(1000)
                 if first <= c.call("CLUSTER", "KEYSLOT", "r%d" % i) <= last)
        assert c.call("SET", k, "1") == OK
        assert c.call("GET", k) == b"1"

        # etcd back: every node's link comes up and its registration is there again.
        etcd.start()
        for srv in nodes:
            wait_until("link up", lambda: info(srv)["cluster_etcd_link"] == "up", timeout=20)
        wait_until("3 registrations", lambda: len(etcd.get_prefix(prefix + "/nodes/")) == 3)
        assert rc.set("after", "1") and rc.get("after") == b"1"
        rc.close()
    finally:
        stop_servers(*nodes)


def test_cluster_sh_up_status_down(tmp_path):
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    base = cluster_sh_base_port(3)
    env = dict(os.environ, STRATAKV_CLUSTER_DIR=str(tmp_path / "cluster"),
               BUILD_DIR=str(Path(server_binary()).parents[1]))
    script = str(REPO / "scripts" / "cluster.sh")
    try:
        up = subprocess.run([script, "up", "3", "--base-port", str(base)], env=env,
                            capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "seed 127.0.0.1:%d" % base in up.stdout
        for i in range(20):
            out = subprocess.run(["redis-cli", "-c", "-p", str(base), "SET", "k%d" % i, "v%d" % i],
                                 capture_output=True, text=True, timeout=10)
            assert out.stdout.strip() == "OK", out
        # The other clients of the issue, unchanged, on the same cluster.
        rc = RedisCluster(host="127.0.0.1", port=base + 1, socket_timeout=20)
        for i in range(1000):
            assert rc.set("py-%d" % i, "value-%d" % i)
        assert all(rc.get("py-%d" % i) == b"value-%d" % i for i in range(1000))
        rc.close()
        node_dir = REPO / "tests" / "clients" / "node"
        node_clients = 0
        if shutil.which("node") and (node_dir / "node_modules").is_dir():
            for client in ("ioredis", "node-redis"):
                out = subprocess.run(["node", str(node_dir / "cluster_roundtrip.mjs"),
                                      "127.0.0.1:%d" % (base + 2), "1000", client],
                                     capture_output=True, text=True, timeout=120,
                                     cwd=str(node_dir))
                assert out.returncode == 0, out.stdout + out.stderr
                node_clients += 1000
        status = subprocess.run([script, "status"], env=env, capture_output=True, text=True,
                                timeout=30)
        assert status.returncode == 0 and status.stdout.count("primary") == 3, status.stdout
        keys = 0
        for line in status.stdout.splitlines():
            if " primary " in line:
                keys += int(line.split()[5])
        # redis-cli's 20, redis-py's 1000, and each node client's 1000 plus its 2 tagged keys
        assert keys == 20 + 1000 + node_clients + (2 * node_clients // 1000)
    finally:
        down = subprocess.run([script, "down"], env=env, capture_output=True, text=True,
                              timeout=60)
    assert down.returncode == 0 and "cluster down" in down.stdout
    assert not (tmp_path / "cluster").exists()
