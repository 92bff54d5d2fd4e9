"""A primary cut off by the network (docs/replication.md, "Fencing"): the primary runs in a
network namespace of its own, reached over a veth pair; etcd, the replica and the test's client
are in the root namespace. The link goes down past the lease TTL: the primary refuses writes
(fenced), the replica is promoted and accepts writes, and no moment has two nodes accepting a
write of the shard: the old primary's last acknowledged write precedes the new primary's first,
both stamped on one clock (CLOCK_MONOTONIC, which network namespaces share). The link comes back
up: the old primary rejoins as a replica and resyncs to the same keys and bytes.

Needs root (ip netns, veth); skipped where `ip netns add` is not permitted. Names are unique
per test process (skv<pid>...), and the namespace and the veth pair are removed even on failure.
"""

import hashlib
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import pytest

from etcd_util import Etcd, etcd_binary
from harness import Server, free_port, stop_servers, wait_until
from test_cluster_etcd import admin

LEASE_TTL = 2  # seconds (as test_failover.py; etcd's short-timing instance grants it)

# Writes continuously to host:port from inside the namespace, one line per reply on stdout:
# "<CLOCK_MONOTONIC> <key> OK" or "<CLOCK_MONOTONIC> <key> ERR <text>". Ends at EOF of stdin.
NS_WRITER = r"""
import os, select, socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
def connect():
    s = socket.create_connection((host, port), timeout=2)
    s.settimeout(2)
    return s, s.makefile("rb")
s, f = connect()
i = 0
while True:
    if select.select([sys.stdin], [], [], 0)[0] and not sys.stdin.readline():
        break
    k = b"ns%d" % i
    v = b"%d" % i
    try:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
        line = f.readline()
        now = time.monotonic()
        if not line:
            raise OSError("closed")
        text = line.decode(errors="replace").strip()
        print("%.6f %s %s" % (now, k.decode(), "OK" if text == "+OK" else "ERR " + text[1:]),
              flush=True)
        i += 1
        time.sleep(0.005)
    except OSError:
        try:
            s.close()
        except OSError:
            pass
        time.sleep(0.05)
        try:
            s, f = connect()
        except OSError:
            pass
"""


def ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=check)


class Net:
    """A namespace and a veth pair: `outer` (root namespace, .1) and the namespace's (.2)."""

    def __init__(self):
        tag = "skv%d" % os.getpid()
        self.ns = tag
        self.outer, self.inner = tag + "a", tag + "b"
        subnet = 10 + os.getpid() % 200
        self.outer_ip, self.inner_ip = "10.213.%d.1" % subnet, "10.213.%d.2" % subnet

    def up(self):
        r = ip("netns", "add", self.ns, check=False)
        if r.returncode != 0:
            pytest.skip("ip netns add is not permitted here: " + r.stderr.strip())
        ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        ip("link", "set", self.inner, "netns", self.ns)
        ip("addr", "add", self.outer_ip + "/24", "dev", self.outer)
        ip("link", "set", self.outer, "up")
        ip("addr", "add", self.inner_ip + "/24", "dev", self.inner, ns=self.ns)
        ip("link", "set", self.inner, "up", ns=self.ns)
        ip("link", "set", "lo", "up", ns=self.ns)

    def link(self, state):
        ip("link", "set", self.outer, state)

    def down(self):
        ip("link", "del", self.outer, check=False)  # removes both ends
        ip("netns", "del", self.ns, check=False)


class NsServer(Server):
    """A stratakv server run inside the namespace `ns` (ip netns exec), reached at `host`."""

    def __init__(self, ns, host, **config):
        super().__init__(**config)
        self.ns = ns
        self.host = host

    def command_line(self, port):
        return ["ip", "netns", "exec", self.ns] + super().command_line(port)


def role(srv):
    try:
        return srv.client(socket_timeout=2, socket_connect_timeout=2).info("cluster").get(
            "cluster_my_role")
    except Exception:
        return None


def digest(v):
    return None if v is None else (len(v), hashlib.sha256(v).hexdigest())


@pytest.fixture
def net():
    if shutil.which("ip") is None:
        pytest.skip("no ip command")
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    n = Net()
    try:
        n.up()
        yield n
    finally:
        n.down()


