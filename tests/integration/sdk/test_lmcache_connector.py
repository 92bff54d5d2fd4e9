"""stratakv.integrations.lmcache against a real server, driven as LMCache's remote backend
drives it (async calls on an event loop, memory objects from its CPU backend; engine_doubles):
256-token chunks of 32 layers x K/V in bf16, fp16, fp32, a partial last chunk, one key per
chunk, misses in the middle, prefix answers with pins, the wire (one KV.PREFIX, one KV.MPUT,
one KV.MGET), a reader that never saw a chunk, pins surviving an eviction storm, a server
restart (misses, never exceptions)."""

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

import harness
from engine_doubles import KV_2LTD, CacheKey, LMCacheConfig, LocalCPUBackend, fill
from stratakv.integrations.lmcache import StratakvConnector

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
LAYERS, TOKENS, HIDDEN = 32, 256, 128  # KV_2LTD: [2, layers, tokens, hidden]


def connector(srv, cpu=None, **extra):
    extra.setdefault("stratakv_url", "unix://" + srv.socket_path)
    url = "external://localhost:0/stratakv.integrations.lmcache/?connector_name=StratakvConnector"
    return StratakvConnector(loop=None, local_cpu_backend=cpu or LocalCPUBackend(),
                             config=LMCacheConfig(url, extra))


def chunk(cpu, dtype, seed, tokens=TOKENS):
    obj = cpu.allocate(torch.Size([2, LAYERS, tokens, HIDDEN]), dtype, KV_2LTD)
    fill(obj.tensor, seed)
    return obj


def run(coro):
    return asyncio.run(coro)


def calls(srv, cmd):
    return srv.client().info("commandstats").get("cmdstat_" + cmd, {}).get("calls", 0)


@pytest.fixture
def srv(sdk_server, redis_py):  # redis_py flushes
    return sdk_server


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_chunks_round_trip_with_partial_last_chunk(srv, redis_py, dtype):
    cpu = LocalCPUBackend()
    keys = [CacheKey("%016x" % i, dtype=str(dtype)[6:]) for i in range(5)]
    objs = [chunk(cpu, dtype, i) for i in range(4)] + [chunk(cpu, dtype, 4, tokens=100)]

    async def main():
        w = connector(srv, cpu)
        await w.batched_put(keys, objs)
        r = connector(srv, LocalCPUBackend())  # a reader that has seen no chunk yet
        first = await r.get(keys[0])
        assert first.get_shape() == objs[0].get_shape() and first.get_dtype() == dtype
        assert torch.equal(first.tensor, objs[0].tensor)
        got = await r.batched_get(keys)
        for g, o in zip(got, objs):
            assert g.get_shape() == o.get_shape() and g.get_memory_format() == KV_2LTD
            assert torch.equal(g.tensor, o.tensor)
        # one key per chunk: header and bytes together
        assert len(redis_py.keys("*")) == 5
        full = redis_py.get("lmcache:" + keys[4].to_string())
        assert full[:4] == b"SKVL" and len(full) == 64 + objs[4].get_size()
        assert await r.exists(keys[1]) and r.exists_sync(keys[1])
        await w.close()
        await r.close()
    run(main())


def test_misses_in_the_middle_prefix_and_pins(srv):
    cpu = LocalCPUBackend()
    keys = [CacheKey("m%d" % i) for i in range(6)]
    objs = [chunk(cpu, torch.bfloat16, i) for i in range(6)]

    async def main():
        c = connector(srv, cpu)
        await c.batched_put([keys[i] for i in (0, 1, 3, 4, 5)], [objs[i] for i in (0, 1, 3, 4, 5)])
        assert await c.batched_async_contains("req-1", keys, pin=False) == 2
        assert srv.client().info("fastpath")["leased_keys"] == 0
        assert await c.batched_async_contains("req-1", keys, pin=True) == 2
        assert srv.client().info("fastpath")["leased_keys"] == 2
        assert c.batched_contains(keys) == [True, True, False, False, False, False]
        assert c.batched_contains(keys, stop_after_first_not_exits=False) == [True, True, False, True, True, True]
        got = await c.batched_get(keys)
        assert got[2] is None and all(torch.equal(got[i].tensor, objs[i].tensor) for i in (0, 1, 3, 4, 5))
        lead = await c.batched_get_non_blocking("req-1", keys)
        assert len(lead) == 2 and torch.equal(lead[1].tensor, objs[1].tensor)
        assert await c.get(keys[2]) is None
        assert c.remove_sync(keys[0]) is True and c.remove_sync(keys[0]) is False
        assert sorted(await c.list()) == sorted(k.to_string() for k in (keys[1], keys[3], keys[4], keys[5]))
        await c.close()
    run(main())


