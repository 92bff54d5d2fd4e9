"""Driver of bench/connectors-bench.sh: the inference-engine connectors driven as their
engines drive them, against Redis used through LMCache's own RESP pattern, in one run.

  sglang    stratakv.integrations.sglang: requests of P pages of 64 tokens; per request
            batch_exists (KV.PREFIX ... PIN) then batch_get_v1 (KV.MGET) into a host pool
            laid out as SGLang's (MHA, page_first)
  lmcache   stratakv.integrations.lmcache: requests of C chunks of 256 tokens; per request
            batched_async_contains(pin=True) then batched_get, memory objects from an
            LMCache-like CPU backend
  resp      LMCache's redis connector pattern (redis-py asyncio, as lmcache's
            redis_connector.py): two keys per chunk (<key>kv_bytes, <key>metadata), SET each;
            lookup = EXISTS <key>metadata per chunk until the first miss; load = per chunk
            GET metadata + GET kv_bytes, all chunks of a request gathered, copied into the
            memory object. Against redis-server, and against stratakv over TCP, with the
            same value sizes as sglang (8 MiB pages) and lmcache (chunks)

Per request it measures lookup + load wall time; reports load GB/s (10^9 payload bytes per
second of request time, one client, requests back to back) and p50/p99 per request. Every
loaded value is checked byte for byte against what was stored, once, before timing.

Engine layouts come from tests/integration/sdk/engine_doubles.py (the same stand-ins the
tests use). Needs PYTHONPATH=<build>/python; /usr/bin/python3 (torch, numpy, redis-py).
"""

import argparse
import asyncio
import struct
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration" / "sdk"))

from engine_doubles import (KV_2LTD, CacheKey, LMCacheConfig, LocalCPUBackend,  # noqa: E402
                            MHAHostPool, fill, storage_config)
from stratakv.integrations.lmcache import StratakvConnector  # noqa: E402
from stratakv.integrations.sglang import StratakvHiCacheStorage  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(name, target, value_mib, per_req, bytes_per_req, times):
    total = sum(times)
    return {"workload": name, "target": target, "value": "%.3g MiB" % value_mib,
            "request": "%d x %.3g MiB" % (per_req, value_mib),
            "gbps": bytes_per_req * len(times) / total / 1e9,
            "p50": pct(times, 50) * 1e3, "p99": pct(times, 99) * 1e3, "n": len(times)}


# ---- SGLang ---------------------------------------------------------------------------------
def bench_sglang(a):
    pool_src = MHAHostPool(a.pages, layer_num=a.layers, head_num=a.heads, head_dim=a.head_dim)
    pool_dst = MHAHostPool(a.pages, layer_num=a.layers, head_num=a.heads, head_dim=a.head_dim)
    fill(pool_src.kv_buffer, 1)
    batch_bytes = a.pages * pool_src.page_bytes()
    cfg = storage_config(a.url, stratakv_max_staging_bytes=max(batch_bytes, 256 << 20))
    b = StratakvHiCacheStorage(cfg, {})
    b.register_mem_pool_host(pool_src)
    reader = StratakvHiCacheStorage(cfg, {})
    reader.register_mem_pool_host(pool_dst)
    groups = [["%016x%048x" % (g, i) for i in range(a.pages)] for g in range(a.groups)]
    idx = pool_src.indices(range(a.pages))
    for keys in groups:
        assert b.batch_set_v1(keys, idx) == [True] * a.pages
    assert reader.batch_exists(groups[0]) == a.pages
    assert reader.batch_get_v1(groups[0], idx) == [True] * a.pages
    assert torch.equal(pool_dst.kv_buffer, pool_src.kv_buffer), "sglang: bytes differ"
    times = []
    for r in range(a.requests):
        keys = groups[r % a.groups]
        t0 = time.perf_counter()
        n = reader.batch_exists(keys)
        ok = reader.batch_get_v1(keys[:n], idx[:n * pool_dst.page_size])
        times.append(time.perf_counter() - t0)
        assert n == a.pages and all(ok)
    b.clear()
    return row("sglang batch_exists + batch_get_v1", "stratakv (%s)" % a.url.split(":")[0],
               pool_src.page_bytes() / 2**20, a.pages, batch_bytes, times)


# ---- LMCache --------------------------------------------------------------------------------
def chunk_shape(a, tokens=256):
    return torch.Size([2, a.layers, tokens, a.heads * a.head_dim])


def bench_lmcache(a):
    cpu = LocalCPUBackend()
    objs = []
    for i in range(a.chunks):
        o = cpu.allocate(chunk_shape(a), torch.bfloat16, KV_2LTD)
        fill(o.tensor, i)
        objs.append(o)
    chunk_bytes = objs[0].get_size()
    extra = {"stratakv_url": a.url, "stratakv_max_staging_bytes": max(a.chunks * chunk_bytes, 256 << 20)}
    config = LMCacheConfig("external://localhost:0/stratakv.integrations.lmcache/"
                           "?connector_name=StratakvConnector", extra)
    groups = [[CacheKey("%016x%048x" % (g, i)) for i in range(a.chunks)] for g in range(a.groups)]

    async def main():
        c = StratakvConnector(local_cpu_backend=cpu, config=config)
        for keys in groups:
            await c.batched_put(keys, objs)
        got = await c.batched_get(groups[0])
        assert all(torch.equal(g.tensor, o.tensor) for g, o in zip(got, objs)), "lmcache: bytes differ"
        for g in got:
            g.ref_count_down()
        times = []
        for r in range(a.requests):
            keys = groups[r % a.groups]
            t0 = time.perf_counter()
            n = await c.batched_async_contains("req-%d" % r, keys, pin=True)
            got = await c.batched_get(keys[:n])
            times.append(time.perf_counter() - t0)
            assert n == a.chunks and all(g is not None for g in got)
            for g in got:
                g.ref_count_down()
        for keys in groups:
            for k in keys:
                c.remove_sync(k)
        await c.close()
        return times

    times = asyncio.run(main())
    return row("lmcache batched_async_contains + batched_get", "stratakv (%s)" % a.url.split(":")[0],
               chunk_bytes / 2**20, a.chunks, a.chunks * chunk_bytes, times)


