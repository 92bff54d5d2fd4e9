"""Helpers of the SDK's cluster tests (test_sdk_cluster*.py): the key-to-slot map, INFO
fields of a node, and the fixtures: `cluster` (three primaries, StaticCluster, for the module)
and `kv` (a redis+cluster:// Client on it, every node flushed first)."""

import numpy as np
import pytest

import stratakv
from cluster_util import StaticCluster
from resp_util import Simple

MiB = 1 << 20
OK = Simple("OK")


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


def key_slot(key):
    k = key.encode() if isinstance(key, str) else key
    open_ = k.find(b"{")
    if open_ >= 0:
        close = k.find(b"}", open_ + 1)
        if close > open_ + 1:
            k = k[open_ + 1:close]
    return crc16(k) & 16383


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def url_of(c, *nodes):
    return "redis+cluster://" + ",".join("127.0.0.1:%d" % c.ports[i] for i in (nodes or (0,)))


def info(srv, section):
    return srv.client().info(section)


def calls(srv, command):
    return info(srv, "commandstats").get("cmdstat_" + command, {}).get("calls", 0)


def reset_stats(c):
    for srv in c.nodes:
        srv.client().config_resetstat()


@pytest.fixture(scope="module")
def cluster():
    c = StaticCluster(3).start()
    yield c
    c.stop()


@pytest.fixture
def kv(cluster):
    for srv in cluster.nodes:
        srv.client().flushall()
    return stratakv.Client(url_of(cluster))