def test_cut_off_primary_is_fenced_then_rejoins_as_replica(net):
    port = free_port()
    etcd = Etcd()
    # etcd on loopback and on the veth's outer address (the namespace's only way to it).
    etcd.extra_args = ["--listen-client-urls=http://127.0.0.1:%d,http://%s:%d"
                       % (etcd.client_port, net.outer_ip, etcd.client_port)]
    etcd.start()
    prefix = "/stratakv/p%d" % random.randrange(1 << 30)
    # Clients come over the veth, not loopback: no protected mode.
    common = dict(cluster_enabled="yes", cluster__etcd__prefix=prefix,
                  cluster__etcd__lease_ttl=LEASE_TTL, protected_mode="no")
    old = NsServer(net.ns, net.inner_ip, bind=net.inner_ip, port=port,
                   cluster__etcd__endpoints="http://%s:%d" % (net.outer_ip, etcd.client_port),
                   **common)
    new = Server(bind=net.outer_ip, port=free_port(), cluster__etcd__endpoints=etcd.endpoint,
                 **common)
    new.host = net.outer_ip
    writer = None
    try:
        old.start()
        new.start()
        admin(etcd, prefix, "create", "--shards", "1", "--replicas", "1", "--wait", "20")
        wait_until("a primary", lambda: "primary" in (role(old), role(new)))
        if role(old) != "primary":  # the namespace's node must be the primary: hand it over
            wait_until("link up", lambda: old.client().info("replication").get(
                "master_link_status") == "up")
            old.client().execute_command("CLUSTER", "FAILOVER")
            wait_until("the namespace's node is primary", lambda: role(old) == "primary")
        wait_until("replica link", lambda: new.client().info("replication").get(
            "master_link_status") == "up")
        wait_until("writes accepted", lambda: old.client().info("cluster")["cluster_fenced"] == 0)

        # 1. Writes from the root namespace over the veth, WAIT 1 acknowledged.
        c = old.client()
        acked = {}
        for i in range(200):
            k, v = "k%d" % i, os.urandom(100 + (i % 20) * 5000)
            assert c.set(k, v)
            acked[k] = v
        big = os.urandom(8 << 20)
        assert c.set("big", big)
        acked["big"] = big
        assert c.execute_command("WAIT", 1, 10000) == 1
        c.close()

        # 2. A writer inside the namespace (it keeps reaching the primary through the cut),
        # then the link goes down.
        writer = subprocess.Popen(["ip", "netns", "exec", net.ns, sys.executable, "-c", NS_WRITER,
                                   net.inner_ip, str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(writer.stdout), daemon=True)
        reader.start()
        wait_until("the namespace's writer writes", lambda: any(l.endswith(" OK\n") for l in lines),
                   timeout=20)
        t_cut = time.monotonic()
        net.link("down")

        # 3. The replica is promoted and accepts writes; its first accepted write's time.
        wait_until("the replica promoted", lambda: role(new) == "primary", timeout=30)
        n = new.client(socket_timeout=5)
        first_new_ok = None
        deadline = time.monotonic() + 30
        while first_new_ok is None:
            try:
                if n.set("new", "y"):
                    first_new_ok = time.monotonic()
            except Exception:
                assert time.monotonic() < deadline, "the new primary never accepted a write"
                time.sleep(0.02)
        print("partition: promoted %.2f s after the cut" % (first_new_ok - t_cut))

        # 4. The old primary refuses writes: fenced (CLUSTERDOWN) once its lease may have lapsed.
        wait_until("the old primary refuses writes", lambda: any(
            " ERR CLUSTERDOWN" in l for l in lines), timeout=20)
        time.sleep(0.5)
        writer.stdin.close()
        writer.wait(20)
        reader.join(10)
        oks = [float(l.split()[0]) for l in lines if l.endswith(" OK\n")]
        refused = [l for l in lines if " ERR " in l]
        assert oks and refused
        last_old_ok = max(oks)
        assert last_old_ok < first_new_ok, (last_old_ok, first_new_ok)
        # Fenced within the TTL of the cut (its last renewal came before the cut).
        assert last_old_ok < t_cut + LEASE_TTL + 1.0, (last_old_ok - t_cut)
        first_refusal = min(float(l.split()[0]) for l in refused)
        assert first_refusal > last_old_ok
        text = refused[0].split(" ERR ", 1)[1]
        assert text.startswith("CLUSTERDOWN") and "fenced" in text, text

        # 5. The link comes back: the old primary rejoins as a replica of the new one and
        # resyncs (the same keys and bytes).
        n.set("after", os.urandom(1 << 20))
        net.link("up")
        wait_until("the old primary is a replica", lambda: role(old) == "replica", timeout=60)
        wait_until("the old primary follows", lambda: old.client().info("replication").get(
            "master_link_status") == "up", timeout=60)
        assert n.execute_command("WAIT", 1, 20000) == 1
        o = old.client()
        o.execute_command("READONLY")
        keys = sorted(k.decode() for k in n.scan_iter(count=1000))
        assert "new" in keys and "after" in keys
        for k in keys:
            assert digest(o.get(k)) == digest(n.get(k)), k
        assert o.dbsize() == n.dbsize()
        for k, v in acked.items():
            assert n.get(k) == v, k
        o.close()
        n.close()
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
            writer.wait(10)
        try:
            net.link("up")
        except Exception:
            pass
        stop_servers(old, new)
        etcd.close()