# ---- LMCache's RESP pattern (redis_connector.py) ------------------------------------------------
def bench_resp(a, port, target, name, shape, per_req):
    import redis.asyncio as aredis
    cpu = LocalCPUBackend()
    objs = []
    for i in range(per_req):
        o = cpu.allocate(shape, torch.bfloat16, KV_2LTD)
        fill(o.tensor, i)
        objs.append(o)
    value_bytes = objs[0].get_size()
    groups = [[CacheKey("%016x%048x" % (g, i)).to_string() for i in range(per_req)] for g in range(a.groups)]

    def metadata(o):  # LMCache's RemoteMetadata: length, fmt, dtype, shape[4] as 7 int32
        s = list(o.get_shape())
        return struct.pack("iiiiiii", o.get_size(), o.get_memory_format().value, 3, *s)

    async def main():
        pool = aredis.ConnectionPool(host="127.0.0.1", port=port, max_connections=150)
        r = aredis.Redis(connection_pool=pool)
        sem = asyncio.Semaphore(150)

        async def put(k, o):
            async with sem:
                await r.set(k + "kv_bytes", bytes(o.byte_array))
                await r.set(k + "metadata", metadata(o))

        async def get(k):
            async with sem:
                meta = await r.get(k + "metadata")
                if meta is None:
                    return None
                length, fmt_v, _, s0, s1, s2, s3 = struct.unpack_from("iiiiiii", meta)
                o = cpu.allocate(torch.Size([s0, s1, s2, s3]), torch.bfloat16, KV_2LTD)
                kv = await r.get(k + "kv_bytes")
            o.byte_array[:length] = kv
            return o

        async def contains(keys):
            n = 0
            for k in keys:
                async with sem:
                    if not await r.exists(k + "metadata"):
                        return n
                n += 1
            return n

        for keys in groups:
            await asyncio.gather(*(put(k, o) for k, o in zip(keys, objs)))
        got = await asyncio.gather(*(get(k) for k in groups[0]))
        assert all(torch.equal(g.tensor, o.tensor) for g, o in zip(got, objs)), "resp: bytes differ"
        times = []
        for i in range(a.requests):
            keys = groups[i % a.groups]
            t0 = time.perf_counter()
            n = await contains(keys)
            got = await asyncio.gather(*(get(k) for k in keys[:n]))
            times.append(time.perf_counter() - t0)
            assert n == per_req and all(g is not None for g in got)
        for keys in groups:
            await r.delete(*[k + s for k in keys for s in ("kv_bytes", "metadata")])
        await r.close()
        await pool.disconnect()
        return times

    times = asyncio.run(main())
    return row(name, target, value_bytes / 2**20, per_req, per_req * value_bytes, times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--unix", required=True, help="stratakv's Unix socket")
    p.add_argument("--port", type=int, required=True, help="stratakv's TCP port")
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few requests (smoke test)")
    p.add_argument("--requests", type=int, default=50)
    p.add_argument("--groups", type=int, default=8, help="distinct requests stored (all hits)")
    p.add_argument("--pages", type=int, default=16, help="SGLang pages (64 tokens) per request")
    p.add_argument("--chunks", type=int, default=4, help="LMCache chunks (256 tokens) per request")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=8, help="KV heads (Llama-3-8B: 8 x 128)")
    p.add_argument("--head-dim", type=int, default=128)
    a = p.parse_args()
    if a.quick:
        a.requests, a.groups, a.pages, a.chunks, a.layers, a.heads = 5, 2, 4, 2, 4, 2
    a.url = "unix://" + a.unix
    rows = [bench_sglang(a), bench_lmcache(a)]
    page_shape = torch.Size([2, a.layers, 64, a.heads * a.head_dim])
    for port, target in ((a.redis_port, "redis-server"), (a.port, "stratakv (TCP)")):
        rows.append(bench_resp(a, port, target, "LMCache RESP pattern, 64-token pages", page_shape, a.pages))
        rows.append(bench_resp(a, port, target, "LMCache RESP pattern, 256-token chunks", chunk_shape(a), a.chunks))
    print("| workload | target | request | load GB/s | p50 ms | p99 ms | requests |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %s | %s | %.2f | %.1f | %.1f | %d |" % (
            r["workload"], r["target"], r["request"], r["gbps"], r["p50"], r["p99"], r["n"]))
    base = {r["value"]: r["gbps"] for r in rows if r["target"] == "redis-server"}
    print()
    for r in rows[:2]:
        if r["value"] in base:
            print("- %s: %.1fx redis-server's load GB/s through LMCache's RESP pattern" % (
                r["workload"], r["gbps"] / base[r["value"]]))
    print("- model shape: %d layers x %d KV heads x %d dims, bf16 (%.0f KiB per token)" % (
        a.layers, a.heads, a.head_dim, 2 * a.layers * a.heads * a.head_dim * 2 / 1024))
    print("- p50/p99: the whole request (lookup + load), %d requests after a verified warm-up"
          % a.requests)


if __name__ == "__main__":
    main()
