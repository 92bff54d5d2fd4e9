"""stratakv (Python): torch tensors and numpy arrays with dtype and shape, and errors that
carry the server's text."""

import numpy as np
import pytest
import torch

import stratakv
from conftest import tcp_url, unix_url
import harness

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8]
SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (1, 16, 8, 128), (2, 0, 3), (2, 2, 2, 2, 2, 2, 2)]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tensor_round_trip(kv, dtype, shape):
    t = make(shape, dtype, seed=len(shape))
    assert kv.put_tensor("t", t)
    u = kv.get_tensor("t")
    assert u.dtype == dtype and tuple(u.shape) == shape
    assert torch.equal(u, t)
    assert kv.get_tensor("missing") is None


def test_large_and_noncontiguous(kv):
    t = make((64, 1024, 128), torch.bfloat16)  # 16 MiB
    kv.put_tensor("big", t)
    assert torch.equal(kv.get_tensor("big"), t)
    kv.put_tensor("tr", t[:4].transpose(1, 2))  # copied to contiguous for the put
    assert torch.equal(kv.get_tensor("tr"), t[:4].transpose(1, 2))
    with pytest.raises(ValueError):
        kv.get_into("tr", torch.empty(4, 1024, 128, dtype=torch.bfloat16).transpose(1, 2))


def test_numpy_tensors(kv):
    for dtype in ("float32", "float16", "int8", "int64", "bool"):
        a = (np.arange(60) % 3).astype(dtype).reshape(3, 4, 5)
        kv.put_tensor("a", a)
        b = kv.get_ndarray("a")
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
        assert torch.equal(kv.get_tensor("a"), torch.from_numpy(a))
    kv.put_tensor("bf", make((4,), torch.bfloat16))
    with pytest.raises(TypeError):
        kv.get_ndarray("bf")
    kv.put("raw", b"not a tensor")
    with pytest.raises(ValueError):
        kv.get_tensor("raw")


@pytest.mark.parametrize("registered", [True, False], ids=["alloc_tensor", "torch.empty"])
def test_batch_tensors_into_caller_tensors(kv, registered):
    keys = ["layer:%d" % i for i in range(64)]
    ts = [make((2, 16, 8, 64), DTYPES[i % 4], seed=i) for i in range(64)]
    assert kv.batch_put_tensors(keys, ts) == [True] * 64
    if registered:
        outs = [kv.alloc_tensor(t.shape, t.dtype) for t in ts]
    else:
        outs = [torch.empty_like(t) for t in ts]
    lengths = kv.batch_get_tensors_into(keys, outs)
    assert all(n == 64 + t.numel() * t.element_size() for n, t in zip(lengths, ts))
    assert all(torch.equal(a, b) for a, b in zip(outs, ts))
    # raw tensors: stored as bytes, filled in place by batch_get_into
    assert kv.batch_put(keys, ts) == [True] * 64
    outs = [torch.zeros_like(t) for t in ts]
    assert kv.batch_get_into(keys, outs) == [t.numel() * t.element_size() for t in ts]
    assert all(torch.equal(a, b) for a, b in zip(outs, ts))
    # a missing key is None, the others still filled
    kv.batch_put_tensors(keys[:8], ts[:8])
    kv.remove(keys[5])
    outs = [torch.zeros_like(t) for t in ts[:8]]
    res = kv.batch_get_tensors_into(keys[:8], outs)
    assert res[5] is None and all(r is not None for i, r in enumerate(res) if i != 5)


def test_shape_mismatch(kv):
    kv.put_tensor("m", make((4, 8), torch.float32))
    with pytest.raises(stratakv.Error) as e:
        kv.batch_get_tensors_into(["m"], [torch.empty(8, 4)])
    assert e.value.kind == "usage" and "float32[4, 8]" in str(e.value)
    with pytest.raises(stratakv.Error) as e:
        kv.batch_get_tensors_into(["m"], [torch.empty(4, 4)])  # too small: the server refuses
    assert str(e.value) == "ERR window of 128 bytes is smaller than the value (192 bytes)"


def test_errors_carry_server_text(kv, start_server, tmp_path):
    kv.put("v", b"x" * 5000)
    with pytest.raises(stratakv.Error) as e:
        kv.get_into("v", bytearray(4096))
    assert str(e.value) == "ERR window of 4096 bytes is smaller than the value (5000 bytes)"
    assert e.value.kind == "server"
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client("http://nowhere")
    assert e.value.kind == "usage"
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client("redis://127.0.0.1:1", connect_timeout_ms=500)
    assert e.value.kind == "connection"
    sock = str(tmp_path / "s.sock")
    srv = start_server(unixsocket=sock, requirepass="secret", maxmemory="4mb",
                       maxmemory_policy="noeviction")
    srv.socket_path = sock
    for url in (unix_url(srv, "wrong"), tcp_url(srv, "wrong")):
        with pytest.raises(stratakv.Error) as e:
            stratakv.Client(url)
        assert str(e.value).startswith("WRONGPASS") and e.value.kind == "server"
    for url in (unix_url(srv, "secret"), tcp_url(srv, "secret")):
        c = stratakv.Client(url)
        with pytest.raises(stratakv.Error) as e:
            for i in range(16):
                c.put_tensor("oom:%d" % i, torch.zeros(1 << 18))  # 1 MiB each
        assert str(e.value).startswith("OOM ") and e.value.kind == "server"
        c.batch_remove(["oom:%d" % i for i in range(16)])
    harness.stop_servers(srv)
