"""stratakv.integrations against the engines' interfaces as transcribed in
upstream_interfaces.py (SGLang's HiCacheStorage, LMCache's RemoteConnector, at the commits
named there): method names, parameters, async or not, return annotations; and the engines'
loaders (SGLang's "dynamic" backend, LMCache's external:// connector) emulated step by step."""

import asyncio
import importlib
import inspect
from urllib.parse import parse_qs, urlparse

import pytest

import upstream_interfaces as up
from stratakv.integrations import _lmcache_base, _sglang_base, lmcache, sglang


def signature_of(fn):
    """(parameters after self, async?, return annotation) as the tables write them."""
    sig = inspect.signature(fn)
    params = []
    for p in list(sig.parameters.values())[1:]:
        params.append(p.name if p.default is inspect.Parameter.empty else "%s=%r" % (p.name, p.default))
    ret = sig.return_annotation
    ret = None if ret is inspect.Signature.empty else str(ret)
    return tuple(params), inspect.iscoroutinefunction(fn), ret


def norm(entry):
    params, is_async, ret = entry
    return tuple(params), is_async, None if ret is None else ret.replace(" ", "")


def norm_sig(fn):
    return norm(signature_of(fn))


def public_methods(cls):
    return {name for name, v in vars(cls).items()
            if callable(v) and (not name.startswith("_") or name == "__repr__")}


@pytest.mark.parametrize("base, table, abstract", [
    (_sglang_base.HiCacheStorage, up.SGLANG_HICACHE_STORAGE, up.SGLANG_ABSTRACT),
    (_lmcache_base.RemoteConnector, up.LMCACHE_REMOTE_CONNECTOR, up.LMCACHE_ABSTRACT),
], ids=[up.SGLANG_VERSION, up.LMCACHE_VERSION])
def test_stand_in_bases_have_the_upstream_method_set(base, table, abstract):
    assert public_methods(base) == set(table)
    for name, entry in table.items():
        assert norm_sig(getattr(base, name)) == norm(entry), name
    assert set(base.__abstractmethods__) == abstract


def test_stand_in_remote_connector_attributes():
    for name, value in up.LMCACHE_ATTRIBUTES.items():
        assert getattr(_lmcache_base.RemoteConnector, name) == value, name


@pytest.mark.parametrize("cls, base, table, implemented", [
    (sglang.StratakvHiCacheStorage, sglang.HiCacheStorage, up.SGLANG_HICACHE_STORAGE,
     up.SGLANG_IMPLEMENTED),
    (lmcache.StratakvConnector, lmcache.RemoteConnector, up.LMCACHE_REMOTE_CONNECTOR,
     up.LMCACHE_IMPLEMENTED),
], ids=["sglang", "lmcache"])
def test_connectors_implement_the_interface(cls, base, table, implemented):
    assert issubclass(cls, base)
    assert not inspect.isabstract(cls)
    for name, entry in table.items():
        fn = getattr(cls, name)
        assert norm_sig(fn) == norm(entry), name
        if name in implemented:
            assert name in vars(cls), "%s.%s is inherited, not implemented" % (cls.__name__, name)


def test_upstream_flags_and_versions():
    # Without the engines installed (CI machines have neither), the stand-ins are the bases;
    # with them, the engines' own classes are (and the test above checks them too).
    assert (sglang.HiCacheStorage is _sglang_base.HiCacheStorage) == (not sglang.UPSTREAM)
    assert (lmcache.RemoteConnector is _lmcache_base.RemoteConnector) == (not lmcache.UPSTREAM)
    assert sglang.UPSTREAM_VERSION == up.SGLANG_VERSION == _sglang_base.UPSTREAM_VERSION
    assert lmcache.UPSTREAM_VERSION == up.LMCACHE_VERSION == _lmcache_base.UPSTREAM_VERSION


def test_sglang_dynamic_loader(sdk_server, monkeypatch):
    """SGLang's StorageBackendFactory._create_dynamic_backend, step by step: the extra config
    names backend_name, module_path, class_name; the class must subclass HiCacheStorage and
    is called as cls(storage_config, kwargs); then register_mem_pool_host."""
    from engine_doubles import MHAHostPool, storage_config
    cfg = storage_config(None)
    monkeypatch.setenv("STRATAKV_URL", "unix://" + sdk_server.socket_path)  # URL from the env
    extra = cfg.extra_config
    for field in ("backend_name", "module_path", "class_name"):
        assert field in extra
    cls = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
    assert issubclass(cls, sglang.HiCacheStorage)
    backend = cls(cfg, {})
    pool = MHAHostPool(2, layer_num=2)
    backend.register_mem_pool_host(pool)
    assert bool(extra.get("interface_v1", 0))  # SGLang then calls batch_get_v1/batch_set_v1
    assert backend.batch_set_v1(["h0"], pool.indices([0])) == [True]
    assert backend.batch_exists(["h0", "h1"]) == 1


def test_sglang_needs_a_url(monkeypatch):
    from engine_doubles import storage_config
    monkeypatch.delenv("STRATAKV_URL", raising=False)
    with pytest.raises(ValueError, match="STRATAKV_URL"):
        sglang.StratakvHiCacheStorage(storage_config(None), {})


def test_lmcache_external_loader(sdk_server):
    """LMCache's ExternalConnectorAdapter.create_connector, step by step."""
    from engine_doubles import LMCacheConfig, LocalCPUBackend
    url = "external://localhost:0/stratakv.integrations.lmcache/?connector_name=StratakvConnector"
    parsed = urlparse(url)
    module_path = parsed.path.strip("/")
    connector_name = parse_qs(parsed.query)["connector_name"][0]
    cls = getattr(importlib.import_module(module_path), connector_name)
    assert issubclass(cls, lmcache.RemoteConnector)
    config = LMCacheConfig(url, {"stratakv_url": "unix://" + sdk_server.socket_path})

    async def main():
        conn = cls(loop=asyncio.get_running_loop(), local_cpu_backend=LocalCPUBackend(),
                   config=config)
        assert await conn.ping() == 0
        await conn.close()
    asyncio.run(main())


def test_lmcache_plugin_adapter(sdk_server):
    """LMCache's plugin route: the adapter parses stratakv:// URLs and makes the connector."""
    from engine_doubles import LMCacheConfig, LocalCPUBackend
    adapter = lmcache.StratakvConnectorAdapter()
    assert isinstance(adapter, lmcache.ConnectorAdapter)
    assert adapter.can_parse("stratakv://127.0.0.1:%d" % sdk_server.port)
    assert not adapter.can_parse("redis://127.0.0.1:6379")

    class Context:
        url = "stratakv://127.0.0.1:%d" % sdk_server.port
        loop = None
        local_cpu_backend = LocalCPUBackend()
        config = LMCacheConfig(url, {})
    conn = adapter.create_connector(Context)
    assert conn._link.url == "redis://127.0.0.1:%d" % sdk_server.port
    assert conn.exists_sync("nothing") is False
