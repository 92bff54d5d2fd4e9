"""Clusters of stratakv nodes for the tests: a static topology (cluster.topology-file, no etcd)
written here, and the nodes started on loopback ports, each with its node id kept in its own
working directory (nodes.conf), as docs/cluster.md describes."""

import json
import os
import secrets

from harness import Server, config_name, free_port, stop_servers, tmp_root


def new_id():
    return secrets.token_hex(20)


def split_evenly(n):
    """Slots 0..16383 in n contiguous ranges, the first 16384 % n one slot larger."""
    size, extra = divmod(16384, n)
    ranges, first = [], 0
    for i in range(n):
        last = first + size + (1 if i < extra else 0) - 1
        ranges.append([first, last])
        first = last + 1
    return ranges


class StaticCluster:
    """`n` shards over a topology file, each a primary and `replicas` replicas; `config` goes to
    every node. Nodes 0..n-1 are the primaries, then shard 0's replicas, shard 1's ...
    With `tls` (config of tls_util.TlsFiles.server_config) every node also has a tls-port, in
    its config and in the topology (self.tls_ports)."""

    def __init__(self, n, version=1, replicas=0, tls=None, **config):
        self.nodes = []
        total = n * (1 + replicas)
        self.ids = [new_id() for _ in range(total)]
        self.shard_ids = [new_id() for _ in range(n)]
        self.ports = [free_port() for _ in range(total)]
        self.tls_ports = [free_port() if tls else 0 for _ in range(total)]
        self.sockets = []
        self.path = str(tmp_root() / ("topology-%s.json" % secrets.token_hex(4)))
        for i in range(total):
            srv = Server(cluster_enabled="yes", cluster__topology_file=self.path,
                         port=self.ports[i], **config)
            if tls:
                srv.config.update((config_name(k), v)
                                  for k, v in dict(tls_port=self.tls_ports[i], **tls).items())
                srv.tls_port = self.tls_ports[i]
            (srv.workdir / "nodes.conf").write_text("id %s\n" % self.ids[i])
            self.sockets.append(str(srv.workdir / "s.sock"))
            srv.config["unixsocket"] = self.sockets[i]
            srv.unixsocket = self.sockets[i]
            self.nodes.append(srv)
        self.topology = {
            "format": 1, "version": version, "name": "test",
            "nodes": [{"id": self.ids[i], "host": "127.0.0.1", "port": self.ports[i],
                       "tls_port": self.tls_ports[i], "unix_socket": self.sockets[i],
                       "host_id": "test-host"}
                      for i in range(total)],
            "shards": [{"id": self.shard_ids[i], "slots": [r], "primary": self.ids[i],
                        "replicas": [self.ids[n + i * replicas + j] for j in range(replicas)],
                        "primary_epoch": 1}
                       for i, r in enumerate(split_evenly(n))],
            "migrations": [],
        }
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.topology, f)
        os.replace(tmp, self.path)

    def start(self):
        for srv in self.nodes:
            srv.start()
        return self

    def stop(self):
        stop_servers(*self.nodes)

    def owner_of(self, slot):
        """Index of the node whose shard has `slot`."""
        for i, shard in enumerate(self.topology["shards"]):
            for first, last in shard["slots"]:
                if first <= slot <= last:
                    return self.ids.index(shard["primary"])
        return None
