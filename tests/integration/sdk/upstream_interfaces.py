"""The interfaces stratakv's engine connectors implement, transcribed by hand from the engines'
public source at the versions named below (neither engine can be installed on the CI
machines). test_connector_interfaces.py checks stratakv.integrations against these tables.

Each table maps a method name to (parameters after self, async?, return annotation or None):
  parameters: ("name", ...), a default written "name=value"
  return annotation: as written upstream (None: none written)

To follow a newer engine version: read the files named, update a table and its VERSION, and
run the test.
"""

# SGLang, sgl-project/sglang at commit 001067fffe33427bee0ed2f007fb7551a1d76b44:
#   python/sglang/srt/mem_cache/hicache_storage.py  class HiCacheStorage(ABC)
#   python/sglang/srt/mem_cache/storage/backend_factory.py  (the "dynamic" loader: requires
#     backend_name, module_path, class_name in the extra config; calls
#     backend_class(storage_config, kwargs); the class must subclass HiCacheStorage)
#   python/sglang/srt/managers/cache_controller.py  (calls register_mem_pool_host right after
#     construction; the page-based batch_get_v1/batch_set_v1 path only when the extra config
#     has "interface_v1": 1, else batch_get/batch_set with flat data pages; batch_exists on at
#     most STORAGE_BATCH_SIZE = 128 keys at a time)
SGLANG_VERSION = "sglang@001067fffe33427bee0ed2f007fb7551a1d76b44"
SGLANG_ABSTRACT = {"get", "batch_get", "set", "batch_set", "exists"}
SGLANG_HICACHE_STORAGE = {
    "register_mem_pool_host": (("mem_pool_host",), False, None),
    "register_mem_host_pool_v2": (("host_pool", "host_pool_name"), False, None),
    "batch_exists_v2": (("keys", "pool_transfers=None", "extra_info=None"), False,
                        "PoolTransferResult"),
    "batch_get_v2": (("transfers", "extra_info=None"), False, "dict[str, List[bool]]"),
    "batch_set_v2": (("transfers", "extra_info=None"), False, "dict[str, List[bool]]"),
    "batch_get_v1": (("keys", "host_indices", "extra_info=None"), False, "List[bool]"),
    "batch_set_v1": (("keys", "host_indices", "extra_info=None"), False, "List[bool]"),
    "get": (("key", "target_location=None", "target_sizes=None"), False, "torch.Tensor | None"),
    "batch_get": (("keys", "target_locations=None", "target_sizes=None"), False,
                  "List[torch.Tensor | None] | int"),
    "set": (("key", "value=None", "target_location=None", "target_sizes=None"), False, "bool"),
    "batch_set": (("keys", "values=None", "target_locations=None", "target_sizes=None"), False,
                  "bool"),
    "exists": (("key",), False, "bool"),
    "batch_exists": (("keys", "extra_info=None"), False, "int"),
    "clear": ((), False, "None"),
    "get_stats": ((), False, None),
}
# What the stratakv backend implements itself (the rest it inherits: the v2 pool methods
# raise NotImplementedError upstream, and SGLang uses them only for hybrid/sidecar pools).
SGLANG_IMPLEMENTED = {
    "register_mem_pool_host", "batch_get_v1", "batch_set_v1", "get", "batch_get", "set",
    "batch_set", "exists", "batch_exists", "clear", "get_stats",
}

# LMCache, LMCache/LMCache at commit 01712fbd51d033060d6a8851c06de0ebf351f74e:
#   lmcache/v1/storage_backend/connector/base_connector.py  class RemoteConnector(abc.ABCMeta)
#   lmcache/v1/storage_backend/connector/external_adapter.py (commit 0c4184da...): remote_url
#     external://host:port/<module path>/?connector_name=<class>; the class must subclass
#     RemoteConnector; it is called as cls(loop=..., local_cpu_backend=..., config=...)
#   lmcache/v1/storage_backend/connector/__init__.py (commit 0109660c...): the plugin route,
#     remote_storage_plugins: [name] with extra_config
#     remote_storage_plugin.<name>.module_path / .class_name naming a ConnectorAdapter
#   lmcache/v1/storage_backend/remote_backend.py (commit 009eca10...): how the methods are
#     called (async ones on LMCache's event loop; errors caught and turned into misses there)
LMCACHE_VERSION = "lmcache@01712fbd51d033060d6a8851c06de0ebf351f74e"
LMCACHE_ABSTRACT = {"exists", "exists_sync", "get", "put", "list", "close"}
LMCACHE_REMOTE_CONNECTOR = {
    "init_chunk_meta": (("config", "metadata"), False, "None"),
    "reshape_partial_chunk": (("memory_obj", "bytes_read"), False, "MemoryObj"),
    "post_init": ((), False, None),
    "exists": (("key",), True, "bool"),
    "exists_sync": (("key",), False, "bool"),
    "get": (("key",), True, "Optional[MemoryObj]"),
    "put": (("key", "memory_obj"), True, None),
    "list": ((), True, "List[str]"),
    "close": ((), True, None),
    "support_ping": ((), False, "bool"),
    "ping": ((), True, "int"),
    "support_batched_get": ((), False, "bool"),
    "batched_get": (("keys",), True, "List[Optional[MemoryObj]]"),
    "support_batched_put": ((), False, "bool"),
    "batched_put": (("keys", "memory_objs"), True, None),
    "support_batched_async_contains": ((), False, "bool"),
    "batched_async_contains": (("lookup_id", "keys", "pin=False"), True, "int"),
    "support_batched_get_non_blocking": ((), False, "bool"),
    "batched_get_non_blocking": (("lookup_id", "keys"), True, "List[MemoryObj]"),
    "remove_sync": (("key",), False, "bool"),
    "batched_contains": (("keys", "stop_after_first_not_exits=True"), False, "List[bool]"),
    "support_batched_contains": ((), False, "bool"),
    "__repr__": ((), False, "str"),
}
# The class attributes RemoteConnector declares (with their defaults).
LMCACHE_ATTRIBUTES = {
    "save_chunk_meta": True, "meta_shape": None, "meta_dtype": None, "meta_fmt": None,
    "full_chunk_size": None, "single_token_size": None,
}
LMCACHE_IMPLEMENTED = {
    "exists", "exists_sync", "get", "put", "list", "close", "support_ping", "ping",
    "support_batched_get", "batched_get", "support_batched_put", "batched_put",
    "support_batched_async_contains", "batched_async_contains",
    "support_batched_get_non_blocking", "batched_get_non_blocking", "remove_sync",
    "batched_contains", "support_batched_contains",
}
