"""stratakv.integrations.sglang against a real server: SGLang's page calls with a host pool
of real torch memory laid out as SGLang's (engine_doubles.py): 64-token pages of 32 layers x
K/V in bf16, fp16 and fp32; misses in the middle; prefix answers; the wire (one KV.PREFIX
with PIN, one KV.MGET, no GET); keys per model and rank, one copy for MLA; pins surviving an
eviction storm; a server restart in the middle (misses, never exceptions)."""

import shutil
import tempfile
from pathlib import Path

import pytest
import torch

import harness
from engine_doubles import MHAHostPool, MLAHostPool, fill, storage_config
from stratakv.integrations.sglang import StratakvHiCacheStorage

DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def url_of(srv):
    return "unix://" + srv.socket_path


def backend(srv, pool, **kw):
    b = StratakvHiCacheStorage(storage_config(url_of(srv), **kw), {})
    b.register_mem_pool_host(pool)
    return b


def stats(srv):
    return srv.client().info("commandstats")


def calls(srv, cmd):
    return stats(srv).get("cmdstat_" + cmd, {}).get("calls", 0)


@pytest.fixture
def srv(sdk_server, redis_py):  # redis_py flushes
    return sdk_server


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pages_round_trip_with_a_miss_in_the_middle(srv, dtype):
    src = MHAHostPool(8, dtype=dtype)
    fill(src.kv_buffer, 1)
    dst = MHAHostPool(8, dtype=dtype)
    w, r = backend(srv, src, tp_rank=0, tp_size=2), backend(srv, dst, tp_rank=0, tp_size=2)
    keys = ["%064x" % i for i in range(6)]
    stored = [0, 1, 3, 4, 5]  # page 2 never stored
    assert w.batch_set_v1([keys[i] for i in stored], src.indices(stored)) == [True] * 5
    assert r.batch_exists(keys) == 2
    assert r.batch_exists(keys[3:]) == 3
    assert r.batch_exists(keys[2:]) == 0
    # load into other slots of another pool: 6 pages into slots 7, 6, ..., 2
    slots = [7, 6, 5, 4, 3, 2]
    assert r.batch_get_v1(keys, dst.indices(slots)) == [True, True, False, True, True, True]
    for i, slot in enumerate(slots):
        if i == 2:
            assert not dst.page(slot).any()  # the miss wrote nothing
        else:
            assert torch.equal(dst.page(slot), src.page(i))  # key i came from slot i
    # a second store of the same pages keeps them (NX) and reports success
    assert w.batch_set_v1([keys[i] for i in stored], src.indices(stored)) == [True] * 5


def test_wire_one_prefix_with_pin_one_mget_no_get(srv):
    pool = MHAHostPool(16)
    fill(pool.kv_buffer, 2)
    b = backend(srv, pool)
    keys = ["page-%d" % i for i in range(16)]
    assert b.batch_set_v1(keys, pool.indices(range(16))) == [True] * 16
    r = srv.client()
    r.config_resetstat()
    assert b.batch_exists(keys) == 16
    assert calls(srv, "kv.prefix") == 1
    assert r.info("fastpath")["leased_keys"] == 16  # PIN: the hits are leased
    pool.kv_buffer.zero_()  # load back into the same pool (host indices name its slots)
    assert b.batch_get_v1(keys, pool.indices(range(16))) == [True] * 16
    fresh = MHAHostPool(16)
    fill(fresh.kv_buffer, 2)
    assert torch.equal(pool.kv_buffer, fresh.kv_buffer)
    s = stats(srv)
    assert s["cmdstat_kv.mget"]["calls"] == 1, s
    assert "cmdstat_get" not in s and "cmdstat_kv.get" not in s and "cmdstat_mget" not in s
    assert r.info("fastpath")["leased_keys"] == 0  # loaded: the leases ended (KV.UNPIN)
    assert calls(srv, "kv.unpin") == 1


def test_staging_holds_a_whole_batch(srv):
    """The staging limit defaults to SGLang's largest batch (128 pages), so a batch is one
    KV.MGET per node: 8 MiB pages (Llama-3-8B: 32 layers x 8 KV heads x 128, bf16) -> 1 GiB."""
    pool = MHAHostPool(1, head_num=8, head_dim=128)
    assert pool.page_bytes() == 8 << 20
    b = backend(srv, pool)
    assert b.page_bytes() == 8 << 20
    assert b._link.kwargs["max_staging_bytes"] == 128 * (8 << 20)
    small = backend(srv, MHAHostPool(1, layer_num=2))
    assert small._link.kwargs["max_staging_bytes"] == 256 << 20
    given = backend(srv, pool, stratakv_max_staging_bytes=64 << 20)
    assert given._link.kwargs["max_staging_bytes"] == 64 << 20