def test_wire_one_command_per_batch(srv):
    cpu = LocalCPUBackend()
    keys = [CacheKey("w%d" % i) for i in range(8)]
    objs = [chunk(cpu, torch.float16, i) for i in range(8)]

    async def main():
        c = connector(srv, cpu)
        await c.batched_put(keys[:1], objs[:1])  # learn the layout
        r = srv.client()
        r.config_resetstat()
        await c.batched_put(keys, objs)
        assert await c.batched_async_contains("x", keys, pin=True) == 8
        got = await c.batched_get(keys)
        assert all(torch.equal(g.tensor, o.tensor) for g, o in zip(got, objs))
        s = r.info("commandstats")
        assert s["cmdstat_kv.mput"]["calls"] == 1 and s["cmdstat_kv.prefix"]["calls"] == 1
        assert s["cmdstat_kv.mget"]["calls"] == 1, s
        assert not any(k in s for k in ("cmdstat_get", "cmdstat_set", "cmdstat_kv.get", "cmdstat_exists"))
        await c.close()
    run(main())


def test_allocation_failure_is_a_miss(srv):
    cpu = LocalCPUBackend()
    keys = [CacheKey("a%d" % i) for i in range(3)]
    objs = [chunk(cpu, torch.bfloat16, i) for i in range(3)]

    async def main():
        c = connector(srv, cpu)
        await c.batched_put(keys, objs)
        full = LocalCPUBackend(max_objects=2)
        r = connector(srv, full)
        await r.batched_put(keys[:1], [objs[0]])  # learn the layout
        got = await r.batched_get(keys)
        assert [g is not None for g in got] == [True, True, False]
        await c.close()
        await r.close()
    run(main())


def test_pinned_lookup_survives_an_eviction_storm():
    workdir = Path(tempfile.mkdtemp(prefix="stratakv-lmcache-evict-"))
    sock = workdir / "s.sock"
    srv = harness.launch_server(unixsocket=str(sock), memory__capacity="64mb")
    srv.socket_path = str(sock)
    try:
        cpu = LocalCPUBackend()
        shape = torch.Size([2, 8, 256, 128])  # 1 MiB chunks (bf16)

        def chunks(seed0):
            out = []
            for i in range(4):
                o = cpu.allocate(shape, torch.bfloat16, KV_2LTD)
                fill(o.tensor, seed0 + i)
                out.append(o)
            return out

        async def main():
            c = connector(srv, cpu)
            pinned = [CacheKey("pinned%d" % i) for i in range(4)]
            loose = [CacheKey("loose%d" % i) for i in range(4)]
            objs = chunks(0)
            await c.batched_put(pinned, objs)
            await c.batched_put(loose, chunks(10))
            assert await c.batched_async_contains("req", pinned, pin=True) == 4
            assert await c.batched_async_contains("req", loose, pin=False) == 4
            storm = chunks(20)
            for r in range(40):  # 40 x 4 MiB through a 64 MiB region
                await c.batched_put([CacheKey("storm%d-%d" % (r, i)) for i in range(4)], storm)
            assert srv.client().info("stats")["evicted_keys"] > 0
            got = await c.batched_get(pinned)
            assert all(g is not None and torch.equal(g.tensor, o.tensor) for g, o in zip(got, objs))
            assert await c.batched_async_contains("req", loose, pin=False) < 4
            await c.close()
        run(main())
    finally:
        harness.stop_servers(srv)
        shutil.rmtree(workdir, ignore_errors=True)


def test_server_restart_in_the_middle_gives_misses_not_exceptions():
    workdir = Path(tempfile.mkdtemp(prefix="stratakv-lmcache-restart-"))
    sock = workdir / "s.sock"
    srv = harness.launch_server(unixsocket=str(sock))
    srv.socket_path = str(sock)
    try:
        cpu = LocalCPUBackend()
        keys = [CacheKey("r%d" % i) for i in range(4)]
        objs = [chunk(cpu, torch.bfloat16, i) for i in range(4)]

        async def main():
            c = connector(srv, cpu)
            await c.batched_put(keys, objs)
            srv.stop()
            assert await c.batched_get(keys) == [None] * 4
            assert await c.get(keys[0]) is None
            assert await c.exists(keys[0]) is False and c.exists_sync(keys[0]) is False
            assert await c.batched_async_contains("x", keys, pin=True) == 0
            assert await c.batched_get_non_blocking("x", keys) == []
            assert await c.ping() == 1
            assert await c.list() == []
            assert c.remove_sync(keys[0]) is False
            await c.batched_put(keys, objs)  # logged, not raised
            await c.put(keys[0], objs[0])
            srv.start()
            assert await c.ping() == 0
            await c.batched_put(keys, objs)
            got = await c.batched_get(keys)
            assert all(torch.equal(g.tensor, o.tensor) for g, o in zip(got, objs))
            await c.close()
        run(main())
    finally:
        harness.stop_servers(srv)
        shutil.rmtree(workdir, ignore_errors=True)
