"""LMCache remote connector over stratakv (and so vLLM's KV cache through LMCache).

LMCache loads it through its external-connector route (no new URL scheme, no patch):

    remote_url: "external://localhost:0/stratakv.integrations.lmcache/?connector_name=StratakvConnector"
    remote_serde: "naive"
    extra_config:
      stratakv_url: "unix:///run/stratakv.sock"

or through its plugin route (`remote_storage_plugins`, see docs/connectors.md) with
`StratakvConnectorAdapter` and a `stratakv://host:port` remote_url.

Follows LMCache's `RemoteConnector` at commit 01712fbd51d033060d6a8851c06de0ebf351f74e
(lmcache/v1/storage_backend/connector/base_connector.py); derives from LMCache's class when it
can be imported, else from the stand-in in `_lmcache_base` (same methods).

One key per chunk, `<prefix><LMCache key string>` (prefix `lmcache:`), holding a 64-byte
header (shape, dtype, format, length; `_chunk_format`) and the chunk's bytes together, so
eviction never leaves half a chunk. On the wire: `batched_async_contains` is one KV.PREFIX
(with PIN when LMCache asks for a pin), `batched_get`/`batched_get_non_blocking` one KV.MGET
per node, `batched_put` one KV.MPUT per node. MLA models: LMCache's remote backend already
maps every worker to worker 0's keys (one copy); nothing to do here.

Copies: as for SGLang (docs/connectors.md): LMCache's pinned CPU buffers are not memory the
server can map over shm, so each chunk passes the connection's staging buffer (one memcpy in
this process, one in the server). A get allocates the chunk from LMCache's CPU backend with the
shape of the largest chunk seen so far and reads straight into it; a smaller (last, partial)
chunk is then copied into an object of its own shape.

Errors: a failed call is a miss (None, False, 0) with a rate-limited warning, never an
exception in LMCache's event loop. Async methods run the SDK's blocking calls on a thread pool
of the connector (the SDK releases the GIL), so LMCache's loop keeps running. Thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional
from urllib.parse import urlparse

import stratakv

from . import _chunk_format as fmt
from . import _link

try:  # LMCache's own interface when installed (its external adapter checks issubclass)
    from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
    UPSTREAM = True
except Exception:  # noqa: BLE001 - not installed: our stand-in, same methods
    from ._lmcache_base import RemoteConnector
    UPSTREAM = False
try:
    from lmcache.v1.storage_backend.connector import ConnectorAdapter
except Exception:  # noqa: BLE001
    from ._lmcache_base import ConnectorAdapter
try:
    from lmcache.v1.memory_management import MemoryFormat as _MemoryFormat
except Exception:  # noqa: BLE001
    _MemoryFormat = None

log = logging.getLogger("stratakv.integrations.lmcache")

UPSTREAM_VERSION = "lmcache@01712fbd51d033060d6a8851c06de0ebf351f74e"
__all__ = ["StratakvConnector", "StratakvConnectorAdapter", "RemoteConnector", "UPSTREAM"]

_PING_KEY = "stratakv:ping"


def key_string(key):
    """LMCache's key as a string (CacheEngineKey.to_string(), or a str as is)."""
    return key if isinstance(key, str) else key.to_string()


def _url_from_remote_url(config):
    """redis://host:port from an external:// or stratakv:// remote_url naming a port."""
    remote = getattr(config, "remote_url", None) or ""
    if not remote.startswith(("external://", "stratakv://")):
        return None
    u = urlparse(remote)
    if u.hostname and u.port:
        return "redis://%s:%d" % (u.hostname, u.port)
    return None


