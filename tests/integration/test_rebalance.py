"""The issue's "done when" for slot migration: `scripts/cluster.sh up 3`, then `add-node` and
`rebalance` (3 shards to 4), then `remove-node` (back to 3), under a mixed load that never
stops: redis-py's RedisCluster, ioredis's Cluster (node, from npm) and the SDK (RESP and the
fast path over each node's Unix socket), values of 1 KiB to 32 MiB. No client sees an error
(a -MOVED is followed by the client), every key is byte-exact afterwards, the shards hold equal
shares, and CLUSTER COUNTKEYSINSLOT agrees on every node.
"""

import json
import os
import random
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from etcd_util import etcd_binary
from harness import cluster_sh_base_port, server_binary, wait_until

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "tests" / "clients" / "node"



def primaries(ports):
    out = []
    for p in ports:
        try:
            if redis.Redis(port=p, socket_timeout=2).info("cluster")["cluster_my_role"] == "primary":
                out.append(p)
        except redis.ConnectionError:
            pass
    return out


def shares(port):
    """Slots per shard, from CLUSTER SHARDS of the node on `port`."""
    slots = redis.Redis(port=port).execute_command("CLUSTER", "SLOTS")
    per = {}
    for first, last, primary, *_ in slots:
        per[int(primary[1])] = per.get(int(primary[1]), 0) + last - first + 1
    return per


def test_add_node_rebalance_remove_node_under_load(tmp_path):
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    try:
        import stratakv  # the SDK's Python module (built with the SDK: PYTHONPATH)
    except ImportError:
        stratakv = None
    base = cluster_sh_base_port(8)
    env = dict(os.environ, STRATAKV_CLUSTER_DIR=str(tmp_path / "cluster"),
               BUILD_DIR=str(Path(server_binary()).parents[1]))
    script = str(REPO / "scripts" / "cluster.sh")

    def sh(*args, timeout=600):
        out = subprocess.run([script, *args], env=env, capture_output=True, text=True,
                             timeout=timeout)
        assert out.returncode == 0, " ".join(args) + ": " + out.stdout + out.stderr
        return out.stdout

    try:
        sh("up", "3", "--base-port", str(base), timeout=120)
        ports = [base, base + 1, base + 2]
        wait_until("3 primaries", lambda: len(primaries(ports)) == 3)
        rc = RedisCluster(host="127.0.0.1", port=base, socket_timeout=30)
        data = {}
        for i in range(600):
            k = "pre:%d" % i
            data[k] = os.urandom(1024 * (1 + i % 256))  # 1 KiB to 256 KiB
            rc.set(k, data[k])
        for i in range(3):
            k = "big:%d" % i
            data[k] = os.urandom(32 << 20)
            rc.set(k, data[k])

        errors, stop, written = [], threading.Event(), {}

        def py_load():
            c = RedisCluster(host="127.0.0.1", port=base, socket_timeout=30)
            i = 0
            while not stop.is_set():
                k = "py:%d" % (i % 500)
                v = os.urandom(100 + (i % 40) * 1000)
                try:
                    c.set(k, v)
                    written[k] = v
                    if c.get(k) != v:
                        errors.append("redis-py read back a different value of " + k)
                except Exception as e:
                    errors.append("redis-py: %r" % e)
                i += 1
            c.close()

        def sdk_load():
            kv = stratakv.Client("redis+cluster://127.0.0.1:%d" % base)
            i = 0
            while not stop.is_set():
                keys = ["sdk:%d" % ((i * 4 + j) % 400) for j in range(4)]
                vals = [os.urandom(1 << 20) for _ in keys]  # 1 MiB parts
                try:
                    if kv.batch_put(keys, vals) != [True] * 4:
                        errors.append("sdk batch_put refused")
                    for k, v in zip(keys, vals):
                        written[k] = v
                        if kv.get(k) != v:
                            errors.append("sdk read back a different value of " + k)
                except Exception as e:
                    errors.append("sdk: %r" % e)
                i += 1

        node = None
        if shutil.which("node") and (NODE_DIR / "node_modules").is_dir():
            node = subprocess.Popen(["node", str(NODE_DIR / "cluster_load.mjs"),
                                     "127.0.0.1:%d" % base, "300"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threads = [threading.Thread(target=py_load)]
        if stratakv is not None:
            threads.append(threading.Thread(target=sdk_load))
        else:
            print("the SDK's Python module is not built: no SDK load")
        for t in threads:
            t.start()
        time.sleep(1)

        # 3 shards to 4.
        out = sh("add-node")
        new_port = int(re.search(r"node 127\.0\.0\.1:(\d+) id", out).group(1))
        new_id = re.search(r"id ([0-9a-f]{40})", out).group(1)
        t0 = time.monotonic()
        sh("rebalance")
        took = time.monotonic() - t0
        ports.append(new_port)
        per = shares(base)
        assert sorted(per.values()) == [4096] * 4, per
        assert per.get(new_port) == 4096
        print("rebalance 3 -> 4: %.1f s" % took)
        time.sleep(1)

        # Back to 3: the new node's slots move away, then it leaves and stops.
        t0 = time.monotonic()
        sh("remove-node", new_id)
        print("remove-node: %.1f s" % (time.monotonic() - t0))
        ports.remove(new_port)
        per = shares(base)
        assert sorted(per.values()) in ([5461, 5461, 5462], [5461, 5462, 5462]), per
        time.sleep(1)

        stop.set()
        for t in threads:
            t.join()
        ioredis_keys = 0
        if node is not None:
            out, err = node.communicate(timeout=60)  # closes its stdin: the load ends
            res = json.loads(out.strip().splitlines()[-1])
            assert res["errors"] == 0 and res["mismatches"] == 0, (res, err[-2000:])
            assert res["ops"] > 0
            print("ioredis ops during the moves: %d" % res["ops"])
            ioredis_keys = min(300, res["ops"] // 2)
        assert errors == [], errors[:5]

        # Every key byte-exact from a fresh client; counts agree everywhere.
        data.update(written)
        rc2 = RedisCluster(host="127.0.0.1", port=base + 1, socket_timeout=30)
        bad = [k for k, v in data.items() if rc2.get(k) != v]
        assert not bad, bad[:5]
        for p in ports:
            wait_until("janitor done", lambda: redis.Redis(port=p).info("cluster")[
                "migration_janitor_slots"] == 0)
        # DBSIZE over the primaries counts each key once: the moved copies are gone.
        total = sum(redis.Redis(port=p).dbsize() for p in ports)
        assert total == len(data) + ioredis_keys, (total, len(data), ioredis_keys)
        for slot in random.sample(range(16384), 40):
            counts = [redis.Redis(port=p).execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
                      for p in ports]
            assert sum(1 for c in counts if c) <= 1, (slot, counts)
        rc.close()
        rc2.close()
    except BaseException:
        # What CI keeps of a failure is this output: the end of every node's and etcd's log.
        state = tmp_path / "cluster"
        for log in [state / "etcd.log", *sorted(state.glob("node-*/server.log"))]:
            if log.exists():
                print("==== %s\n%s" % (log, "".join(log.read_text(errors="replace")
                                              .splitlines(True)[-40:])))
        raise
    finally:
        subprocess.run([script, "down"], env=env, capture_output=True, timeout=120)
