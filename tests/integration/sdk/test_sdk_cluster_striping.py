"""stratakv (Python) on a cluster: striped values (put(..., stripes=N), docs/sdk.md "Striping")
over three stratakv primaries: one part per node, byte-exact, TTLs, a missing part is a miss,
concurrent puts of one key never mixed."""

import threading

import pytest

import stratakv
from sdk_cluster_util import (  # noqa: F401  (fixtures)
    MiB, cluster, info, key_slot, kv, pattern,
)


def part_keys(cluster, key):
    """Every node's part keys of `key` (and their node)."""
    found = []
    for i, srv in enumerate(cluster.nodes):
        for k in srv.client().keys("{*}%s#*" % key):
            found.append((k.decode(), i))
    return found


def test_striping_64_mib_over_three_nodes(cluster, kv):
    n = 64 * MiB
    src = kv.alloc_buffer(n)
    memoryview(src)[:] = pattern(n, 64)
    before = [info(srv, "fastpath")["kv_put_bytes"] for srv in cluster.nodes]
    assert kv.put("big", src, stripes=3)
    # One part per node (zero copy from registered memory), the manifest on the key's node.
    parts = part_keys(cluster, "big")
    assert sorted(i for _, i in parts) == [0, 1, 2]
    moved = [info(srv, "fastpath")["kv_put_bytes"] - before[i] for i, srv in enumerate(cluster.nodes)]
    assert sum(moved) - n == len(cluster.nodes[cluster.owner_of(key_slot("big"))].client().get("big"))
    assert min(moved) >= n // 3 - 2 * 4096  # parts are multiples of 4 KiB, the last shorter
    # Reads: into registered memory, into plain memory, of unknown length, in a batch.
    dst = kv.alloc_buffer(n + 10)
    assert kv.get_into("big", dst) == n
    assert memoryview(dst)[:n] == memoryview(src)
    plain = bytearray(n)
    assert kv.get_into("big", [memoryview(plain)[:1000], memoryview(plain)[1000:]]) == n
    assert plain == memoryview(src)
    assert kv.get("big") == bytes(memoryview(src))
    small = bytearray(100)
    assert kv.batch_get_into(["big", "nope"], [plain, small]) == [n, None]
    with pytest.raises(stratakv.Error, match=r"window of 1000 bytes is smaller than the value \(%d bytes\)" % n):
        kv.get_into("big", bytearray(1000))
    with pytest.raises(stratakv.Error, match=r"window of 10 bytes is smaller than the value \(%d bytes\)" % n):
        kv.get_into("big", bytearray(10))  # smaller than the manifest too
    # TTL: parts and manifest expire (stripe_ttl_ms by default), the manifest no later.
    r = cluster.nodes[cluster.owner_of(key_slot("big"))].client()
    part_ttls = [cluster.nodes[i].client().pttl(key) for key, i in parts]  # first: then the
    manifest_ttl = r.pttl("big")                                          # manifest's is later
    assert 0 < manifest_ttl <= min(part_ttls) and max(part_ttls) <= 3600 * 1000
    assert kv.put("big", src, stripes=3, ttl_ms=50000)
    assert 0 < r.pttl("big") <= 50000
    # A missing part is a miss, never a torn value.
    key, i = part_keys(cluster, "big")[0]
    for k, j in part_keys(cluster, "big"):
        if j == i and cluster.nodes[j].client().pttl(k) <= 50000:
            key = k
    assert cluster.nodes[i].client().delete(key) == 1
    assert kv.get("big") is None and kv.get_into("big", dst) is None
    assert kv.batch_get_into(["big"], [dst]) == [None]
    assert kv.exists("big")  # the manifest stays until it expires


def test_striping_small_values_stay_whole_and_batches_mix(cluster, kv):
    values = {"s:tiny": b"x" * 100, "s:8k": pattern(8192, 1), "s:mid": pattern(3 * MiB + 7, 2)}
    assert kv.batch_put(list(values), list(values.values()), stripes=4) == [True] * 3
    assert part_keys(cluster, "s:tiny") == []
    assert len(part_keys(cluster, "s:8k")) == 2 and len(part_keys(cluster, "s:mid")) == 4
    targets = [bytearray(len(v)) for v in values.values()]
    assert kv.batch_get_into(list(values), targets) == [len(v) for v in values.values()]
    assert [bytes(t) for t in targets] == list(values.values())
    # NX: the manifest is written with it.
    assert kv.put("s:mid", pattern(MiB, 3), stripes=2, nx=True) is False
    assert kv.get("s:mid") == values["s:mid"]
    # A plain put replaces a striped value (and the other way round).
    assert kv.put("s:mid", b"plain") and kv.get("s:mid") == b"plain"
    torch = pytest.importorskip("torch")
    t = torch.randn(64, 1024, dtype=torch.bfloat16)
    assert kv.put_tensor("s:tensor", t, stripes=3)
    assert torch.equal(kv.get_tensor("s:tensor"), t)


def test_concurrent_striped_puts_of_one_key_never_mix(cluster, kv):
    n = 4 * MiB
    a, b = b"\xaa" * n, b"\xbb" * n
    assert kv.put("race", a, stripes=3)
    stop = threading.Event()
    errors = []

    def writer(v):
        for _ in range(12):
            kv.put("race", v, stripes=3)

    def reader():
        out = bytearray(n)
        while not stop.is_set():
            try:
                got = kv.get_into("race", out)
                if got != n or (out != a and out != b):
                    errors.append((got, set(out)))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(v,)) for v in (a, b)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    assert kv.get("race") in (a, b)
