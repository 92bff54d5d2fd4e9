"""Helpers of the slot migration tests and of bench/migration-bench.py: a cluster of real
nodes over a real etcd (stratakv-admin create and add-node), a migration written into the
topology record as `stratakv-admin move-slots` writes it, keys placed in chosen slots by hash
tags, and CLUSTER GETSLOTMIGRATIONS parsed.
"""

import json
import os
import random

from harness import Server, free_port, stop_servers, wait_until  # noqa: F401 (re-exported)
from test_cluster_etcd import admin

LEASE_TTL = 2



class Cluster:
    """`shards` primaries created by stratakv-admin, plus `empty` nodes added as new shards
    that serve no slot yet."""

    def __init__(self, etcd, shards, empty=1, replicas=0, ssd=False, empty_config=None,
                 node_config=None, **config):
        """`node_config`: a function called once per node, returning config of its own (a
        tls-port each, say)."""
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
                                   "memory.capacity": "64mb", "maxmemory": "16mb",
                                   # every value demoted, none dropped: what migrates is known
                                   "tiering.ssd.admission": "wait"})
            if node_config is not None:
                srv.config.update({k.replace("__", ".").replace("_", "-"): v
                                   for k, v in node_config().items()})
            self.nodes.append(srv)
        for srv in self.nodes[first:]:
            srv.config.update({k.replace("__", ".").replace("_", "-"): v
                               for k, v in (empty_config or {}).items()})
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
            wait_until("writes accepted", lambda: srv.client().info("cluster").get("cluster_fenced") == 0)
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
