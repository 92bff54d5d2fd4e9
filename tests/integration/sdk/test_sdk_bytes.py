"""stratakv (Python): bytes, buffers and numpy arrays as raw values, over the Unix socket
(shm fast path) and over TCP (RESP); batches; mixing with redis-py; threads."""

import threading

import numpy as np
import pytest

import stratakv
from conftest import has_fast_path


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_transport(kv, url, redis_py):
    expected = "shm" if url.startswith("unix://") and has_fast_path(redis_py) else "resp"
    assert kv.transport == expected
    assert stratakv.Client(url, transport="resp").transport == "resp"
    with pytest.raises(ValueError):
        stratakv.Client(url, transport="rdma")


def test_verbs_transport_demanded_without_a_device_is_a_clear_error(url):
    # These machines have no RDMA device (ibv_get_device_list returns none).
    with pytest.raises(stratakv.Error, match="RDMA"):
        stratakv.Client(url, transport="verbs")


@pytest.mark.parametrize("n", [1, 100, 65537, 1 << 20, (33 << 20) + 5])
def test_bytes_round_trip(kv, redis_py, n):
    v = pattern(n, n)
    assert kv.put("b", v) is True
    assert kv.get("b") == v
    assert redis_py.get("b") == v
    target = bytearray(n + 3)
    assert kv.get_into("b", target) == n
    assert bytes(target[:n]) == v and target[n:] == b"\0\0\0"
    assert kv.get("missing") is None
    assert kv.get_into("missing", target) is None


def test_buffer_kinds(kv):
    v = pattern(5000, 1)
    for value in (v, bytearray(v), memoryview(v), np.frombuffer(v, np.uint8)):
        kv.put("k", value)
        assert kv.get("k") == v
    kv.put("pieces", [v[:10], memoryview(v)[10:4000], bytearray(v[4000:])])
    assert kv.get("pieces") == v
    a, b = bytearray(100), np.zeros(4900, np.uint8)
    assert kv.get_into("pieces", (a, b)) == 5000
    assert bytes(a) + b.tobytes() == v
    with pytest.raises(TypeError):
        kv.put("k", 12345)
    with pytest.raises(TypeError):
        kv.put(3, b"x")
    with pytest.raises(BufferError):
        kv.get_into("k", v)  # bytes are read-only


def test_numpy_raw(kv):
    for dtype in (np.float32, np.float16, np.int8, np.int64):
        a = (np.arange(3 * 7 * 5) % 113).astype(dtype).reshape(3, 7, 5)
        kv.put("np", a)
        out = np.empty_like(a)
        assert kv.get_into("np", out) == a.nbytes
        assert np.array_equal(out, a)
    with pytest.raises((ValueError, BufferError)):
        kv.put("np", np.arange(10)[::2])  # not contiguous


def test_registered_buffers(kv, url):
    buf = kv.alloc_buffer(1 << 20)
    assert len(buf) == 1 << 20
    assert buf.zero_copy == (kv.transport == "shm")
    mv = memoryview(buf)
    mv[:] = pattern(1 << 20, 2)
    assert kv.put("reg", buf)
    out = kv.alloc_buffer(1 << 20)
    assert kv.get_into("reg", out) == 1 << 20
    assert bytes(memoryview(out)) == bytes(mv)
    arr = kv.alloc_array((256, 1024), np.float32)
    arr[:] = 1.5
    assert kv.put("arr", arr)
    back = kv.alloc_array((256, 1024), np.float32)
    assert kv.get_into("arr", back) == arr.nbytes and np.all(back == 1.5)
    mine = bytearray(pattern(70000, 3))
    reg = kv.register_buffer(mine)
    assert reg.zero_copy is False and reg.address != 0
    assert kv.put("mine", reg) and kv.get("mine") == bytes(mine)


def test_batches(kv, redis_py):
    keys = ["batch:%d" % i for i in range(256)]
    values = [pattern(1 + (i * 7919) % 100000, i) for i in range(256)]
    assert kv.batch_put(keys, values) == [True] * 256
    targets = [bytearray(len(v)) for v in values]
    assert kv.batch_get_into(keys, targets) == [len(v) for v in values]
    assert all(bytes(t) == v for t, v in zip(targets, values))
    assert redis_py.get(keys[100]) == values[100]
    redis_py.delete(keys[3])
    assert kv.batch_exists(keys[:5]) == [True, True, True, False, True]
    targets[7] = bytearray(len(values[7]) - 1)
    with pytest.raises(stratakv.Error) as e:
        kv.batch_get_into(keys, targets)
    msg = "ERR window of %d bytes is smaller than the value (%d bytes)" % (len(values[7]) - 1, len(values[7]))
    assert str(e.value) == msg
    assert e.value.kind == "server" and e.value.key == keys[7].encode()
    assert e.value.results[3] is None and isinstance(e.value.results[7], stratakv.Error)
    assert e.value.results[8] == len(values[8])
    assert kv.batch_put(keys[:2], [b"x", b"y"], nx=True) == [False, False]
    assert kv.batch_remove(keys) == 255


def test_ttl_nx_exists_remove_prefix(kv, redis_py):
    assert kv.put("t", b"v", ttl_ms=200)
    assert 0 < redis_py.pttl("t") <= 200
    assert kv.put("t", b"w", nx=True) is False
    assert kv.exists("t") and kv.remove("t") and not kv.exists("t")
    for i in range(4):
        kv.put("c%d" % i, b"x")
    chain = ["c0", "c1", "c2", "c3", "c4", "c5"]
    assert kv.prefix_match(chain) == 4
    if has_fast_path(redis_py):
        assert kv.prefix_match(chain, pin_ms=1000) == 4
        assert kv.unpin(chain) == 4


def test_scan(kv, redis_py):
    for i in range(2500):  # several SCAN rounds (COUNT 1000)
        redis_py.set("ns:a:%d" % i, b"x")
    redis_py.set("ns:b:1", b"y")
    redis_py.set("n*s", b"z")
    keys = kv.scan("ns:a:*")
    assert len(keys) == 2500 and len(set(keys)) == 2500
    assert set(keys) == {b"ns:a:%d" % i for i in range(2500)}
    assert kv.scan("ns:b:?") == [b"ns:b:1"]
    assert kv.scan("n\\*s") == [b"n*s"]
    assert kv.scan("none:*") == []


def test_mixed_with_redis_py(kv, redis_py):
    redis_py.set("from-redis", b"\x00\x01payload" * 1000)
    assert kv.get("from-redis") == b"\x00\x01payload" * 1000
    kv.put(b"from-sdk", b"\xff" * 300000)
    assert redis_py.get("from-sdk") == b"\xff" * 300000


def test_threads(kv):
    errors = []

    def work(t):
        try:
            buf = kv.alloc_buffer(1 << 20)
            for i in range(30):
                v = pattern(1 + (t * 1000 + i * 7777) % (1 << 20), t * 100 + i)
                k = "th:%d:%d" % (t, i)
                kv.put(k, v)
                if kv.get(k) != v:
                    errors.append((k, "get"))
                n = kv.get_into(k, buf)
                if n != len(v) or bytes(memoryview(buf)[:n]) != v:
                    errors.append((k, "get_into"))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
