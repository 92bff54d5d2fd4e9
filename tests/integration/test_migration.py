"""Online slot migration (docs/cluster.md, "Slot migration"): a real etcd, real nodes, a
migration written into the topology record as `stratakv-admin move-slots` writes it, and real
clients (redis-py RedisCluster) writing and reading throughout. Checked: no client error (a
-MOVED is followed by the client), every key byte-exact afterwards, the imported keys hidden
on the target until the handover, CLUSTER COUNTKEYSINSLOT agreeing everywhere, and the
rollbacks (cancel, target killed) losing nothing.
"""

import os
import threading
import time

from redis.cluster import RedisCluster

from migration_util import Cluster, count_everywhere, find_tag, migrations, slot_keys, wait_until
from resp_util import Err



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
            seen = (tc.dbsize(), tc.keys("*"), tc.execute_command("CLUSTER", "COUNTKEYSINSLOT", 120))
            if cl.state(mid) != "streaming":
                break  # handed over meanwhile: the target may have served the range already
            assert seen == (0, [], 0), seen[0]
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


def held_migration(cl):
    """256 MiB in slots 0-31 of the source (cl.nodes[0]), and their migration to cl.nodes[1]
    started with the source's handovers put off (DEBUG MIGRATION-HOLD): it keeps streaming
    until the test ends it. Returns (source, target, client, data, migration id)."""
    source, target = cl.nodes
    rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
    data = slot_keys(rc, range(0, 32), 8, [1 << 20])
    source.client().execute_command("DEBUG", "MIGRATION-HOLD", "1")
    mid = cl.start_migration(source, target, 0, 31)
    wait_until("the import under way", lambda: target.client().info("cluster")["migrations_importing"] == 1)
    return source, target, rc, data, mid


def test_cancel_rolls_back(etcd):
    cl = Cluster(etcd, shards=1, empty=1)
    try:
        source, target, rc, data, mid = held_migration(cl)
        # All of it reaches the target, hidden.
        tc = target.client()
        wait_until("the copy on the target", lambda: tc.info("memory")["used_memory"] > 256 << 20)
        assert tc.dbsize() == 0 and tc.keys("*") == [] and tc.randomkey() is None
        assert tc.scan(0, count=1000) == (0, [])
        assert tc.execute_command("CLUSTER", "COUNTKEYSINSLOT", 5) == 0
        assert tc.execute_command("CLUSTER", "GETKEYSINSLOT", 5, 10) == []
        assert cl.set_state(mid, "cancelled") == "cancelled"
        # The target drops its copy (hidden keys are not gone: its janitor counts them out);
        # the source serves everything.
        wait_until("import ended", lambda: tc.info("cluster")["migrations_importing"] == 0)
        wait_until("the target's copy dropped", lambda: tc.info("cluster")["migration_janitor_slots"] == 0
                   and tc.info("cluster")["migration_janitor_keys"] == len(data))
        assert tc.info("memory")["used_memory"] < 64 << 20
        for k, v in data.items():
            assert rc.get(k) == v, k
        assert source.client().info("cluster")["migrations_exporting"] == 0
        rc.close()
    finally:
        cl.stop()


def test_target_killed_rolls_back(etcd):
    cl = Cluster(etcd, shards=1, empty=1)
    try:
        source, target, rc, data, mid = held_migration(cl)
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


def test_target_out_of_memory_rolls_back(etcd):
    # The target's region holds 48 MiB; the range holds 96 MiB: the import cannot complete.
    cl = Cluster(etcd, shards=1, empty=1, empty_config={"memory__capacity": "48mb"})
    try:
        source, target = cl.nodes
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=20)
        data = slot_keys(rc, range(0, 32), 3, [1 << 20])
        mid = cl.start_migration(source, target, 0, 31)
        wait_until("failed", lambda: cl.state(mid) == "failed")
        wait_until("the import ended for want of room", lambda: any(
            r["state"] == "failed (out of memory)" for r in migrations(target)))
        # Nothing the target took was evicted to make room, and all of it is dropped now.
        wait_until("target empty", lambda: target.client().info("cluster")["migration_janitor_slots"] == 0
                   and target.client().info("memory")["used_memory"] < 40 << 20)
        for k, v in data.items():
            assert rc.get(k) == v, k
        assert target.client().info("stats")["evicted_keys"] == 0
        rc.close()
    finally:
        cl.stop()


def test_migration_stream_authenticates_as_replication(etcd):
    # Every node requires a password; the target authenticates to the source with masterauth.
    cl = Cluster(etcd, shards=1, empty=1, requirepass="s3cret", masterauth="s3cret")
    try:
        source, target = cl.nodes
        rc = RedisCluster(host="127.0.0.1", port=source.port, password="s3cret", socket_timeout=20)
        data = slot_keys(rc, range(0, 8), 5, [1000])
        mid = cl.start_migration(source, target, 0, 3)
        wait_until("done", lambda: cl.state(mid) == "done")
        # A target with the wrong masterauth is refused: the range stays with the source.
        target.client().config_set("masterauth", "wrong")
        mid = cl.start_migration(source, target, 4, 7)
        time.sleep(2)
        assert cl.state(mid) == "streaming"
        assert not [r for r in migrations(source) if r["id"] == mid]
        assert cl.set_state(mid, "cancelled") == "cancelled"
        rc2 = RedisCluster(host="127.0.0.1", port=target.port, password="s3cret", socket_timeout=20)
        for k, v in data.items():
            assert rc2.get(k) == v, k
        rc.close()
        rc2.close()
    finally:
        cl.stop()
