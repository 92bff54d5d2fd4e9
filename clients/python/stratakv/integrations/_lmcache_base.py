"""A stand-in for LMCache's remote-connector interface, used when LMCache is not installed.

`stratakv.integrations.lmcache` derives from LMCache's own `RemoteConnector` (and
`ConnectorAdapter`) when it can import them; otherwise from these, which have the same
methods, parameters, async-ness and return annotations as LMCache's at commit
01712fbd51d033060d6a8851c06de0ebf351f74e
(lmcache/v1/storage_backend/connector/base_connector.py, and connector/__init__.py at
0109660c for ConnectorAdapter), so the connector can be imported, tested and driven without
LMCache. Written for stratakv; it only mirrors the interface.
"""

from __future__ import annotations

import abc
from typing import List, Optional


class RemoteConnector(metaclass=abc.ABCMeta):
    """LMCache's remote storage interface: async get/put/exists of one chunk per key, and
    optional batched calls announced by support_* methods."""

    save_chunk_meta: bool = True
    meta_shape = None
    meta_dtype = None
    meta_fmt = None
    full_chunk_size: Optional[int] = None
    single_token_size: Optional[int] = None

    def init_chunk_meta(self, config, metadata) -> None:
        # Upstream fills meta_* from the engine metadata when extra_config sets
        # save_chunk_meta False; without LMCache there is no such metadata.
        return

    def reshape_partial_chunk(self, memory_obj, bytes_read) -> MemoryObj:  # noqa: F821
        if self.full_chunk_size is None or bytes_read == self.full_chunk_size:
            return memory_obj
        raise ValueError("partial chunk of %d bytes" % bytes_read)

    def post_init(self):
        pass

    @abc.abstractmethod
    async def exists(self, key) -> bool:
        raise NotImplementedError

    @abc.abstractmethod
    def exists_sync(self, key) -> bool:
        raise NotImplementedError

    @abc.abstractmethod
    async def get(self, key) -> Optional[MemoryObj]:  # noqa: F821
        raise NotImplementedError

    @abc.abstractmethod
    async def put(self, key, memory_obj):
        raise NotImplementedError

    @abc.abstractmethod
    async def list(self) -> List[str]:
        raise NotImplementedError

    @abc.abstractmethod
    async def close(self):
        raise NotImplementedError

    def support_ping(self) -> bool:
        return False

    async def ping(self) -> int:
        raise NotImplementedError

    def support_batched_get(self) -> bool:
        return False

    async def batched_get(self, keys) -> List[Optional[MemoryObj]]:  # noqa: F821
        raise NotImplementedError

    def support_batched_put(self) -> bool:
        return False

    async def batched_put(self, keys, memory_objs):
        raise NotImplementedError

    def support_batched_async_contains(self) -> bool:
        return False

    async def batched_async_contains(self, lookup_id, keys, pin=False) -> int:
        raise NotImplementedError

    def support_batched_get_non_blocking(self) -> bool:
        return False

    async def batched_get_non_blocking(self, lookup_id, keys) -> List[MemoryObj]:  # noqa: F821
        raise NotImplementedError

    def remove_sync(self, key) -> bool:
        raise NotImplementedError

    def batched_contains(self, keys, stop_after_first_not_exits=True) -> List[bool]:
        raise NotImplementedError

    def support_batched_contains(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}>"


class ConnectorAdapter(abc.ABC):
    """LMCache's factory of connectors for the URLs it can parse (the plugin route)."""

    def __init__(self, schema: str = "") -> None:
        self.schema = schema

    def can_parse(self, url: str) -> bool:
        return self.schema != "" and url.startswith(self.schema)

    @abc.abstractmethod
    def create_connector(self, context) -> RemoteConnector:
        pass


UPSTREAM_VERSION = "lmcache@01712fbd51d033060d6a8851c06de0ebf351f74e"
