"""A stand-in for SGLang's HiCache storage interface, used when SGLang is not installed.

`stratakv.integrations.sglang` derives from SGLang's own `HiCacheStorage` when it can import
it; otherwise from the `HiCacheStorage` here, which has the same method set, parameters and
return annotations as SGLang's at commit 001067fffe33427bee0ed2f007fb7551a1d76b44
(python/sglang/srt/mem_cache/hicache_storage.py), so the backend can be imported, tested and
driven without SGLang. Written for stratakv; it only mirrors the interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import List, Optional


@dataclass
class HiCacheStorageConfig:
    """What SGLang hands a storage backend (the same fields as SGLang's dataclass)."""
    tp_rank: int
    tp_size: int
    pp_rank: int
    pp_size: int
    attn_cp_rank: int
    attn_cp_size: int
    is_mla_model: bool
    enable_storage_metrics: bool
    is_page_first_layout: bool
    model_name: Optional[str]
    dp_rank: int = 0
    dp_size: int = 1
    tp_lcm_size: Optional[int] = None
    should_split_heads: bool = False
    extra_config: Optional[dict] = None


@dataclass
class HiCacheStorageExtraInfo:
    """Per-call hints SGLang passes to batch calls (prefix keys of the request, free-form)."""
    prefix_keys: Optional[List[str]] = None
    extra_info: Optional[dict] = None


class HiCacheStorage(ABC):
    """SGLang's L3 storage interface: get/set of pages by key, existence as a prefix length,
    and the page-based v1 calls into the registered host memory pool."""

    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        if not hasattr(self, "registered_pools"):
            self.registered_pools = {}
        self.registered_pools[host_pool_name] = host_pool

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None) -> PoolTransferResult:  # noqa: F821
        raise NotImplementedError()

    def batch_get_v2(self, transfers, extra_info=None) -> dict[str, List[bool]]:
        raise NotImplementedError()

    def batch_set_v2(self, transfers, extra_info=None) -> dict[str, List[bool]]:
        raise NotImplementedError()

    def batch_get_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        raise NotImplementedError()

    def batch_set_v1(self, keys, host_indices, extra_info=None) -> List[bool]:
        raise NotImplementedError()

    @abstractmethod
    def get(self, key, target_location=None, target_sizes=None) -> torch.Tensor | None:  # noqa: F821
        pass

    @abstractmethod
    def batch_get(self, keys, target_locations=None, target_sizes=None) -> List[torch.Tensor | None] | int:  # noqa: F821,E501
        pass

    @abstractmethod
    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        pass

    @abstractmethod
    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        pass

    @abstractmethod
    def exists(self, key) -> bool:
        pass

    def batch_exists(self, keys, extra_info=None) -> int:
        for i, key in enumerate(keys):
            if not self.exists(key):
                return i
        return len(keys)

    def clear(self) -> None:
        pass

    def get_stats(self):
        return None


UPSTREAM_VERSION = "sglang@001067fffe33427bee0ed2f007fb7551a1d76b44"
__all__ = ["HiCacheStorage", "HiCacheStorageConfig", "HiCacheStorageExtraInfo"]