def test_keys_carry_model_and_rank_and_mla_stores_one_copy(srv, redis_py):
    pool = MHAHostPool(2, layer_num=4)
    fill(pool.kv_buffer, 3)
    tp0 = backend(srv, pool, tp_rank=0, tp_size=2)
    tp1 = backend(srv, MHAHostPool(2, layer_num=4), tp_rank=1, tp_size=2)
    assert tp0.batch_set_v1(["abc"], pool.indices([0])) == [True]
    assert redis_py.keys("*") == [b"sglang:meta-llama-Llama-3.1-8B:abc:tp0of2"]
    assert redis_py.strlen("sglang:meta-llama-Llama-3.1-8B:abc:tp0of2") == pool.page_bytes()
    assert tp1.batch_exists(["abc"]) == 0  # another rank's heads: not this rank's page
    other = backend(srv, pool, model="Qwen/Qwen2.5-32B")
    assert other.batch_exists(["abc"]) == 0
    redis_py.flushall()
    # MLA: rank 0 writes (SGLang skips the backup on other ranks), every rank reads it
    mla = MLAHostPool(2, layer_num=4)
    fill(mla.kv_buffer, 4)
    m0 = backend(srv, mla, tp_rank=0, tp_size=4, mla=True)
    assert m0.batch_set_v1(["abc"], mla.indices([1])) == [True]
    assert redis_py.keys("*") == [b"sglang:meta-llama-Llama-3.1-8B:abc:mla"]
    for rank in (1, 2, 3):
        dst = MLAHostPool(2, layer_num=4)
        m = backend(srv, dst, tp_rank=rank, tp_size=4, mla=True)
        assert m.batch_exists(["abc"]) == 1
        assert m.batch_get_v1(["abc"], dst.indices([0])) == [True]
        assert torch.equal(dst.page(0), mla.page(1))


def test_value_of_another_size_is_a_miss(srv):
    small = MHAHostPool(2, layer_num=2)
    big = MHAHostPool(2, layer_num=4)
    fill(small.kv_buffer, 5)
    assert backend(srv, small).batch_set_v1(["k"], small.indices([0])) == [True]
    b = backend(srv, big)
    assert b.batch_get_v1(["k"], big.indices([0])) == [False]  # shorter than the page
    fill(big.kv_buffer, 6)
    assert backend(srv, big, model="other").batch_set_v1(["k"], big.indices([0])) == [True]
    # and a page larger than the window: the server refuses, nothing is written
    b2 = backend(srv, small, model="other")
    before = small.kv_buffer.clone()
    assert b2.batch_get_v1(["k"], small.indices([1])) == [False]
    assert torch.equal(small.kv_buffer, before)


def test_generic_calls_get_set_exists_clear_stats(srv, redis_py):
    pool = MHAHostPool(4, layer_num=2)
    fill(pool.kv_buffer, 7)
    b = backend(srv, pool)
    keys = ["g%d" % i for i in range(4)]
    # SGLang's generic path: flat data pages in, dummy pages filled out
    assert b.batch_set(keys, [pool.get_data_page(i * pool.page_size) for i in range(4)]) is True
    dummies = [pool.get_dummy_flat_data_page() for _ in keys]
    got = b.batch_get(keys + ["missing"], dummies + [pool.get_dummy_flat_data_page()])
    assert got[4] is None
    for i in range(4):
        assert got[i] is dummies[i] and torch.equal(got[i], pool.get_data_page(i * pool.page_size))
    assert b.exists("g0") and not b.exists("missing")
    t = torch.arange(100, dtype=torch.float32)
    assert b.set("one", t) is True
    u = torch.zeros(100, dtype=torch.float32)
    assert b.get("one", u) is u and torch.equal(u, t)
    raw = b.get("one")
    assert torch.equal(raw.view(torch.float32), t)
    assert b.get("missing") is None and b.get("missing", torch.zeros(1)) is None
    # addresses with sizes (Mooncake-style target_location/target_sizes)
    v = torch.zeros(100, dtype=torch.float32)
    assert b.get("one", v.data_ptr(), 400) is True and torch.equal(v, t)
    s = b.get_stats()
    assert set(s) == {"prefetch_pgs", "backup_pgs", "prefetch_bandwidth", "backup_bandwidth"}
    # clear: this model's and rank's pages go, other namespaces stay
    redis_py.set("unrelated", b"x")
    b.clear()
    assert redis_py.keys("*") == [b"unrelated"]
    assert b.batch_exists(keys) == 0


