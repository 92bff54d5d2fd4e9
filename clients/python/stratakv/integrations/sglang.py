"""SGLang HiCache L3 storage backend over stratakv.

    python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct \\
      --enable-hierarchical-cache --hicache-storage-backend dynamic \\
      --hicache-storage-backend-extra-config '{"backend_name": "stratakv",
        "module_path": "stratakv.integrations.sglang", "class_name": "StratakvHiCacheStorage",
        "interface_v1": 1, "stratakv_url": "unix:///run/stratakv.sock"}'

Follows SGLang's `HiCacheStorage` at commit 001067fffe33427bee0ed2f007fb7551a1d76b44
(python/sglang/srt/mem_cache/hicache_storage.py); derives from SGLang's class when it can be
imported, else from the stand-in in `_sglang_base` (same methods). See docs/connectors.md.

On the wire: `batch_exists` is one KV.PREFIX ... PIN (the hits are leased against eviction
until loaded), `batch_get_v1` one KV.MGET per node (KV.GET for one key), `batch_set_v1` one
KV.MPUT ... NX per node, over the shared-memory fast path on a unix:// URL (plain pipelined
GET/SET on redis://). A page is one value: the concatenation of the pieces SGLang's host pool
names for it (`get_page_buffer_meta`: K then V, or per layer), so K and V are never split by
eviction.

Keys: `<prefix><model>:<page hash>:<rank>`, prefix `sglang:` (stratakv_key_prefix), model the
model name with `/` as `-`, rank `tp<r>of<n>` (with `-pp<r>of<n>`, `-cp<r>of<n>` when those are
parallel) or `mla` for MLA models, whose ranks hold the same data: one copy, written by rank 0
(SGLang skips the backup on other ranks) and read by all.

Copies: the server reaches only memory the SDK can share with it (a memfd over shm), not
SGLang's pinned host pool, so a page moves through the connection's staging buffer: one
memcpy in this process between the staging buffer and the host pool, one in the server. With
RDMA (verbs) the host pool is registered with the NIC (`register_mem_pool_host`) and that copy
disappears.

Errors: a server that cannot be reached or fails a call makes that call miss (False, 0, None)
and logs a rate-limited warning; no exception reaches SGLang's prefetch or backup threads
(they are never restarted). Thread-safe: SGLang calls from several threads at once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import List

from . import _link
from ._memory import Regions, raw, tensor_span

try:  # SGLang's own interface when installed (its factory checks issubclass)
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig
    UPSTREAM = True
except Exception:  # noqa: BLE001 - not installed (or broken): our stand-in, same methods
    from ._sglang_base import HiCacheStorage, HiCacheStorageConfig
    UPSTREAM = False

log = logging.getLogger("stratakv.integrations.sglang")

UPSTREAM_VERSION = "sglang@001067fffe33427bee0ed2f007fb7551a1d76b44"
# SGLang's most pages per batched storage call (hicache_storage.STORAGE_BATCH_SIZE).
STORAGE_BATCH_SIZE = 128
__all__ = ["StratakvHiCacheStorage", "HiCacheStorage", "HiCacheStorageConfig", "UPSTREAM"]


def rank_suffix(cfg):
    """The key's rank part for a HiCacheStorageConfig: `mla` (one copy for all ranks) or
    `tp<r>of<n>`, plus pipeline and context-parallel parts when those are in use."""
    parts = ["mla" if cfg.is_mla_model else "tp%dof%d" % (cfg.tp_rank, cfg.tp_size)]
    if getattr(cfg, "pp_size", 1) > 1:
        parts.append("pp%dof%d" % (cfg.pp_rank, cfg.pp_size))
    if getattr(cfg, "attn_cp_size", 1) > 1:
        parts.append("cp%dof%d" % (cfg.attn_cp_rank, cfg.attn_cp_size))
    return "-".join(parts)


class _Stats:
    """Pages and bandwidth per call, drained by get_stats (as SGLang's StorageMetrics)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.prefetch_pgs, self.backup_pgs = [], []
        self.prefetch_bandwidth, self.backup_bandwidth = [], []

    def add(self, kind, pages, nbytes, seconds):
        gbps = nbytes / max(seconds, 1e-9) / (1 << 30)
        with self.lock:
            getattr(self, kind + "_pgs").append(pages)
            getattr(self, kind + "_bandwidth").append(gbps)

    def drain(self):
        with self.lock:
            out = (self.prefetch_pgs, self.backup_pgs, self.prefetch_bandwidth,
                   self.backup_bandwidth)
            self.prefetch_pgs, self.backup_pgs = [], []
            self.prefetch_bandwidth, self.backup_bandwidth = [], []
        return out


class StratakvHiCacheStorage(HiCacheStorage):
    """SGLang HiCache storage backend (HiCacheStorage, sglang@001067ff) on a stratakv server
    or cluster.

    StratakvHiCacheStorage(storage_config, kwargs=None): storage_config is SGLang's
    HiCacheStorageConfig; its extra_config carries the stratakv_* options (_link.py; the URL
    may come from STRATAKV_URL instead) and:
      stratakv_key_prefix   key namespace, default "sglang:"
      stratakv_pin_ms       lease of batch_exists hits, ms (0: the server's lease.ttl, 10 s
                            by default); -1: no lease
      stratakv_unpin        1 (default): batch_get_v1 ends the leases of the keys it loaded
      stratakv_ttl_ms       expiry of stored pages, ms (0: none; eviction decides)
    stratakv_max_staging_bytes defaults to SGLang's largest batch (128 pages of the registered
    pool, at least 256 MiB), so a batch is one KV.MGET per node.
    Raises ValueError when no URL is configured; never raises from the data calls."""

    def __init__(self, storage_config, kwargs=None):
        extra = dict(storage_config.extra_config or {})
        self.storage_config = storage_config
        self.extra_config = extra
        model = "-".join((storage_config.model_name or "").split("/"))
        self.prefix = "%s%s:" % (_link.option(extra, "key_prefix", "sglang:"), model)
        self.suffix = ":" + rank_suffix(storage_config)
        pin = _link.int_option(extra, "pin_ms", 0)
        self.pin_ms = None if pin is not None and pin < 0 else pin
        self.unpin_after_get = bool(_link.int_option(extra, "unpin", 1)) and self.pin_ms is not None
        self.ttl_ms = _link.int_option(extra, "ttl_ms", 0) or None
        if getattr(storage_config, "should_split_heads", False):
            log.warning("stratakv: tp_lcm_size (heterogeneous TP) is not supported: pages are "
                        "keyed by this rank's TP size")
        self.mem_pool_host = None
        self._regions = Regions()
        self._registered = []  # (ptr, size) of host pool buffers, registered on each Client
        self._buffers = []     # the Client's Buffer handles of them (kept alive)
        self._stats = _Stats()
        self._link = _link.Link(extra, on_connect=self._on_connect)
        # Connects in register_mem_pool_host (SGLang calls it right after construction), once
        # the page size is known, or else on first use.

    # ---- keys and memory ----------------------------------------------------------------
    def _key(self, key):
        return self.prefix + key + self.suffix

    def _keys(self, keys):
        return [self.prefix + k + self.suffix for k in keys]

    def _on_connect(self, client):
        self._buffers = []
        for ptr, size in self._registered:
            # Over verbs this registers the pool with the NIC (zero copy); over shm it only
            # names the memory (staged), at no cost. A failure only costs the copy.
            try:
                self._buffers.append(client.register_buffer(raw(ptr, size)))
            except Exception as e:  # noqa: BLE001
                log.warning("stratakv: registering %d bytes of the host pool failed (%s); "
                            "pages are staged", size, e)

    def register_mem_pool_host(self, mem_pool_host):
        """Remembers SGLang's host KV pool (its get_page_buffer_meta names each page's pieces)
        and registers its buffers once with the client."""
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        for t in _pool_tensors(mem_pool_host):
            ptr, size = tensor_span(t)
            if size > 0:
                self._regions.add(ptr, size)
                self._registered.append((ptr, size))
        # One KV.MGET per node for a whole batch: the staging buffer must hold SGLang's
        # largest batch (STORAGE_BATCH_SIZE pages); it grows to that only when used.
        try:
            page = self.page_bytes()
            if page:
                self._link.set_default("max_staging_bytes", max(256 << 20, STORAGE_BATCH_SIZE * page))
        except Exception as e:  # noqa: BLE001
            log.warning("stratakv: cannot size the staging buffer from the host pool: %s", e)
        c = self._link._client
        if c is not None:
            self._on_connect(c)
        else:
            self._link.client()  # connect now when possible (else on first use)

    def page_bytes(self):
        """Bytes of one page of the registered host pool (0 when unknown)."""
        import torch
        pool = self.mem_pool_host
        size = int(getattr(pool, "page_size", 0) or 0)
        if not size:
            return 0
        ptrs, sizes = pool.get_page_buffer_meta(torch.arange(size, dtype=torch.int64))
        return sizes * len(ptrs) if isinstance(sizes, int) else sum(int(x) for x in sizes)

    def _pages(self, keys, host_indices):
        """Each page's pieces (writable views of the host pool) and its byte length."""
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        if isinstance(sizes, int):
            sizes = [sizes] * len(ptrs)
        if not keys or len(ptrs) % len(keys) or len(sizes) != len(ptrs):
            raise ValueError("host pool named %d pieces for %d pages" % (len(ptrs), len(keys)))
        per = len(ptrs) // len(keys)
        pieces, lengths = [], []
        for i in range(len(keys)):
            ps = [self._regions.view(int(ptrs[j]), int(sizes[j])) for j in range(i * per, (i + 1) * per)]
            pieces.append(ps)
            lengths.append(sum(int(sizes[j]) for j in range(i * per, (i + 1) * per)))
        return pieces, lengths

    # ---- the page-based (v1) calls --------------------------------------------------------
    def batch_exists(self, keys, extra_info=None) -> int:
        """How many leading pages of `keys` the cache holds: one KV.PREFIX (per node on a
        cluster), leasing those pages for stratakv_pin_ms so they survive until loaded. 0 on
        any error."""
        if not keys:
            return 0
        return self._link.call("batch_exists", 0, lambda c: c.prefix_match(self._keys(keys), pin_ms=self.pin_ms))

    def batch_get_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        """Loads pages into the host pool at `host_indices` (page_size indices per key): one
        KV.MGET per node. True where the page was found whole; False for a miss, a value of
        another size, or any error."""
        n = len(keys)
        if n == 0:
            return []
        try:
            pieces, lengths = self._pages(keys, host_indices)
        except Exception as e:  # noqa: BLE001
            self._link.log.warn("layout", "stratakv: batch_get_v1: %s", e)
            return [False] * n
        full = self._keys(keys)
        t0 = time.perf_counter()
        got = self._link.batch("batch_get_v1", n, lambda c: c.batch_get_into(full, pieces))
        ok = [isinstance(g, int) and g == want for g, want in zip(got, lengths)]
        if self.unpin_after_get:
            self._link.call("unpin", 0, lambda c: c.unpin(full))
        self._stats.add("prefetch", sum(ok), sum(w for w, o in zip(lengths, ok) if o), time.perf_counter() - t0)
        return ok

    def batch_set_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        """Stores pages from the host pool at `host_indices`: one KV.MPUT ... NX per node (a
        page already stored is kept: same key, same content). True where the page is
        stored (now or before); False on any error."""
        n = len(keys)
        if n == 0:
            return []
        try:
            pieces, lengths = self._pages(keys, host_indices)
        except Exception as e:  # noqa: BLE001
            self._link.log.warn("layout", "stratakv: batch_set_v1: %s", e)
            return [False] * n
        t0 = time.perf_counter()
        put = self._link.batch("batch_set_v1", n, lambda c: c.batch_put(
            self._keys(keys), pieces, ttl_ms=self.ttl_ms, nx=True))
        ok = [p is not None for p in put]
        self._stats.add("backup", sum(ok), sum(w for w, o in zip(lengths, ok) if o), time.perf_counter() - t0)
        return ok

    # ---- the generic calls (SGLang without "interface_v1": flat data pages) ---------------
    def get(self, key, target_location=None, target_sizes=None) -> torch.Tensor | None:  # noqa: F821
        """One value. target_location: a tensor (or list of tensors) filled in place and
        returned when the value fills it exactly; an address (int, or a list with
        target_sizes): True when filled exactly, else None; None: the value as a new uint8
        tensor. None for a miss or any error."""
        return self.batch_get([key], None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])[0]

    def batch_get(self, keys, target_locations=None, target_sizes=None) -> List[torch.Tensor | None] | int:  # noqa: F821,E501
        """Many values in one KV.MGET per node; each as `get` returns it."""
        n = len(keys)
        if n == 0:
            return []
        if target_locations is None:
            import torch
            out = []
            for k in keys:
                arr = self._link.call("get", None, lambda c, k=k: c._get_uint8(self._key(k)))
                out.append(None if arr is None else torch.from_numpy(arr))
            return out
        try:
            targets = [_targets(t, s, self._regions) for t, s in
                       zip(target_locations, target_sizes or [None] * n)]
        except Exception as e:  # noqa: BLE001
            self._link.log.warn("layout", "stratakv: batch_get: %s", e)
            return [None] * n
        got = self._link.batch("batch_get", n, lambda c: c.batch_get_into(self._keys(keys), [t[0] for t in targets]))
        out = []
        for g, (pieces, length, result) in zip(got, targets):
            out.append(result if isinstance(g, int) and g == length else None)
        return out

    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        """Stores one value: `value` (tensor, bytes, or a list of them), or the memory at
        target_location (tensor or address with target_sizes). Overwrites. False on error."""
        return self.batch_set([key], None if value is None else [value],
                              None if target_location is None else [target_location],
                              None if target_sizes is None else [target_sizes])

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        """Stores many values in one KV.MPUT per node; True when every key was stored."""
        n = len(keys)
        if n == 0:
            return False
        try:
            if values is not None:
                pieces = [v if isinstance(v, (list, tuple)) else _contiguous(v) for v in values]
            else:
                pieces = [_targets(t, s, self._regions)[0] for t, s in
                          zip(target_locations, target_sizes or [None] * n)]
        except Exception as e:  # noqa: BLE001
            self._link.log.warn("layout", "stratakv: batch_set: %s", e)
            return False
        put = self._link.batch("batch_set", n, lambda c: c.batch_put(self._keys(keys), pieces, ttl_ms=self.ttl_ms))
        return all(p is True for p in put)

    def exists(self, key) -> bool:
        """Whether the page is stored (EXISTS); False on error."""
        return bool(self._link.call("exists", False, lambda c: c.exists(self._key(key))))

    def clear(self) -> None:
        """Deletes this rank's pages of this model (SCAN MATCH on every node, then DEL)."""
        pattern = _link.glob_escape(self.prefix) + "*" + _link.glob_escape(self.suffix)

        def run(c):
            keys = c.scan(pattern)
            for i in range(0, len(keys), 1000):
                c.batch_remove(keys[i:i + 1000])
            return len(keys)
        n = self._link.call("clear", 0, run)
        log.info("stratakv: clear removed %d pages (%s)", n, pattern)

    def get_stats(self):
        """Pages and GB/s of the loads and stores since the last call: SGLang's StorageMetrics
        when SGLang is installed, else a dict with the same fields."""
        pre, back, pre_bw, back_bw = self._stats.drain()
        try:
            from sglang.srt.observability.metrics_collector import StorageMetrics
        except Exception:  # noqa: BLE001
            return {"prefetch_pgs": pre, "backup_pgs": back, "prefetch_bandwidth": pre_bw,
                    "backup_bandwidth": back_bw}
        m = StorageMetrics()
        m.prefetch_pgs.extend(pre)
        m.backup_pgs.extend(back)
        m.prefetch_bandwidth.extend(pre_bw)
        m.backup_bandwidth.extend(back_bw)
        return m

    def close(self):
        """Drops the client (SGLang calls this when the backend is detached)."""
        self._buffers = []
        self._link.close()


