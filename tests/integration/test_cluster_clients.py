"""Node.js's cluster clients against three stratakv primaries (a static topology; docs/cluster.md):
ioredis's Cluster and node-redis's createCluster, from npm (tests/clients/node, installed by
scripts/install-deps.sh), each write and read 10,000 keys byte-exact through -MOVED routing, use
hash tags for multi-key commands, and get -CROSSSLOT across slots."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster_util import StaticCluster

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"


@pytest.fixture(scope="module")
def cluster():
    c = StaticCluster(3).start()
    yield c
    c.stop()


@pytest.mark.parametrize("client", ["ioredis", "node-redis"])
def test_node_cluster_client_10000_keys(cluster, client):
    if shutil.which("node") is None or not (NODE_DIR / "node_modules").is_dir():
        pytest.skip("node or tests/clients/node/node_modules missing (scripts/install-deps.sh)")
    seeds = "127.0.0.1:%d" % cluster.ports[2]
    out = subprocess.run(["node", str(NODE_DIR / "cluster_roundtrip.mjs"), seeds, "10000", client],
                         capture_output=True, text=True, timeout=120, cwd=str(NODE_DIR))
    assert out.stdout.strip(), out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    assert result["mismatches"] == 0 and result["keys"] == 10000
    # The keys landed on all three nodes, each on the node serving its slot.
    sizes = [srv.client().dbsize() for srv in cluster.nodes]
    assert min(sizes) > 2500, sizes