class _Layout:
    """The shape, dtype and format of the largest chunk seen (full chunks are the largest)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.best = None  # (nbytes, shape, dtype, fmt int)

    def learn(self, shape, dtype, fmt_int, nbytes):
        if dtype is None:
            return
        with self.lock:
            if self.best is None or nbytes > self.best[0]:
                self.best = (nbytes, tuple(shape), dtype, fmt_int)

    def get(self):
        with self.lock:
            return self.best


class StratakvConnector(RemoteConnector):
    """LMCache RemoteConnector (lmcache@01712fbd) on a stratakv server or cluster.

    StratakvConnector(loop=None, local_cpu_backend=None, config=None, url=None): as LMCache's
    external adapter calls it. The server URL is `url`, else stratakv_url in
    config.extra_config (or STRATAKV_URL), else redis://host:port of the remote_url when it
    names a port. Other options (extra_config): the stratakv_* keys of _link.py and
      stratakv_key_prefix   key namespace, default "lmcache:"
      stratakv_pin_ms       lease of pinned lookups, ms (0: the server's lease.ttl)
      stratakv_ttl_ms       expiry of stored chunks, ms (0: none)
    Raises ValueError when no URL is found; the data calls never raise."""

    def __init__(self, loop=None, local_cpu_backend=None, config=None, url=None):
        extra = dict(getattr(config, "extra_config", None) or {})
        url = url or _link.option(extra, "url") or _url_from_remote_url(config)
        if url:
            extra["stratakv_url"] = url
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.prefix = _link.option(extra, "key_prefix", "lmcache:")
        self.pin_ms = _link.int_option(extra, "pin_ms", 0)
        self.ttl_ms = _link.int_option(extra, "ttl_ms", 0) or None
        self._link = _link.Link(extra)
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, _link.int_option(extra, "max_connections", 8)),
            thread_name_prefix="stratakv-lmcache")
        self._layout = _Layout()
        self._link.client()  # connect now when possible (else on first use)

    # ---- helpers --------------------------------------------------------------------------
    def _k(self, key):
        return self.prefix + key_string(key)

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _alloc(self, shape, dtype, fmt_int):
        import torch
        f = _MemoryFormat(fmt_int) if _MemoryFormat is not None else fmt_int
        try:
            return self.local_cpu_backend.allocate(torch.Size(shape), dtype, f)
        except Exception as e:  # noqa: BLE001
            self._link.log.warn("alloc", "stratakv: LMCache could not allocate a chunk: %s", e)
            return None

    @staticmethod
    def _bytes_of(obj):
        """A flat uint8 tensor over the memory object's bytes."""
        import torch
        return obj.tensor.reshape(-1).view(torch.uint8)

    @staticmethod
    def _release(obj):
        if obj is not None:
            try:
                obj.ref_count_down()
            except Exception:  # noqa: BLE001
                pass

    def _encode(self, obj):
        """[header, payload] for a memory object; learns its layout."""
        fmt_obj = obj.get_memory_format()
        fmt_int = int(getattr(fmt_obj, "value", fmt_obj))
        t = obj.tensor
        if t is not None:
            t = t if t.is_contiguous() else t.contiguous()
            nbytes = t.numel() * t.element_size()
            payload, dtype, shape = t, obj.get_dtype(), obj.get_shape()
        else:  # a bytes object (serialized chunks): stored as raw bytes
            payload = obj.byte_array
            nbytes = len(memoryview(payload).cast("B"))
            dtype, shape = None, (nbytes,)
        self._layout.learn(shape, dtype, fmt_int, nbytes)
        head = fmt.encode(shape, dtype, fmt_int, nbytes)
        return [head, payload] if nbytes else [head]

    def _finish(self, obj, head, got, layout):
        """The memory object of a value read into `obj` (allocated with `layout`): `obj`
        itself when the value has that layout, else a new object of the value's own shape
        (a partial chunk) with its bytes copied; None when the value is not a chunk."""
        try:
            shape, dtype, fmt_int, length = fmt.decode(head)
        except ValueError as e:
            self._release(obj)
            self._link.log.warn("format", "stratakv: %s", e)
            return None
        if got != fmt.HEADER + length or dtype is None:
            self._release(obj)
            return None
        if tuple(shape) == layout[1] and dtype == layout[2] and fmt_int == layout[3]:
            return obj
        other = self._alloc(shape, dtype, fmt_int)
        if other is not None:
            self._bytes_of(other)[:length].copy_(self._bytes_of(obj)[:length])
            self._layout.learn(shape, dtype, fmt_int, length)
        self._release(obj)
        return other

    def _get_unknown(self, full_key):
        """A chunk of unknown layout: read whole (SDK get), then copied into a new object."""
        import torch
        arr = self._link.call("get", None, lambda c: c._get_uint8(full_key))
        if arr is None:
            return None
        try:
            shape, dtype, fmt_int, length = fmt.decode(arr)
        except ValueError as e:
            self._link.log.warn("format", "stratakv: %s: %s", full_key, e)
            return None
        if dtype is None or len(arr) != fmt.HEADER + length:
            return None
        obj = self._alloc(shape, dtype, fmt_int)
        if obj is None:
            return None
        self._bytes_of(obj).copy_(torch.from_numpy(arr[fmt.HEADER:]))
        self._layout.learn(shape, dtype, fmt_int, length)
        return obj

    def _get_many(self, keys):
        """[MemoryObj | None] for `keys`: one KV.MGET per node into objects allocated with the
        known layout; keys whose value does not fit it are read again one by one."""
        n = len(keys)
        full = [self._k(k) for k in keys]
        layout = self._layout.get()
        if layout is None:
            return [self._get_unknown(k) for k in full]
        objs = [self._alloc(layout[1], layout[2], layout[3]) for _ in range(n)]
        heads = [bytearray(fmt.HEADER) for _ in range(n)]
        idx = [i for i in range(n) if objs[i] is not None]
        targets = [[heads[i], objs[i].tensor] for i in idx]
        got = self._link.batch("batched_get", len(idx), lambda c: c.batch_get_into(
            [full[i] for i in idx], targets), keep_errors=True)
        out = [None] * n
        for i, g in zip(idx, got):
            if isinstance(g, int):
                out[i] = self._finish(objs[i], heads[i], g, layout)
                continue
            self._release(objs[i])
            if isinstance(g, stratakv.Error) and "smaller than the value" in str(g):
                out[i] = self._get_unknown(full[i])  # a chunk larger than any seen before
        return out

    def _put_many(self, keys, objs):
        values = [self._encode(o) for o in objs]
        full = [self._k(k) for k in keys]
        return self._link.batch("put", len(full), lambda c: c.batch_put(full, values, ttl_ms=self.ttl_ms))

    def _prefix(self, keys, pin):
        full = [self._k(k) for k in keys]
        pin_ms = self.pin_ms if pin else None
        return self._link.call("contains", 0, lambda c: c.prefix_match(full, pin_ms=pin_ms))

    # ---- RemoteConnector --------------------------------------------------------------------
    async def exists(self, key) -> bool:
        """Whether the chunk is stored (EXISTS); False on error."""
        return await self._run(self.exists_sync, key)

    def exists_sync(self, key) -> bool:
        """exists, blocking."""
        return bool(self._link.call("exists", False, lambda c: c.exists(self._k(key))))

    async def get(self, key) -> Optional[MemoryObj]:  # noqa: F821
        """The chunk as a MemoryObj from LMCache's CPU backend, or None (miss, error)."""
        return (await self._run(self._get_many, [key]))[0]

    async def put(self, key, memory_obj):
        """Stores the chunk (header and bytes in one key); errors are logged, not raised.
        Leaves the object's reference count alone, as LMCache's own redis connector at this
        commit does (its remote backend takes and drops its reference around serialization)."""
        await self._run(self._put_many, [key], [memory_obj])

    async def list(self) -> List[str]:
        """Every chunk key stored under this connector's prefix (SCAN on every node)."""
        pattern = _link.glob_escape(self.prefix) + "*"
        keys = await self._run(lambda: self._link.call("list", [], lambda c: c.scan(pattern)))
        n = len(self.prefix)
        return [k.decode("utf-8", "replace")[n:] for k in keys]

    async def close(self):
        """Drops the client and the connector's threads."""
        self._executor.shutdown(wait=False)
        self._link.close()

    def support_ping(self) -> bool:
        return True

    async def ping(self) -> int:
        """0 when the server answers, 1 otherwise (LMCache's remote monitor polls this)."""
        r = await self._run(lambda: self._link.call("ping", None, lambda c: c.exists(_PING_KEY)))
        return 0 if r is not None else 1

    def support_batched_get(self) -> bool:
        return True

    async def batched_get(self, keys) -> List[Optional[MemoryObj]]:  # noqa: F821
        """The chunks of `keys` (None where missing): one KV.MGET per node."""
        return await self._run(self._get_many, list(keys))

    def support_batched_put(self) -> bool:
        return True

    async def batched_put(self, keys, memory_objs):
        """Stores the chunks: one KV.MPUT per node."""
        await self._run(self._put_many, list(keys), list(memory_objs))

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id, keys, pin=False) -> int:
        """How many leading chunks of `keys` are stored: one KV.PREFIX (per node), leasing
        them for stratakv_pin_ms when `pin`. 0 on error. The leases end at their deadline (or
        when this connector closes): vLLM looks up in its scheduler and loads in its workers,
        whose connections cannot end another connection's leases."""
        return await self._run(self._prefix, list(keys), pin)

    def support_batched_get_non_blocking(self) -> bool:
        return True

    async def batched_get_non_blocking(self, lookup_id, keys) -> List[MemoryObj]:  # noqa: F821
        """The leading chunks of `keys` that could be read (stops at the first miss; the
        objects after it are released): one KV.MGET per node."""
        objs = await self._run(self._get_many, list(keys))
        out = []
        for i, o in enumerate(objs):
            if o is None:
                for rest in objs[i + 1:]:
                    self._release(rest)
                break
            out.append(o)
        return out

    def remove_sync(self, key) -> bool:
        """Deletes the chunk; False when it was absent or on error."""
        return bool(self._link.call("remove", False, lambda c: c.remove(self._k(key))))

    def batched_contains(self, keys, stop_after_first_not_exits=True) -> List[bool]:
        """Per key, whether it is stored: one KV.PREFIX (the leading run) when stopping after
        the first miss, else pipelined EXISTS. All False on error."""
        keys = list(keys)
        if stop_after_first_not_exits:
            n = self._prefix(keys, False)
            return [True] * n + [False] * (len(keys) - n)
        full = [self._k(k) for k in keys]
        return self._link.call("contains", [False] * len(keys), lambda c: c.batch_exists(full))

    def support_batched_contains(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<StratakvConnector %s>" % self._link.url


class StratakvConnectorAdapter(ConnectorAdapter):
    """LMCache ConnectorAdapter for the plugin route (`remote_storage_plugins`): parses
    `stratakv://host:port` remote URLs (or any stratakv:// URL when stratakv_url is in the
    extra config) and makes a StratakvConnector."""

    def __init__(self) -> None:
        super().__init__("stratakv://")

    def create_connector(self, context):
        return StratakvConnector(loop=context.loop, local_cpu_backend=context.local_cpu_backend,
                                 config=context.config)