def test_pins_survive_an_eviction_storm():
    workdir = Path(tempfile.mkdtemp(prefix="stratakv-sglang-evict-"))
    sock = workdir / "s.sock"
    srv = harness.launch_server(unixsocket=str(sock), memory__capacity="64mb")
    srv.socket_path = str(sock)
    try:
        pool = MHAHostPool(8)  # 1 MiB pages (bf16, 64 tokens x 32 layers x K/V)
        fill(pool.kv_buffer, 8)
        pinned = backend(srv, pool, model="pinned")
        unpinned = backend(srv, pool, model="unpinned", stratakv_pin_ms=-1)
        keys = ["p%d" % i for i in range(4)]
        assert pinned.batch_set_v1(keys, pool.indices(range(4))) == [True] * 4
        assert unpinned.batch_set_v1(keys, pool.indices(range(4))) == [True] * 4
        assert pinned.batch_exists(keys) == 4      # leased for 10 s
        assert unpinned.batch_exists(keys) == 4    # no lease
        storm = backend(srv, pool, model="storm")
        for round_ in range(40):  # 40 x 4 MiB through a 64 MiB region
            ks = ["s%d-%d" % (round_, i) for i in range(4)]
            storm.batch_set_v1(ks, pool.indices(range(4, 8)))
        assert srv.client().info("stats")["evicted_keys"] > 0
        want = pool.kv_buffer[:, :4 * 64].clone()
        pool.kv_buffer.zero_()
        assert pinned.batch_get_v1(keys, pool.indices(range(4))) == [True] * 4
        assert torch.equal(pool.kv_buffer[:, :4 * 64], want)
        assert unpinned.batch_exists(keys) < 4     # the oldest unleased pages were evicted
    finally:
        harness.stop_servers(srv)
        shutil.rmtree(workdir, ignore_errors=True)


def test_server_restart_in_the_middle_gives_misses_not_exceptions():
    workdir = Path(tempfile.mkdtemp(prefix="stratakv-sglang-restart-"))
    sock = workdir / "s.sock"
    srv = harness.launch_server(unixsocket=str(sock))
    srv.socket_path = str(sock)
    try:
        pool = MHAHostPool(4, layer_num=4)
        fill(pool.kv_buffer, 9)
        b = backend(srv, pool)
        keys = ["r%d" % i for i in range(4)]
        assert b.batch_set_v1(keys, pool.indices(range(4))) == [True] * 4
        srv.stop()
        # every call while the server is away: a miss or False, nothing raised
        assert b.batch_exists(keys) == 0
        assert b.batch_get_v1(keys, pool.indices(range(4))) == [False] * 4
        assert b.batch_set_v1(keys, pool.indices(range(4))) == [False] * 4
        assert b.exists(keys[0]) is False
        assert b.get(keys[0]) is None
        assert b.batch_set(keys, [pool.get_data_page(0)] * 4) is False
        b.clear()
        srv.start()
        # back: memory-only keys were lost; the backend works again without being rebuilt
        assert b.batch_exists(keys) == 0
        assert b.batch_set_v1(keys, pool.indices(range(4))) == [True] * 4
        want = pool.kv_buffer.clone()
        pool.kv_buffer.zero_()
        assert b.batch_get_v1(keys, pool.indices(range(4))) == [True] * 4
        assert torch.equal(pool.kv_buffer, want)
    finally:
        harness.stop_servers(srv)
        shutil.rmtree(workdir, ignore_errors=True)


def test_server_down_at_start_then_up():
    workdir = Path(tempfile.mkdtemp(prefix="stratakv-sglang-late-"))
    sock = workdir / "s.sock"
    try:
        srv = harness.Server(unixsocket=str(sock))
        srv.socket_path = str(sock)
        pool = MHAHostPool(2, layer_num=2)
        fill(pool.kv_buffer, 10)
        b = backend(srv, pool)  # no server yet: constructed anyway, calls miss
        assert b.batch_exists(["a"]) == 0
        assert b.batch_set_v1(["a"], pool.indices([0])) == [False]
        srv.start()
        import time
        time.sleep(1.1)  # the link retries at most once a second
        assert b.batch_set_v1(["a"], pool.indices([0])) == [True]
        assert b.batch_exists(["a"]) == 1
        harness.stop_servers(srv)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