def _pool_tensors(pool):
    """The host pool's big buffers (to slice page pointers from): kv_buffer (a tensor or a
    list of tensors) and any hybrid-pool buffers."""
    found = []
    getter = getattr(pool, "get_hybrid_pool_buffer", None)
    bufs = getter() if callable(getter) else [getattr(pool, "kv_buffer", None)]
    for b in bufs:
        if isinstance(b, (list, tuple)):
            found.extend(x for x in b if hasattr(x, "data_ptr"))
        elif hasattr(b, "data_ptr"):
            found.append(b)
    return found


def _contiguous(t):
    if hasattr(t, "is_contiguous") and not t.is_contiguous():
        return t.contiguous()
    return t


def _targets(location, sizes, regions):
    """(pieces, total bytes, what get returns on success) for a target: a tensor, a list of
    tensors, or an address (list) with its size(s)."""
    if hasattr(location, "data_ptr"):
        return [location], location.numel() * location.element_size(), location
    if isinstance(location, (list, tuple)) and location and hasattr(location[0], "data_ptr"):
        return list(location), sum(t.numel() * t.element_size() for t in location), location
    ptrs = list(location) if isinstance(location, (list, tuple)) else [location]
    szs = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes] * len(ptrs)
    pieces = [regions.view(int(p), int(s)) for p, s in zip(ptrs, szs)]
    return pieces, sum(int(s) for s in szs), True
