"""Online slot migration (docs/cluster.md, "Slot migration"): a real etcd, real nodes, a
migration written into the topology record as `stratakv-admin move-slots` writes it, and real
clients (redis-py RedisCluster) writing and reading throughout. Checked: no client error (a
-MOVED is followed by the client), every key byte-exact afterwards, the imported keys hidden
on the target until the handover, CLUSTER COUNTKEYSINSLOT agreeing everywhere, and the
rollbacks (cancel, target killed) losing nothing.
"""

import json
import os
import random
import threading
import time

import pytest
from redis.cluster import RedisCluster

from etcd_util import Etcd, etcd_binary
from harness import Server, free_port, stop_servers
from resp_util import Err
from test_cluster_etcd import admin

LEASE_TTL = 2


@pytest.fixture
def etcd():
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    with Etcd() as e:
        yield e


def wait_until(what, fn, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


class Cluster:
    """`shards` primaries created by stratakv-admin, plus `empty` nodes added as new shards
    that serve no slot yet."""

    def __init__(self, etcd, shards, empty=1, replicas=0, ssd=False, **config):
        self.etcd = etcd
        self.prefix = "/stratakv/m%d" % random.randrange(1 << 30)
        self.nodes = []
        first = shards * (1 + replicas)
        for _ in range(first + empty):
            srv = Server(cluster_enabled="yes", cluster__etcd__endpoints=etcd.endpoint,
                         cluster__etcd__prefix=self.prefix, cluster__etcd__lease_ttl=LEASE_TTL,
                         port=free_port(), **config)
            if ssd:  # a small memory over an SSD tier of its own: most values live on SSD
                srv.config.update({"tiering.ssd.enabled": "yes",
                                   "tiering.ssd.path": str(srv.workdir / "ssd"),
                                   "memory.capacity": "64mb", "maxmemory": "16mb"})
            self.nodes.append(srv)
        for srv in self.nodes[:first]:
            srv.start()
        admin(etcd, self.prefix, "create", "--shards", str(shards), "--replicas", str(replicas),
              "--wait", "20")
        for srv in self.nodes[first:]:
            srv.start()
            wait_until("registration", lambda: any(
                b'"port":%d' % srv.port in v for v in etcd.get_prefix(self.prefix + "/nodes/").values()))
            admin(etcd, self.prefix, "add-node", "127.0.0.1:%d" % srv.port)
        for srv in self.nodes:
            wait_until("cluster_state ok", lambda: srv.client().info("cluster")["cluster_state"] == "ok")
            wait_until("writes accepted", lambda: srv.client().info("cluster")["cluster_fenced"] == 0)
            if srv.client().info("cluster")["cluster_my_role"] == "replica":
                wait_until("replica link", lambda: srv.client().info("replication").get(
                    "master_link_status") == "up")

    def primaries(self):
        return [srv for srv in self.nodes if srv.proc is not None and srv.proc.poll() is None and
                srv.client().info("cluster")["cluster_my_role"] == "primary"]

    def topology(self):
        value, _ = self.etcd.get(self.prefix + "/topology")
        return json.loads(value)

    def shard_of(self, srv):
        my_id = srv.client().execute_command("CLUSTER", "MYID")
        my_id = my_id.decode() if isinstance(my_id, bytes) else my_id
        return next(s["id"] for s in self.topology()["shards"] if s["primary"] == my_id)

    def start_migration(self, source, target, first, last):
        """Writes a migration of slots first..last from `source`'s shard to `target`'s (the
        record stratakv-admin move-slots writes). Returns its id."""
        mid = "%040x" % random.randrange(1 << 160)
        while True:
            value, rev = self.etcd.get(self.prefix + "/topology")
            t = json.loads(value)
            t["migrations"].append({"id": mid, "slots": [[first, last]],
                                    "source_shard": self.shard_of(source),
                                    "target_shard": self.shard_of(target), "state": "streaming"})
            t["version"] += 1
            if self.etcd.cas(self.prefix + "/topology", rev, json.dumps(t)):
                return mid

    def set_state(self, mid, state):
        while True:
            value, rev = self.etcd.get(self.prefix + "/topology")
            t = json.loads(value)
            m = next(m for m in t["migrations"] if m["id"] == mid)
            if m["state"] != "streaming":
                return m["state"]
            m["state"] = state
            t["version"] += 1
            if self.etcd.cas(self.prefix + "/topology", rev, json.dumps(t)):
                return state

    def serving(self, slot):
        """The primary whose shard serves `slot`."""
        t = self.topology()
        shard = next(s for s in t["shards"] if any(a <= slot <= b for a, b in s["slots"]))
        port = next(n["port"] for n in t["nodes"] if n["id"] == shard["primary"])
        return next(srv for srv in self.nodes if srv.port == port)

    def state(self, mid):
        return next(m["state"] for m in self.topology()["migrations"] if m["id"] == mid)

    def stop(self):
        stop_servers(*self.nodes)


def slot_keys(rc, slots, per_slot, sizes):
    """Writes `per_slot` keys into each slot of `slots` (hash tags), values of the sizes
    cycled; returns {key: value}."""
    data = {}
    i = 0
    for slot in slots:
        tag = find_tag(slot)
        for j in range(per_slot):
            k = "{%s}:%d" % (tag, j)
            v = os.urandom(sizes[i % len(sizes)])
            rc.set(k, v)
            data[k] = v
            i += 1
    return data


_tags = {}


def find_tag(slot):
    """A hash tag whose slot is `slot`."""
    if not _tags:
        from redis.crc import key_slot
        n = 0
        while len(_tags) < 16384:
            t = "t%d" % n
            _tags.setdefault(key_slot(t.encode()), t)
            n += 1
    return _tags[slot]


def migrations(srv):
    """CLUSTER GETSLOTMIGRATIONS as a list of dicts of str."""
    rows = srv.client().execute_command("CLUSTER", "GETSLOTMIGRATIONS")
    out = []
    for row in rows:
        d = {}
        for k, v in zip(row[0::2], row[1::2]):
            d[k.decode() if isinstance(k, bytes) else k] = v.decode() if isinstance(v, bytes) else v
        out.append(d)
    return out


def count_everywhere(cl, slot):
    return [srv.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) for srv in cl.nodes]


