"""stratakv-admin's slot migration commands against a real etcd (docs/cluster.md, "Moving
slots"): move-slots, cancel-migration, rebalance and the migrations in status. They refuse bad
input with exit 1 and leave the record alone, and write the migration the node side acts on.

Most tests need no server: the records are written straight into etcd, and the test plays the
node side (the source's primary streaming the keys, then its compare-and-swap): node()
completes a migration the way a node does, with a compare-and-swap of the record that moves
the ranges and sets the state. The last one drives scripts/cluster.sh add-node, rebalance and
remove-node on real nodes, which move 2000 keys there and back."""

import json
import os
import random
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from redis.cluster import RedisCluster

from etcd_util import Etcd, etcd_binary
from harness import cluster_sh_base_port, server_binary, wait_until

REPO = Path(__file__).resolve().parents[2]
ACTIVE = ("streaming", "handover")


def admin_binary():
    return str(Path(server_binary()).parent / "stratakv-admin")


def hexid(c):
    return c * 40


def admin(etcd, prefix, *args, timeout=60):
    return subprocess.run([admin_binary(), "--etcd", etcd.endpoint, "--prefix", prefix] +
                          [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def admin_bg(etcd, prefix, *args):
    return subprocess.Popen([admin_binary(), "--etcd", etcd.endpoint, "--prefix", prefix] +
                            [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)




@pytest.fixture
def prefix():
    return "/stratakv/m%d" % random.randrange(1 << 30)


def record(etcd, prefix):
    value, rev = etcd.get(prefix + "/topology")
    return json.loads(value), rev


def write(etcd, prefix, t):
    etcd.put(prefix + "/topology", json.dumps(t))


def cluster(shards):
    """A record of shards given as (slot ranges, has a primary): node i on port 7000 + i."""
    t = {"format": 1, "version": 1, "name": "m", "nodes": [], "shards": [], "migrations": []}
    for i, (slots, primary) in enumerate(shards):
        nid = hexid("abcdef"[i])
        t["nodes"].append({"id": nid, "host": "127.0.0.1", "port": 7000 + i})
        t["shards"].append({"id": hexid(str(i + 1)), "slots": [list(r) for r in slots],
                            "primary": nid if primary else "", "replicas": [],
                            "primary_epoch": 1})
    return t


def count(slots):
    return sum(b - a + 1 for a, b in slots)


def ranges(slot_set):
    out = []
    for s in sorted(slot_set):
        if out and out[-1][1] + 1 == s:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def node(etcd, prefix, state="done", which=None):
    """Plays the source's primary: completes the active migration (`which`: its id; None: the
    first one) by compare-and-swap, moving its ranges when `state` is done. Returns its id, or
    None when no migration is active."""
    while True:
        t, rev = record(etcd, prefix)
        m = next((m for m in t["migrations"] if m["state"] in ACTIVE and
                  (which is None or m["id"] == which)), None)
        if m is None:
            return None
        if state == "done":
            moving = {s for a, b in m["slots"] for s in range(a, b + 1)}
            for s in t["shards"]:
                held = {x for a, b in s["slots"] for x in range(a, b + 1)}
                if s["id"] == m["source_shard"]:
                    assert moving <= held, "the source does not serve the slots it sends"
                    s["slots"] = ranges(held - moving)
                elif s["id"] == m["target_shard"]:
                    s["slots"] = ranges(held | moving)
        m["state"] = state
        t["version"] += 1
        if etcd.cas(prefix + "/topology", rev, json.dumps(t)):
            return m["id"]


class Node(threading.Thread):
    """node() in a loop: completes every migration that appears, after `delay` seconds."""

    def __init__(self, etcd, prefix, delay=0.3):
        super().__init__(daemon=True)
        self.etcd, self.prefix, self.delay = etcd, prefix, delay
        self.done = threading.Event()
        self.completed = []

    def run(self):
        while not self.done.is_set():
            t, _ = record(self.etcd, self.prefix)
            if any(m["state"] in ACTIVE for m in t["migrations"]):
                time.sleep(self.delay)
                mid = node(self.etcd, self.prefix)
                if mid:
                    self.completed.append(mid)
            time.sleep(0.05)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join(10)


def refused(out, needle):
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert needle in out.stderr, out.stderr


def test_move_slots_refuses_bad_input_and_writes_the_migration(etcd, prefix):
    write(etcd, prefix, cluster([([(0, 8191)], True), ([(8192, 16383)], True), ([], False)]))
    _, rev = record(etcd, prefix)
    a, b, c = hexid("1"), hexid("2"), hexid("3")
    refused(admin(etcd, prefix, "move-slots", a, "127.0.0.1:7000", "0-9"), "same shard")
    refused(admin(etcd, prefix, "move-slots", a, b, "8000-8200"),
            "slot 8192 is not served by shard 11111111 (127.0.0.1:7000): "
            "shard 22222222 (127.0.0.1:7001) does")
    refused(admin(etcd, prefix, "move-slots", a, c, "0-9"), "has no primary to take the slots")
    refused(admin(etcd, prefix, "move-slots", a, b, "0-99999"), "invalid slot range '0-99999'")
    refused(admin(etcd, prefix, "move-slots", a, "127.0.0.1:9", "0"), "no shard 127.0.0.1:9")
    refused(admin(etcd, prefix, "move-slots", a, b), "move-slots needs FROM TO RANGE")
    refused(admin(etcd, prefix, "cancel-migration"), "no migration is running")
    assert record(etcd, prefix)[1] == rev  # nothing written

    out = admin(etcd, prefix, "move-slots", "127.0.0.1:7000", b, "20-29", "0-9", "10-19", "100",
                "--wait", "0")
    assert out.returncode == 0, out.stderr
    assert "started: 31 slots (0-29,100) from shard 11111111 (127.0.0.1:7000) to shard " \
           "22222222 (127.0.0.1:7001)" in out.stdout
    t, _ = record(etcd, prefix)
    assert t["version"] == 2
    [m] = t["migrations"]
    assert len(m["id"]) == 40 and m["id"][:8] in out.stdout
    assert (m["slots"], m["source_shard"], m["target_shard"], m["state"]) == \
        ([[0, 29], [100, 100]], a, b, "streaming")
    assert t["shards"][0]["slots"] == [[0, 8191]]  # the source serves them until the node is done

    refused(admin(etcd, prefix, "move-slots", a, b, "5-6"),
            "slots 5-6 overlap migration %s (0-29,100, streaming)" % m["id"][:8])
    status = admin(etcd, prefix, "status")
    assert status.returncode == 0, status.stderr
    line = next(l for l in status.stdout.splitlines() if l.startswith(m["id"][:8]))
    assert line.split() == [m["id"][:8], "0-29,100", "11111111", "->", "22222222", "streaming"]

    # A second one; then cancel needs an id, and takes a prefix.
    assert admin(etcd, prefix, "move-slots", a, b, "200-299", "--wait", "0").returncode == 0
    refused(admin(etcd, prefix, "cancel-migration"), "2 migrations are running")
    out = admin(etcd, prefix, "cancel-migration", m["id"][:8])
    assert out.returncode == 0, out.stderr
    assert "migration %s cancelled: 31 slots (0-29,100) stay with shard 11111111" % m["id"][:8] \
        in out.stdout
    refused(admin(etcd, prefix, "cancel-migration", m["id"]), "is cancelled already")
    out = admin(etcd, prefix, "cancel-migration")  # the only running one
    assert out.returncode == 0 and "(200-299)" in out.stdout
    t, _ = record(etcd, prefix)
    assert [x["state"] for x in t["migrations"]] == ["cancelled", "cancelled"]
    assert t["version"] == 5
    assert t["shards"][0]["slots"] == [[0, 8191]]


def test_move_slots_waits_for_the_node_side(etcd, prefix):
    write(etcd, prefix, cluster([([(0, 8191)], True), ([(8192, 16383)], True)]))
    a, b = hexid("1"), hexid("2")

    # done: exit 0 with the time it took, and the slots are the target's.
    p = admin_bg(etcd, prefix, "move-slots", a, b, "0-999", "--wait", "30")
    wait_until("a migration", lambda: record(etcd, prefix)[0]["migrations"])
    time.sleep(0.5)
    assert p.poll() is None  # still waiting
    assert node(etcd, prefix, "done")
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    assert out.startswith("moved 1000 slots (0-999) from shard 11111111 (127.0.0.1:7000) to "
                          "shard 22222222 (127.0.0.1:7001) in "), out
    assert 0.4 < float(out.split(" in ")[1].split()[0]) < 10
    t, _ = record(etcd, prefix)
    assert t["shards"][0]["slots"] == [[1000, 8191]]
    assert t["shards"][1]["slots"] == [[0, 999], [8192, 16383]]

    # failed: exit 1, the slots stay.
    p = admin_bg(etcd, prefix, "move-slots", a, b, "1000-1999")
    wait_until("a migration", lambda: node(etcd, prefix, "failed"))
    out, err = p.communicate(timeout=10)
    assert p.returncode == 1 and "failed: the slots stay with shard 11111111" in err, err

    # cancelled by another admin while this one waits: exit 1.
    p = admin_bg(etcd, prefix, "move-slots", a, b, "1000-1999")
    wait_until("a migration", lambda: any(m["state"] == "streaming"
                                          for m in record(etcd, prefix)[0]["migrations"]))
    assert admin(etcd, prefix, "cancel-migration").returncode == 0
    out, err = p.communicate(timeout=10)
    assert p.returncode == 1 and "was cancelled: the slots stay with" in err, err

    # Not done in time: exit 1, the migration keeps running.
    start = time.monotonic()
    out = admin(etcd, prefix, "move-slots", a, b, "2000-2099", "--wait", "1")
    assert 0.9 < time.monotonic() - start < 5
    refused(out, "is still streaming after 1 s; it keeps running")
    t, _ = record(etcd, prefix)
    assert t["migrations"][-1]["state"] == "streaming"
    assert [m["state"] for m in t["migrations"]] == ["done", "failed", "cancelled", "streaming"]

    # Many finished migrations: the record keeps the 16 most recent.
    assert node(etcd, prefix, "failed")
    for i in range(17):
        assert admin(etcd, prefix, "move-slots", a, b, "3000", "--wait", "0").returncode == 0
        assert admin(etcd, prefix, "cancel-migration").returncode == 0
    t, _ = record(etcd, prefix)
    assert len(t["migrations"]) == 16
    assert all(m["state"] == "cancelled" for m in t["migrations"])


def test_rebalance_spreads_and_empties_shards(etcd, prefix):
    write(etcd, prefix, cluster([([(0, 5461)], True), ([(5462, 10922)], True),
                                 ([(10923, 16383)], True), ([], True)]))
    refused(admin(etcd, prefix, "rebalance", "--wait", "0"), "--wait must be at least 1")
    with Node(etcd, prefix) as n:
        out = admin(etcd, prefix, "rebalance", "--wait", "20")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and len(n.completed) == 3, out.stdout
    assert lines[0].startswith("moved 1366 slots (4096-5461) from shard 11111111 (127.0.0.1:7000) "
                               "to shard 44444444 (127.0.0.1:7003) in ")
    assert lines[1].startswith("moved 1365 slots (5462-6826) from shard 22222222")
    assert lines[2].startswith("moved 1365 slots (10923-12287) from shard 33333333")
    t, _ = record(etcd, prefix)
    assert [count(s["slots"]) for s in t["shards"]] == [4096] * 4
    assert t["shards"][3]["slots"] == [[4096, 6826], [10923, 12287]]
    out = admin(etcd, prefix, "rebalance")
    assert out.returncode == 0 and "balanced already" in out.stdout

    # Empty the second shard to remove its node; by node address.
    refused(admin(etcd, prefix, "remove-node", "127.0.0.1:7001"), "serves slots")
    with Node(etcd, prefix) as n:
        out = admin(etcd, prefix, "rebalance", "--exclude", "127.0.0.1:7001")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 3
    t, _ = record(etcd, prefix)
    assert [count(s["slots"]) for s in t["shards"]] == [5462, 0, 5461, 5461]
    out = admin(etcd, prefix, "remove-node", "127.0.0.1:7001")
    assert out.returncode == 0, out.stderr
    t, _ = record(etcd, prefix)
    assert len(t["shards"]) == 3
    assert all(hexid("2") not in (m["source_shard"], m["target_shard"]) for m in t["migrations"])

    # A failed move stops the rebalance at once.
    write(etcd, prefix, cluster([([(0, 16383)], True), ([], True), ([], True)]))
    stop = threading.Event()

    def fail_each():
        while not stop.is_set():
            node(etcd, prefix, "failed")
            time.sleep(0.05)

    th = threading.Thread(target=fail_each, daemon=True)
    th.start()
    out = admin(etcd, prefix, "rebalance", "--wait", "20")
    stop.set()
    th.join(5)
    refused(out, "failed: the slots stay with shard 11111111")
    assert out.stdout == ""
    t, _ = record(etcd, prefix)
    assert [m["state"] for m in t["migrations"]] == ["failed"]


def test_cluster_sh_add_node_rebalance_remove_node(tmp_path):
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    base = cluster_sh_base_port(6)
    env = dict(os.environ, STRATAKV_CLUSTER_DIR=str(tmp_path / "cluster"),
               BUILD_DIR=str(Path(server_binary()).parents[1]))
    script = str(REPO / "scripts" / "cluster.sh")

    def sh(*args, timeout=120):
        return subprocess.run([script] + list(args), env=env, capture_output=True, text=True,
                              timeout=timeout)

    # The gateway helpers on the etcd cluster.sh starts, to read the record.
    cetcd = Etcd.__new__(Etcd)
    cetcd.client_port = base + 1000
    prefix = "/stratakv/local"
    keys = {"k%d" % i: "v%d" % i for i in range(2000)}

    def all_keys_read_back():
        rc = RedisCluster(host="127.0.0.1", port=base, socket_timeout=20)
        try:
            return all(rc.get(k) == v.encode() for k, v in keys.items())
        finally:
            rc.close()

    try:
        up = sh("up", "2", "--base-port", str(base))
        assert up.returncode == 0, up.stdout + up.stderr
        rc = RedisCluster(host="127.0.0.1", port=base, socket_timeout=20)
        for k, v in keys.items():
            assert rc.set(k, v)
        rc.close()

        out = sh("add-node", "--replicas", "1")
        assert out.returncode == 0, out.stdout + out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].startswith("node 127.0.0.1:%d id " % (base + 2)), out.stdout
        assert "primary of shard" in lines[0] and "no slots yet" in lines[0]
        assert lines[1].startswith("node 127.0.0.1:%d id " % (base + 3))
        assert lines[1].endswith("replica of 127.0.0.1:%d" % (base + 2))
        t, _ = record(cetcd, prefix)
        assert len(t["shards"]) == 3 and t["shards"][2]["slots"] == []
        assert len(t["shards"][2]["replicas"]) == 1

        # The nodes move the keys; rebalance returns when both moves are done.
        out = sh("rebalance")
        assert out.returncode == 0, out.stdout + out.stderr
        assert len(out.stdout.splitlines()) == 2 and out.stdout.count("moved") == 2, out.stdout
        t, _ = record(cetcd, prefix)
        assert sorted(count(s["slots"]) for s in t["shards"]) == [5461, 5461, 5462]
        assert [m["state"] for m in t["migrations"]] == ["done", "done"]
        status = sh("status")
        assert status.returncode == 0 and status.stdout.count(" done") == 2, status.stdout
        assert all_keys_read_back()
        new_keys = int(subprocess.run(["redis-cli", "-p", str(base + 2), "DBSIZE"],
                                      capture_output=True, text=True).stdout)
        assert 500 < new_keys < 900  # about a third of 2000

        # The new primary leaves: its slots move away first, its replica leaves with it.
        out = sh("remove-node", "127.0.0.1:%d" % (base + 2))
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.startswith("moving the 54")  # 5461 or 5462 slots
        assert "removed from the cluster and stopped: 127.0.0.1:%d 127.0.0.1:%d" % (
            base + 3, base + 2) in out.stdout
        t, _ = record(cetcd, prefix)
        assert len(t["shards"]) == 2 and len(t["nodes"]) == 2
        assert sorted(count(s["slots"]) for s in t["shards"]) == [8192, 8192]
        for port in (base + 2, base + 3):
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0  # stopped
        assert not (tmp_path / "cluster" / ("node-%d" % (base + 2))).exists()
        assert all_keys_read_back()

        # A node without slots just leaves; the next one takes the next port after the highest.
        out = sh("add-node")
        assert out.returncode == 0 and "127.0.0.1:%d" % (base + 2) in out.stdout, out.stdout
        out = sh("remove-node", "127.0.0.1:%d" % (base + 2))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "moving" not in out.stdout
    finally:
        down = sh("down", timeout=60)
    assert down.returncode == 0 and "cluster down" in down.stdout
