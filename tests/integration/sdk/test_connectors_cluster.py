"""Both connectors on a redis+cluster:// URL (three primaries, StaticCluster): pages and
chunks spread over the nodes, batch_get_v1 / batched_get is one KV.MGET per node, the prefix
answer joins the nodes' runs, and the bytes come back whole."""

import asyncio

import torch

from engine_doubles import KV_2LTD, CacheKey, LMCacheConfig, LocalCPUBackend, MHAHostPool, fill, storage_config
from sdk_cluster_util import calls, cluster, reset_stats, url_of  # noqa: F401 (fixture)
from stratakv.integrations.lmcache import StratakvConnector
from stratakv.integrations.sglang import StratakvHiCacheStorage


def flush(c):
    for srv in c.nodes:
        srv.client().flushall()


def test_sglang_pages_over_three_nodes(cluster):  # noqa: F811
    flush(cluster)
    pool = MHAHostPool(32, layer_num=8)
    fill(pool.kv_buffer, 11)
    b = StratakvHiCacheStorage(storage_config(url_of(cluster)), {})
    b.register_mem_pool_host(pool)
    keys = ["%064x" % (i * 7919) for i in range(32)]
    assert b.batch_set_v1(keys, pool.indices(range(32))) == [True] * 32
    per_node = [srv.client().dbsize() for srv in cluster.nodes]
    assert sum(per_node) == 32 and all(n > 0 for n in per_node), per_node
    reset_stats(cluster)
    assert b.batch_exists(keys) == 32
    want = pool.kv_buffer.clone()
    pool.kv_buffer.zero_()  # load back into the pool the backend registered
    assert b.batch_get_v1(keys, pool.indices(range(32))) == [True] * 32
    assert torch.equal(pool.kv_buffer, want)
    for srv in cluster.nodes:
        assert calls(srv, "kv.mget") == 1 and calls(srv, "kv.prefix") == 1
        assert calls(srv, "get") == 0 and calls(srv, "kv.get") == 0
    # a miss in the middle ends the prefix whatever node holds it
    cluster.nodes[0].client().flushall()
    n = b.batch_exists(keys)
    assert n < 32
    got = b.batch_get_v1(keys, pool.indices(range(32)))
    assert got[n] is False and sum(got) == 32 - per_node[0]


def test_lmcache_chunks_over_three_nodes(cluster):  # noqa: F811
    flush(cluster)
    cpu = LocalCPUBackend()
    keys = [CacheKey("c%d" % i) for i in range(24)]
    objs = []
    for i in range(24):
        o = cpu.allocate(torch.Size([2, 8, 256, 128]), torch.bfloat16, KV_2LTD)
        fill(o.tensor, i)
        objs.append(o)

    async def main():
        c = StratakvConnector(local_cpu_backend=cpu,
                              config=LMCacheConfig("external://x:0/m/?connector_name=C",
                                                   {"stratakv_url": url_of(cluster)}))
        await c.batched_put(keys, objs)
        assert all(srv.client().dbsize() > 0 for srv in cluster.nodes)
        reset_stats(cluster)
        assert await c.batched_async_contains("l", keys, pin=True) == 24
        got = await c.batched_get(keys)
        assert all(torch.equal(g.tensor, o.tensor) for g, o in zip(got, objs))
        assert sorted(await c.list()) == sorted(k.to_string() for k in keys)
        for srv in cluster.nodes:
            assert calls(srv, "kv.mget") == 1
        await c.close()
    asyncio.run(main())
