"""Replication over TLS (docs/tls.md, "Replication over TLS"): `tls-replication yes` makes a
replica link to its primary's tls-port, verify the primary's certificate against its CA and show
its own client certificate; the primary takes PSYNC on tls-port. `tls-cluster yes` does the same
for a slot migration's stream (with a real etcd). Real processes and real certificates
(tls_util.py).

The primary of the first test listens on tls-port only (`port 0`), so the replica has no plain
path to it: a link that comes up is a TLS link.
"""

import hashlib
import os
import random
import shutil
import signal
import subprocess
import time

import pytest
import redis

from harness import free_port, launch_server, server_binary, stop_servers, tmp_root, TARGET
from tls_util import make_tls_files

pytestmark = [
    pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command"),
    pytest.mark.skipif(TARGET != "stratakv", reason="stratakv's frames (PSYNC capa stratakv)"),
]

MiB = 1 << 20
SIZES = [1, 100, 16383, 16384, 16385, 65537, MiB, 4 * MiB + 3, 32 * MiB]


@pytest.fixture(scope="module")
def certs():
    return make_tls_files(tmp_root() / "tls-repl-files")


class TlsOnly:
    """A stratakv server on tls-port only (port 0): no plain TCP at all."""

    def __init__(self, certs, name, **extra):
        self.certs = certs
        self.tls_port = free_port()
        self.password = extra.get("requirepass")
        args = [server_binary(), "--bind", "127.0.0.1", "--port", "0", "--memory.capacity", "1gb",
                "--tls-port", str(self.tls_port), "--tls-cert-file", certs.server_crt,
                "--tls-key-file", certs.server_key, "--tls-ca-cert-file", certs.ca]
        for k, v in extra.items():
            args += ["--" + k.replace("__", ".").replace("_", "-"), str(v)]
        self.log_path = tmp_root() / (name + ".log")
        workdir = tmp_root() / name  # its own dir: a cluster node keeps its id there
        workdir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=str(workdir))
        deadline = time.monotonic() + 20
        while True:
            try:
                c = self.client()
                c.ping()
                c.close()
                break
            except (redis.exceptions.ConnectionError, OSError):
                assert self.proc.poll() is None, self.log()
                assert time.monotonic() < deadline, self.log()
                time.sleep(0.05)

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.tls_port, ssl=True,
                           ssl_ca_certs=self.certs.ca, ssl_certfile=self.certs.client_crt,
                           ssl_keyfile=self.certs.client_key, password=self.password,
                           socket_timeout=30, socket_connect_timeout=5)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                rc = "killed"
            assert rc == 0, "exit %s\n%s" % (rc, self.log()[-3000:])
        self._log.close()


