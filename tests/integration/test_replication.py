"""Replication (docs/replication.md): a replica's full copy and stream, resuming from the
backlog after a cut link, WAIT, ROLE, INFO replication, read-only replicas, REPLICAOF NO ONE.

Real processes: a stratakv primary and replica on loopback ports, checked key by key and byte
by byte; a redis-server primary and replica pair in the same run for the replies Redis has
(ROLE's shape, the READONLY error, WAIT's answers).
"""

import hashlib
import os
import time

import pytest

from harness import launch_redis, launch_server, stop_servers
from fastpath_util import FastConn, Segment
from resp_util import Simple


def info(client, section="replication"):
    return client.info(section)


def wait_until(pred, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for %s" % what)


def link_up(replica):
    c = replica.client()
    try:
        return wait_until(lambda: info(c).get("master_link_status") == "up", what="link up")
    finally:
        c.close()


def snapshot(client):
    """Every key -> (value, has_ttl), via SCAN and GET."""
    out = {}
    for k in client.scan_iter(count=1000):
        v = client.get(k)
        if v is None:
            continue
        out[k] = (hashlib.sha256(v).hexdigest(), len(v), client.pttl(k) > 0)
    return out


def converge(primary, replica, timeout=30.0):
    """Waits until the replica acknowledged the primary's offset, then compares every key."""
    p, r = primary.client(), replica.client()
    try:
        assert p.execute_command("WAIT", 1, int(timeout * 1000)) == 1
        # A WAIT covers the writes before it; the replica applied them before acknowledging.
        mine, theirs = snapshot(p), snapshot(r)
        assert len(mine) == len(theirs), (len(mine), len(theirs))
        diff = [k for k in mine if mine[k] != theirs.get(k)]
        assert not diff, diff[:10]
        assert p.dbsize() == r.dbsize()
        return len(mine)
    finally:
        p.close()
        r.close()


@pytest.fixture
def pair():
    started = []

    def make(primary_config=None, replica_config=None, attach=True):
        primary = launch_server(**(primary_config or {}))
        started.append(primary)
        cfg = dict(replica_config or {})
        if attach:
            cfg["replicaof"] = "127.0.0.1 %d" % primary.port
        replica = launch_server(**cfg)
        started.append(replica)
        if attach:
            link_up(replica)
        return primary, replica

    yield make
    stop_servers(*started)


def mixed_load(c, n=300):
    """Writes of every kind the write path has: sizes 1 B .. 4 MiB, TTLs, in-place changes,
    counters, deletes, renames, expiries."""
    sizes = [1, 100, 4096, 20000, 1 << 20, 4 << 20]
    for i in range(n):
        k = "k%d" % (i % 97)
        op = i % 11
        if op == 0:
            c.set(k, os.urandom(sizes[i % len(sizes)]))
        elif op == 1:
            c.set(k, os.urandom(50), px=60000)
        elif op == 2:
            c.append(k, b"tail%d" % i)
        elif op == 3:
            c.incr("counter%d" % (i % 5))
        elif op == 4:
            c.incrbyfloat("float%d" % (i % 3), 1.5)
        elif op == 5:
            c.setrange(k, 3, b"RANGE")
        elif op == 6:
            c.delete(k)
        elif op == 7:
            c.pexpire(k, 120000)
        elif op == 8:
            c.persist(k)
        elif op == 9:
            c.set("short%d" % i, b"x", px=50)  # expires on the primary during the load
        else:
            if c.exists(k):
                c.rename(k, "renamed%d" % (i % 13))
    c.set("big32", os.urandom(32 << 20))


def test_full_copy_then_stream(pair):
    primary, replica = pair(attach=False)
    p = primary.client()
    mixed_load(p, n=200)
    # The replica attaches to a primary with data: a full copy, then the stream.
    r = replica.client()
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    link_up(replica)
    mixed_load(p, n=300)
    keys = converge(primary, replica)
    assert keys > 50
    ri = info(r)
    assert ri["role"] == "slave" and ri["master_full_syncs"] == 1
    # Replica offset equals the primary's once acknowledged.
    pi = info(p)
    assert pi["connected_slaves"] == 1
    assert pi["slave0"]["state"] == "online"
    assert pi["slave0"]["offset"] == pi["master_repl_offset"]
    wait_until(lambda: info(r)["slave_repl_offset"] == info(p)["master_repl_offset"],
               what="offsets equal")
    assert info(r)["master_replid"] == pi["master_replid"]


def test_replica_is_read_only_and_expires_nothing_itself(pair):
    primary, replica = pair()
    p, r = primary.client(), replica.client()
    with pytest.raises(Exception) as e:
        r.set("x", "1")
    assert str(e.value) == "You can't write against a read only replica."
    # A key past its deadline reads as missing on the replica; the primary's DELETE removes it.
    p.set("t", "v", px=300)
    assert p.execute_command("WAIT", 1, 5000) == 1
    assert r.get("t") == b"v"
    time.sleep(0.4)
    assert r.get("t") is None
    wait_until(lambda: r.dbsize() == 0, what="the primary's expiry reaching the replica")
    # Reads are served.
    p.set("k", "v")
    assert p.execute_command("WAIT", 1, 5000) == 1
    assert r.get("k") == b"v"


def test_resume_from_backlog_after_a_cut(pair):
    primary, replica = pair()
    p, r = primary.client(), replica.client()
    for i in range(50):
        p.set("a%d" % i, os.urandom(1000))
    converge(primary, replica)
    before = info(r)
    assert before["master_full_syncs"] == 1
    # Cut the link (the replica process keeps its memory), write meanwhile, let it resume.
    assert r.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    for i in range(50):
        p.set("b%d" % i, os.urandom(2000))
        p.delete("a%d" % i) if i % 2 else None
    p.set("big", os.urandom(8 << 20))
    link_up(replica)
    converge(primary, replica)
    after = info(r)
    assert after["master_full_syncs"] == 1, "a short cut must not take a full copy"
    assert after["master_partial_syncs"] >= 1


def test_backlog_too_small_falls_back_to_full_copy(pair):
    primary, replica = pair(primary_config={"repl_backlog_size": "64kb"})
    p, r = primary.client(), replica.client()
    converge(primary, replica)
    assert r.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    for i in range(40):
        p.set("v%d" % i, os.urandom(64 << 10))  # 2.5 MB: far past the 64 KiB backlog
    link_up(replica)
    converge(primary, replica)
    assert info(r)["master_full_syncs"] == 2


def test_wait_and_role(pair):
    primary, replica = pair()
    p, r = primary.client(), replica.client()
    p.set("k", "v")
    assert p.execute_command("WAIT", 1, 5000) == 1
    assert p.execute_command("WAIT", 0, 0) == 1
    t0 = time.monotonic()
    assert p.execute_command("WAIT", 2, 300) == 1  # only one replica: waits out the timeout
    assert time.monotonic() - t0 >= 0.25
    role = p.execute_command("ROLE")
    assert role[0] == b"master" and len(role[2]) == 1
    assert role[2][0][1] == str(replica.port).encode()
    rrole = r.execute_command("ROLE")
    assert rrole[0] == b"slave" and rrole[1] == b"127.0.0.1" and rrole[2] == primary.port
    assert rrole[3] == b"connected"
    with pytest.raises(Exception) as e:
        r.execute_command("WAIT", 1, 10)
    assert "WAIT cannot be used with replica instances" in str(e.value)
    with pytest.raises(Exception) as e:
        p.execute_command("WAIT", 1, -1)
    assert str(e.value) == "timeout is negative"
    # A timeout of INT64_MAX ms waits (no overflow into an expired deadline), and other
    # clients are served meanwhile.
    from resp_util import RawConn
    w = RawConn(primary.host, primary.port, timeout=0.5)
    w.sock.sendall(b"*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$19\r\n9223372036854775807\r\n")
    with pytest.raises(OSError):
        w.read_reply()
    assert p.ping()
    w.close()


def test_same_replies_as_redis(pair):
    """ROLE's shape, READONLY and WAIT against a redis-server primary/replica pair."""
    from harness import redis_binary
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    primary, replica = pair()
    rp = launch_redis()
    rr = launch_redis(replicaof="127.0.0.1 %d" % rp.port)
    try:
        wait_until(lambda: info(rr.client()).get("master_link_status") == "up", what="redis link")
        ours_p, ours_r = primary.raw(), replica.raw()
        ref_p, ref_r = rp.raw(), rr.raw()
        for args in (("SET", "k", "v"), ("INCR", "n"), ("APPEND", "k", "x")):
            assert ours_r.call_raw(*args) == ref_r.call_raw(*args), args
        for c in (ours_p, ref_p):
            c.call("SET", "k", "v")
        assert ours_p.call_raw("WAIT", "1", "2000") == ref_p.call_raw("WAIT", "1", "2000")
        assert ours_p.call_raw("WAIT", "1", "-1") == ref_p.call_raw("WAIT", "1", "-1")
        assert ours_p.call_raw("WAIT", "x", "1") == ref_p.call_raw("WAIT", "x", "1")
        assert ours_r.call_raw("WAIT", "1", "1") == ref_r.call_raw("WAIT", "1", "1")
        # ROLE: the same shape (a replica's ip/port/offset triple; the offsets differ).
        mine, ref = ours_p.call("ROLE"), ref_p.call("ROLE")
        assert [type(x) for x in mine] == [type(x) for x in ref]
        assert [type(x) for x in mine[2][0]] == [type(x) for x in ref[2][0]]
        mine, ref = ours_r.call("ROLE"), ref_r.call("ROLE")
        assert [type(x) for x in mine] == [type(x) for x in ref]
        assert mine[3] == ref[3] == b"connected"
        assert ours_p.call_raw("REPLCONF", "bogus", "1") == ref_p.call_raw("REPLCONF", "bogus", "1")
    finally:
        stop_servers(rr, rp)


def test_promotion_keeps_data_and_history(pair):
    primary, replica = pair()
    p, r = primary.client(), replica.client()
    for i in range(20):
        p.set("k%d" % i, "v%d" % i)
    converge(primary, replica)
    old_id = info(p)["master_replid"]
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    ri = info(r)
    assert ri["role"] == "master"
    assert ri["master_replid2"] == old_id
    assert r.get("k3") == b"v3"
    r.set("new", "1")  # writable now
    # The old primary follows the promoted one: it resumes from the promoted node's backlog
    # (its history is the same up to the promotion), no full copy.
    assert p.execute_command("REPLICAOF", "127.0.0.1", replica.port) == b"OK"
    link_up(primary)
    assert r.execute_command("WAIT", 1, 5000) == 1
    assert p.get("new") == b"1"
    pi = info(p)
    assert pi["master_full_syncs"] == 0 and pi["master_partial_syncs"] == 1


def test_fast_path_puts_replicate(pair, tmp_path):
    sock = str(tmp_path / "p.sock")
    primary, replica = pair(primary_config={"unixsocket": sock})
    conn = FastConn(sock)
    seg = Segment(8 << 20)
    try:
        conn.register(seg)
        payload = os.urandom(6 << 20)
        seg.write(0, payload)
        assert conn.call("KV.PUT", "fast", len(payload), seg.id, 0, len(payload)) == Simple("OK")
        r = replica.client()
        assert primary.client().execute_command("WAIT", 1, 5000) == 1
        assert r.get("fast") == payload
    finally:
        conn.close()
        seg.close()


def test_ssd_tier_cold_keys_in_the_full_copy(pair, tmp_path):
    """Keys demoted to the primary's SSD tier are part of the full copy."""
    # admission wait: every victim is written (reuse may evict a never-read value instead of
    # demoting it, and this test needs cold keys).
    cfg = {"memory__capacity": "32mb", "tiering__ssd__enabled": "yes",
           "tiering__ssd__path": str(tmp_path / "ssd"), "tiering__ssd__admission": "wait"}
    primary, replica = pair(primary_config=cfg, attach=False)
    p = primary.client()
    values = {}
    for i in range(60):
        values["cold%d" % i] = os.urandom(1 << 20)  # 60 MiB into a 32 MiB region
        p.set("cold%d" % i, values["cold%d" % i])
    # Most of them live on the primary's SSD only now (60 MiB through a 32 MiB region).
    wait_until(lambda: p.info("tiering")["memory_keys"] < 40, what="demotions")
    r = replica.client()
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    link_up(replica)
    assert p.execute_command("WAIT", 1, 20000) == 1
    for k, v in values.items():
        assert r.get(k) == v, k


def test_cluster_replicas_follow_the_topology():
    """Cluster mode: the topology names the replicas; each follows its shard's primary, answers
    MOVED for reads unless READONLY, and is listed by CLUSTER SLOTS."""
    from cluster_util import StaticCluster
    from resp_util import RawConn

    cl = StaticCluster(2, replicas=1).start()
    try:
        p0, p1, r0, r1 = cl.nodes
        for replica in (r0, r1):
            link_up(replica)
        # A key of shard 0 (slot 0..8191): "a" is slot 15495, "b" 3300.
        c0 = p0.client()
        c0.set("b", "value-b")
        assert c0.execute_command("WAIT", 1, 5000) == 1
        rc = RawConn(r0.host, r0.port)
        moved = rc.call_raw("GET", "b")
        assert moved == ("-MOVED 3300 127.0.0.1:%d\r\n" % p0.port).encode(), moved
        # KV.PREFIX (a batch that routes each key itself) too: -MOVED entries, then served.
        assert rc.call_raw("KV.PREFIX", "b").startswith(
            b"*3\r\n:0\r\n:0\r\n-MOVED 3300 127.0.0.1:%d" % p0.port)
        assert rc.call("READONLY") == Simple("OK")
        assert rc.call("GET", "b") == b"value-b"
        assert rc.call("KV.PREFIX", "b") == 1
        assert rc.call_raw("KV.PREFIX", "b", "a").startswith(b"*3\r\n:1\r\n:1\r\n-MOVED 15495 ")
        # Writes still go to the primary; a key of the other shard still moves to its primary.
        assert rc.call_raw("SET", "b", "x").startswith(b"-MOVED 3300 ")
        assert rc.call_raw("GET", "a").startswith(b"-MOVED 15495 127.0.0.1:%d" % p1.port)
        assert rc.call("READWRITE") == Simple("OK")
        assert rc.call_raw("GET", "b").startswith(b"-MOVED 3300 ")
        slots = c0.execute_command("CLUSTER", "SLOTS")
        shard0 = [s for s in slots if s[0] == 0][0]
        assert [n[1] for n in shard0[2:]] == [p0.port, r0.port]
        assert info(r0.client())["role"] == "slave"
        rc.close()
    finally:
        cl.stop()


def test_full_copy_while_the_primary_keeps_writing(pair):
    """The copy runs while clients write: keys overwritten, deleted and added meanwhile all end
    equal on the replica (the stream from the copy's offset carries every change as a state)."""
    import threading
    primary, replica = pair(attach=False)
    p = primary.client()
    for i in range(400):
        p.set("w%d" % i, os.urandom(20000))
    stop = threading.Event()
    writes = [0]

    def writer():
        c = primary.client()
        i = 0
        while not stop.is_set():
            k = "w%d" % (i % 600)
            if i % 7 == 0:
                c.delete(k)
            elif i % 5 == 0:
                c.append(k, b"more")
            else:
                c.set(k, os.urandom(1000 + i % 30000), px=None if i % 3 else 100000)
            i += 1
        writes[0] = i
        c.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(0.2)
        assert replica.client().execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
        link_up(replica)
        time.sleep(0.5)
    finally:
        stop.set()
        t.join()
    assert writes[0] > 100
    converge(primary, replica)


def test_evictions_on_the_primary_reach_the_replica(pair):
    """A replica applies its primary's evictions: after a load past the primary's memory, both
    hold the same keys (the replica's larger region would have kept them all)."""
    primary, replica = pair(primary_config={"memory__capacity": "32mb"},
                            replica_config={"memory__capacity": "128mb"})
    p = primary.client()
    for i in range(80):
        p.set("e%d" % i, os.urandom(1 << 20))  # 80 MiB through a 32 MiB region
    assert p.info("stats")["evicted_keys"] > 0
    n = converge(primary, replica)
    assert n < 80


def test_masterauth(pair):
    """A primary with requirepass takes replicas that send masterauth, and only those."""
    primary = launch_server(requirepass="s3cret")
    try:
        bad = launch_server(replicaof="127.0.0.1 %d" % primary.port)
        good = launch_server(replicaof="127.0.0.1 %d" % primary.port, masterauth="s3cret")
        try:
            link_up(good)
            primary.client().set("k", "v")
            assert primary.client().execute_command("WAIT", 1, 5000) == 1
            assert good.client().get("k") == b"v"
            time.sleep(1.5)  # a few attempts of the replica without the password
            assert info(bad.client())["master_link_status"] == "down"
            assert bad.client().dbsize() == 0
            assert "refused AUTH" in bad.log_tail() or "NOAUTH" in bad.log_tail()
        finally:
            stop_servers(bad, good)
    finally:
        stop_servers(primary)