def test_move_slots_under_load_nothing_lost(etcd):
    cl = Cluster(etcd, shards=2, empty=1)
    try:
        source = cl.serving(100)
        target = cl.nodes[2]
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
        moved = list(range(100, 164))
        data = slot_keys(rc, moved, 20, [100, 1024, 64 * 1024, 1 << 20])
        data.update(slot_keys(rc, [7000, 7001], 10, [5000]))          # stays on the source
        big = "{%s}:big" % find_tag(120)
        data[big] = os.urandom(32 << 20)
        rc.set(big, data[big])
        total = len(data)

        # Writers and readers throughout, on the moving slots and elsewhere.
        errors, stop, written = [], threading.Event(), {}

        def load(n):
            c = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
            i = 0
            while not stop.is_set():
                slot = moved[(i * 7 + n) % len(moved)] if i % 2 == 0 else 7000
                k = "{%s}:live-%d-%d" % (find_tag(slot), n, i % 300)
                v = os.urandom(200 + i % 5000)
                try:
                    c.set(k, v)
                    written[k] = v
                    got = c.get(k)
                    if got != v:
                        errors.append("%s read back %r bytes" % (k, None if got is None else len(got)))
                except Exception as e:
                    errors.append(repr(e))
                i += 1
            c.close()

        threads = [threading.Thread(target=load, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        mid = cl.start_migration(source, target, 100, 163)
        # Until the handover the target hides what it imports.
        hidden_checks = 0
        deadline = time.monotonic() + 120
        while cl.state(mid) == "streaming":
            assert time.monotonic() < deadline, "the migration did not complete"
            tc = target.client()
            assert tc.dbsize() == 0
            assert tc.keys("*") == []
            assert tc.execute_command("CLUSTER", "COUNTKEYSINSLOT", 120) == 0
            hidden_checks += 1
            time.sleep(0.05)
        assert cl.state(mid) == "done"
        time.sleep(1.0)  # load goes on after the handover
        stop.set()
        for t in threads:
            t.join()
        assert errors == [], errors[:5]
        print("hidden checks while streaming:", hidden_checks)

        # The slots are the target's in the record and on every node.
        t = cl.topology()
        tshard = next(s for s in t["shards"] if s["id"] == cl.shard_of(target))
        assert [100, 163] in tshard["slots"]
        for srv in cl.nodes:
            wait_until("version", lambda: srv.client().info("cluster")["cluster_topology_version"] == t["version"])
        # Every key byte-exact, from a fresh client.
        data.update(written)
        rc2 = RedisCluster(host="127.0.0.1", port=target.port, socket_timeout=20)
        for k, v in data.items():
            assert rc2.get(k) == v, k
        # The source dropped its copy (its janitor removed every moved key); counts agree.
        moved_keys = sum(1 for k in data if 100 <= rc2.keyslot(k) <= 163)
        wait_until("source copy dropped", lambda: source.client().info("cluster")[
            "migration_janitor_slots"] == 0)
        assert 0 < source.client().info("cluster")["migration_janitor_keys"] <= moved_keys
        for slot in (100, 120, 163):
            counts = count_everywhere(cl, slot)
            assert counts[2] == len([k for k in data if rc2.keyslot(k) == slot]), (slot, counts)
            assert counts[0] == counts[1] == 0
        assert sum(srv.client().dbsize() for srv in cl.nodes) == len(data)
        # The source redirects, the target serves.
        k = "{%s}:0" % find_tag(100)
        assert source.raw().call("GET", k) == Err("MOVED 100 127.0.0.1:%d" % target.port)
        info = source.client().info("cluster")
        assert info["migration_handovers"] == 1
        print("write pause: %d us" % info["migration_last_pause_us"])
        rows = source.client().execute_command("CLUSTER", "GETSLOTMIGRATIONS")
        assert rows, rows
        rc.close()
        rc2.close()
    finally:
        cl.stop()


def test_cancel_rolls_back(etcd):
    cl = Cluster(etcd, shards=1, empty=1)
    try:
        source, target = cl.nodes
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
        data = slot_keys(rc, range(0, 32), 8, [1 << 20])
        source.client().execute_command("DEBUG", "MIGRATION-HOLD", "1")  # no handover yet
        mid = cl.start_migration(source, target, 0, 31)
        wait_until("the copy complete", lambda: any(
            r.get("role") == "export" and r.get("state") == "streaming" for r in migrations(source)))
        # All of it is on the target by now, hidden.
        tc = target.client()
        assert tc.dbsize() == 0 and tc.keys("*") == [] and tc.randomkey() is None
        assert tc.scan(0, count=1000) == (0, [])
        assert tc.execute_command("CLUSTER", "COUNTKEYSINSLOT", 5) == 0
        assert tc.execute_command("CLUSTER", "GETKEYSINSLOT", 5, 10) == []
        assert tc.info("memory")["used_memory"] > 200 << 20
        assert cl.set_state(mid, "cancelled") == "cancelled"
        # The target drops its partial copy; the source serves everything.
        wait_until("import ended", lambda: target.client().info("cluster")["migrations_importing"] == 0)
        wait_until("no key left on the target", lambda: target.client().info("keyspace") == {})
        for k, v in data.items():
            assert rc.get(k) == v, k
        assert source.client().info("cluster")["migrations_exporting"] == 0
        rc.close()
    finally:
        cl.stop()


def test_target_killed_rolls_back(etcd):
    cl = Cluster(etcd, shards=1, empty=1)
    try:
        source, target = cl.nodes
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
        data = slot_keys(rc, range(0, 32), 8, [1 << 20])
        source.client().execute_command("DEBUG", "MIGRATION-HOLD", "1")  # no handover yet
        mid = cl.start_migration(source, target, 0, 31)
        wait_until("the copy under way", lambda: target.client().info("cluster")["migrations_importing"] == 1)
        target.proc.kill()
        target.proc.wait()
        target.stop()
        wait_until("failed", lambda: cl.state(mid) == "failed", timeout=90)
        for k, v in data.items():
            assert rc.get(k) == v, k
        rc.set("after", "x")
        assert rc.get("after") == b"x"
        rc.close()
    finally:
        cl.stop()


def test_ssd_resident_keys_move_byte_exact(etcd):
    cl = Cluster(etcd, shards=1, empty=1, ssd=True)
    try:
        source, target = cl.nodes
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
        data = slot_keys(rc, range(0, 16), 48, [64 * 1024])  # 48 MiB over 16 MiB of memory
        on_ssd = sum(1 for k in data if source.client().execute_command("TIER", k) == b"ssd")
        assert on_ssd > len(data) // 2, on_ssd
        mid = cl.start_migration(source, target, 0, 15)
        wait_until("done", lambda: cl.state(mid) == "done")
        rc2 = RedisCluster(host="127.0.0.1", port=target.port, socket_timeout=20)
        for k, v in data.items():
            assert rc2.get(k) == v, k
        row = next(r for r in migrations(source) if r["id"] == mid)
        assert row["keys"] == len(data) and row["bytes"] == sum(len(v) for v in data.values())
        print("moved %d keys, %d of them from SSD" % (len(data), on_ssd))
        rc.close()
        rc2.close()
    finally:
        cl.stop()


def test_source_failover_mid_migration_resumes(etcd):
    cl = Cluster(etcd, shards=1, replicas=1, empty=1)
    try:
        source = cl.serving(0)
        replica = next(s for s in cl.nodes[:2] if s is not source)
        target = cl.nodes[2]
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
        data = slot_keys(rc, range(0, 32), 8, [256 * 1024])
        assert source.client().execute_command("WAIT", 1, 5000) == 1
        source.client().execute_command("DEBUG", "MIGRATION-HOLD", "1")  # no handover on it
        mid = cl.start_migration(source, target, 0, 31)
        wait_until("the copy complete", lambda: any(
            r.get("role") == "export" and r.get("state") == "streaming" for r in migrations(source)))
        source.proc.kill()
        source.proc.wait()
        source.stop()
        # The replica takes over; the target links to it and the copy starts again there.
        wait_until("promoted", lambda: replica.client().info("cluster")["cluster_my_role"] == "primary")
        wait_until("done", lambda: cl.state(mid) == "done", timeout=90)
        rc2 = RedisCluster(host="127.0.0.1", port=target.port, socket_timeout=20)
        for k, v in data.items():
            assert rc2.get(k) == v, k
        wait_until("old copy dropped", lambda: replica.client().info("cluster")[
            "migration_janitor_slots"] == 0 and replica.client().info("cluster")["migration_janitor_keys"] > 0)
        rc2.close()
    finally:
        cl.stop()