def wait_for(pred, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def digests(client, keys):
    out = {}
    for k in keys:
        v = client.get(k)
        out[k] = None if v is None else (len(v), hashlib.sha256(v).hexdigest())
    return out


def replica_config(certs, primary_port, **extra):
    """A replica over TLS: its own tls-port (the port it announces), the client certificate
    the primary accepts (the server certificate is for serverAuth only)."""
    cfg = dict(replicaof="127.0.0.1 %d" % primary_port, tls_replication="yes",
               tls_port=free_port(), tls_cert_file=certs.server_crt,
               tls_key_file=certs.server_key, tls_ca_cert_file=certs.ca,
               tls_client_cert_file=certs.client_crt, tls_client_key_file=certs.client_key)
    cfg.update(extra)
    return cfg


def test_full_copy_and_stream_over_tls_byte_exact(certs):
    """A TLS-only primary with requirepass; a replica with tls-replication yes and masterauth:
    the full copy and then the stream (1 B .. 32 MiB values) arrive byte for byte."""
    primary = TlsOnly(certs, "tls-repl-primary", requirepass="s3cret")
    replica = None
    try:
        p = primary.client()
        before = {}
        for i, n in enumerate(SIZES):
            before["copy%d" % i] = os.urandom(n)
        for k, v in before.items():
            p.set(k, v)
        p.set("ttl", b"x", px=600000)
        replica = launch_server(**replica_config(certs, primary.tls_port, masterauth="s3cret"))
        r = replica.client()
        wait_for(lambda: r.info("replication").get("master_link_status") == "up", "link up")
        info = r.info("replication")
        assert info["master_port"] == primary.tls_port
        after = {}
        for i, n in enumerate(SIZES):
            after["stream%d" % i] = os.urandom(n)
        for k, v in after.items():
            p.set(k, v)
        p.delete("copy1")
        p.append("copy0", b"+tail")
        assert p.execute_command("WAIT", 1, 60000) == 1
        keys = sorted(set(before) | set(after))
        assert digests(r, keys) == digests(p, keys)
        assert r.get("copy1") is None
        assert r.get("copy0") == before["copy0"] + b"+tail"
        assert r.pttl("ttl") > 0
        assert r.dbsize() == p.dbsize()
        # The primary sees one online replica, announced by its tls-port.
        pinfo = p.info("replication")
        assert pinfo["connected_slaves"] == 1
        assert pinfo["slave0"]["state"] == "online"
        assert pinfo["slave0"]["port"] == int(replica.config["tls-port"])
        assert "(TLS)" in primary.log()
        assert "over TLS" in replica.log_path.read_text(errors="replace")
        # A cut link resumes over TLS from the backlog, without a full copy.
        rlog = lambda: replica.log_path.read_text(errors="replace")
        assert rlog().count("full copy from offset") == 1
        r.execute_command("CLIENT", "KILL", "TYPE", "master")
        p.set("after-cut", os.urandom(3 * MiB))
        wait_for(lambda: r.info("replication").get("master_link_status") == "up", "link up again")
        assert p.execute_command("WAIT", 1, 60000) == 1
        assert digests(r, ["after-cut"]) == digests(p, ["after-cut"])
        assert "resumed at offset" in rlog()
        assert rlog().count("full copy from offset") == 1
        p.close()
        r.close()
    finally:
        if replica is not None:
            stop_servers(replica)
        primary.stop()


def test_replica_with_a_wrong_ca_does_not_link_and_retries(certs):
    """The replica verifies the primary's certificate: against another CA it refuses the link
    with a clear log line, keeps trying, and links once its CA is right (CONFIG SET)."""
    primary = TlsOnly(certs, "tls-repl-primary-ca")
    replica = None
    try:
        p = primary.client()
        p.set("k", b"v" * 1000)
        rogue_ca = str(certs.dir / "rogue-ca.crt")
        replica = launch_server(**replica_config(certs, primary.tls_port, tls_ca_cert_file=rogue_ca))
        r = replica.client()
        log = lambda: replica.log_path.read_text(errors="replace")
        wait_for(lambda: "certificate verify failed" in log(), "the handshake's failure in the log",
                 timeout=30)
        line = [l for l in log().splitlines() if "certificate verify failed" in l][0]
        assert "primary 127.0.0.1:%d" % primary.tls_port in line, line
        assert "TLS handshake failed" in line, line
        time.sleep(2.5)  # a few more attempts (one a second)
        assert r.info("replication")["master_link_status"] == "down"
        assert r.dbsize() == 0
        assert p.info("replication")["connected_slaves"] == 0
        # Its CA fixed at run time: the next attempt links.
        assert r.config_set("tls-ca-cert-file", certs.ca)
        wait_for(lambda: r.info("replication").get("master_link_status") == "up", "link up")
        assert p.execute_command("WAIT", 1, 30000) == 1
        assert r.get("k") == b"v" * 1000
        p.close()
        r.close()
    finally:
        if replica is not None:
            stop_servers(replica)
        primary.stop()


def test_tls_replication_no_keeps_the_plain_path(certs):
    """tls-replication no (the default): the replica links over the plain port, even when both
    nodes serve TLS clients; pointed at tls-port in the clear it does not link."""
    primary = launch_server(tls_port=free_port(), **certs.server_config())
    replica = plain_on_tls = None
    try:
        tls_port = int(primary.config["tls-port"])
        replica = launch_server(replicaof="127.0.0.1 %d" % primary.port, tls_port=free_port(),
                                **certs.server_config())
        plain_on_tls = launch_server(replicaof="127.0.0.1 %d" % tls_port)
        p, r = primary.client(), replica.client()
        wait_for(lambda: r.info("replication").get("master_link_status") == "up", "link up")
        v = os.urandom(32 * MiB)
        p.set("big", v)
        assert p.execute_command("WAIT", 1, 60000) >= 1
        assert r.get("big") == v
        assert r.info("replication")["master_port"] == primary.port
        pinfo = p.info("replication")
        assert pinfo["slave0"]["port"] == replica.port  # the plain port is announced
        assert "(TLS)" not in primary.log_path.read_text(errors="replace")
        time.sleep(1.5)
        assert plain_on_tls.client().info("replication")["master_link_status"] == "down"
        assert pinfo["connected_slaves"] == 1
        p.close()
        r.close()
    finally:
        stop_servers(*[s for s in (replica, plain_on_tls) if s is not None])
        stop_servers(primary)


def test_slot_migration_over_tls_with_tls_cluster(certs, etcd):
    """tls-cluster yes: a migration's target links to the source's tls-port (published in its
    node record) over TLS. With a CA that does not know the source's certificate the stream
    never starts (the handshake fails, logged); with the right CA the slots move byte for
    byte, a 32 MiB value among them."""
    from redis.cluster import RedisCluster
    from migration_util import Cluster, find_tag, slot_keys
    tls = dict(tls_cluster="yes", tls_cert_file=certs.server_crt, tls_key_file=certs.server_key,
               tls_client_cert_file=certs.client_crt, tls_client_key_file=certs.client_key)
    rogue_ca = str(certs.dir / "rogue-ca.crt")
    cl = Cluster(etcd, shards=1, empty=1, node_config=lambda: dict(tls_port=free_port()),
                 empty_config=dict(tls_ca_cert_file=rogue_ca), tls_ca_cert_file=certs.ca, **tls)
    try:
        source, target = cl.nodes
        rc = RedisCluster(host="127.0.0.1", port=source.port, socket_timeout=30)
        data = slot_keys(rc, range(0, 4), 5, [1, 1000, 70000])
        big = "{%s}:big" % find_tag(2)
        data[big] = os.urandom(32 * MiB)
        rc.set(big, data[big])
        mid = cl.start_migration(source, target, 0, 3)
        tlog = lambda: target.log_path.read_text(errors="replace")
        wait_for(lambda: "certificate verify failed" in tlog(), "the target's handshake failure",
                 timeout=30)
        line = [l for l in tlog().splitlines() if "certificate verify failed" in l][0]
        assert ":%d " % int(source.config["tls-port"]) in line, line
        assert cl.state(mid) == "streaming"
        # The right CA: the next attempt goes through.
        assert target.client().config_set("tls-ca-cert-file", certs.ca)
        wait_for(lambda: cl.state(mid) == "done", "the migration", timeout=120)
        rc2 = RedisCluster(host="127.0.0.1", port=target.port, socket_timeout=30)
        for k, v in data.items():
            assert rc2.get(k) == v, k
        assert target.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", 2) > 0
        rc.close()
        rc2.close()
    finally:
        cl.stop()


def test_cluster_tls_only_nodes_replicate_and_fail_over_manually(certs, etcd):
    """Cluster mode, TLS only (port 0) and tls-replication yes: the replica follows the primary
    at the tls-port its node record carries; CLUSTER FAILOVER's commands to the primary (AUTH
    with masterauth, REPLCONF pause-writes) go over TLS too; nothing is lost."""
    from test_cluster_etcd import admin
    prefix = "/stratakv/t%d" % random.randrange(1 << 30)
    cfg = dict(cluster_enabled="yes", cluster__etcd__endpoints=etcd.endpoint,
               cluster__etcd__prefix=prefix, cluster__etcd__lease_ttl=2, tls_replication="yes",
               tls_client_cert_file=certs.client_crt, tls_client_key_file=certs.client_key,
               requirepass="s3cret", masterauth="s3cret")
    nodes = []
    try:
        for i in range(2):
            nodes.append(TlsOnly(certs, "tls-cluster-%d" % i, **cfg))
        admin(etcd, prefix, "create", "--shards", "1", "--replicas", "1", "--wait", "20")

        def role(n):
            try:
                return n.client().info("cluster").get("cluster_my_role")
            except Exception:
                return None

        def primary():
            return next((n for n in nodes if role(n) == "primary"), None)

        wait_for(lambda: primary() is not None, "a primary")
        old = primary()
        rep = next(n for n in nodes if n is not old)
        wait_for(lambda: rep.client().info("replication").get("master_link_status") == "up",
                 "the replica's link")
        assert rep.client().info("replication")["master_port"] == old.tls_port
        wait_for(lambda: old.client().info("cluster")["cluster_fenced"] == 0, "writes accepted")
        data = {}
        oc = old.client()  # one shard: every key is the primary's
        for i in range(50):
            k, v = "k%d" % i, os.urandom(1 + i * 20000)
            oc.set(k, v)
            data[k] = v
        assert oc.execute_command("WAIT", 1, 20000) == 1
        rep.client().execute_command("CLUSTER", "FAILOVER")
        wait_for(lambda: role(rep) == "primary" and role(old) == "replica", "the switch",
                 timeout=30)
        assert "failover event=manual done" in rep.log()
        wait_for(lambda: rep.client().info("cluster")["cluster_fenced"] == 0, "writes accepted")
        wait_for(lambda: old.client().info("replication").get("master_link_status") == "up",
                 "the old primary's link")
        nc = rep.client()
        nc.set("after", b"failover")
        assert nc.execute_command("WAIT", 1, 20000) == 1
        for k, v in data.items():
            assert nc.get(k) == v, k
        rc = old.client()
        rc.execute_command("READONLY")
        assert rc.get("after") == b"failover"
        for k, v in data.items():
            assert rc.get(k) == v, k
    finally:
        for n in nodes:
            n.stop()
