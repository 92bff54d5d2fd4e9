"""The engines' objects the connectors are handed, for tests without SGLang or LMCache: real
torch memory laid out as the engines lay it out (versions in upstream_interfaces.py).

SGLang: MHAHostPool (MHATokenToKVPoolHost, layout "page_first": kv_buffer of shape
(2, tokens, layers, heads, head_dim), K then V; get_page_buffer_meta names [K, V] per page),
MLAHostPool (one latent buffer (tokens, layers, 1, dim): one piece per page), and
storage_config().
LMCache: LocalCPUBackend.allocate -> MemObj (TensorMemoryObj: a flat uint8 buffer viewed as
dtype and shape, reference counted), CacheKey (CacheEngineKey.to_string()), KV_2LTD.
"""

import enum

import torch

from stratakv.integrations.sglang import HiCacheStorageConfig


def storage_config(url, tp_rank=0, tp_size=1, mla=False, model="meta-llama/Llama-3.1-8B", **extra):
    cfg = {"backend_name": "stratakv", "module_path": "stratakv.integrations.sglang",
           "class_name": "StratakvHiCacheStorage", "interface_v1": 1}
    if url is not None:
        cfg["stratakv_url"] = url
    cfg.update(extra)
    return HiCacheStorageConfig(
        tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
        is_mla_model=mla, enable_storage_metrics=True, is_page_first_layout=True,
        model_name=model, extra_config=cfg)


def fill(t, seed):
    g = torch.Generator().manual_seed(seed)
    t.copy_(torch.randn(t.shape, generator=g).to(t.dtype))


class MHAHostPool:
    """SGLang's MHA host pool, page_first layout."""

    layout = "page_first"

    def __init__(self, pages, page_size=64, layer_num=32, head_num=2, head_dim=64,
                 dtype=torch.bfloat16):
        self.page_size = page_size
        self.size = pages * page_size
        self.dtype = dtype
        self.kv_buffer = torch.zeros((2, self.size, layer_num, head_num, head_dim), dtype=dtype)
        self.token_bytes = layer_num * head_num * head_dim * self.kv_buffer.element_size()

    def page_bytes(self):
        return 2 * self.page_size * self.token_bytes

    def get_page_buffer_meta(self, indices):
        base = self.kv_buffer.data_ptr()
        v_offset = self.size * self.token_bytes
        ptrs, sizes = [], []
        idx = indices.tolist()
        for i in range(0, len(idx), self.page_size):
            k = base + idx[i] * self.token_bytes
            ptrs += [k, k + v_offset]
            sizes += [self.page_size * self.token_bytes] * 2
        return ptrs, sizes

    def indices(self, slots):
        return torch.cat([torch.arange(s * self.page_size, (s + 1) * self.page_size) for s in slots])

    def page(self, slot):
        return self.kv_buffer[:, slot * self.page_size:(slot + 1) * self.page_size]

    # the flat data pages of SGLang's generic (non-v1) path
    def get_dummy_flat_data_page(self):
        return torch.zeros(self.page(0).numel(), dtype=self.dtype)

    def get_data_page(self, index, flat=True):
        slot = int(index) // self.page_size
        return self.page(slot).flatten()

    def set_from_flat_data_page(self, index, data_page):
        slot = int(index) // self.page_size
        self.page(slot).copy_(data_page.view(self.page(slot).shape))


class MLAHostPool(MHAHostPool):
    """SGLang's MLA host pool, page_first layout: one latent vector per token and layer."""

    def __init__(self, pages, page_size=64, layer_num=32, dim=576, dtype=torch.bfloat16):
        self.page_size = page_size
        self.size = pages * page_size
        self.dtype = dtype
        self.kv_buffer = torch.zeros((self.size, layer_num, 1, dim), dtype=dtype)
        self.token_bytes = layer_num * dim * self.kv_buffer.element_size()

    def page_bytes(self):
        return self.page_size * self.token_bytes

    def get_page_buffer_meta(self, indices):
        base = self.kv_buffer.data_ptr()
        idx = indices.tolist()
        ptrs = [base + idx[i] * self.token_bytes for i in range(0, len(idx), self.page_size)]
        return ptrs, [self.page_size * self.token_bytes] * len(ptrs)

    def page(self, slot):
        return self.kv_buffer[slot * self.page_size:(slot + 1) * self.page_size]


# ---- LMCache --------------------------------------------------------------------------------
class MemoryFormat(enum.Enum):
    UNDEFINED = 0
    KV_2LTD = 1
    KV_T2D = 2
    KV_2TD = 3
    BINARY = 4
    BINARY_BUFFER = 5
    KV_MLA_FMT = 6


KV_2LTD = MemoryFormat.KV_2LTD


class MemObj:
    """LMCache's TensorMemoryObj: raw bytes viewed with a dtype and shape, ref counted."""

    def __init__(self, shape, dtype, fmt, backend):
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self.fmt = fmt
        n = self.shape.numel() * torch.empty((), dtype=dtype).element_size()
        self.raw_data = torch.empty(n, dtype=torch.uint8)  # as LMCache's allocator: not zeroed
        self.ref_count = 1
        self.backend = backend

    @property
    def tensor(self):
        return self.raw_data.view(self.dtype).view(self.shape)

    @property
    def byte_array(self):
        return memoryview(self.raw_data.numpy()).cast("B")

    def get_shape(self):
        return self.shape

    def get_dtype(self):
        return self.dtype

    def get_memory_format(self):
        return self.fmt

    def get_size(self):
        return self.raw_data.numel()

    def ref_count_up(self):
        self.ref_count += 1

    def ref_count_down(self):
        self.ref_count -= 1
        if self.ref_count == 0:
            self.backend.live -= 1


class LocalCPUBackend:
    """LMCache's LocalCPUBackend.allocate(shape, dtype, fmt) -> MemObj or None (full)."""

    def __init__(self, max_objects=1 << 30):
        self.max_objects = max_objects
        self.live = 0

    def allocate(self, shape, dtype, fmt=MemoryFormat.UNDEFINED):
        if self.live >= self.max_objects:
            return None
        self.live += 1
        if isinstance(fmt, int):
            fmt = MemoryFormat(fmt)
        return MemObj(shape, dtype, fmt, self)


class CacheKey:
    """LMCache's CacheEngineKey: fmt@model@world_size@worker_id@chunk_hash@dtype."""

    def __init__(self, chunk_hash, model="meta-llama/Llama-3.1-8B", world_size=1, worker_id=0,
                 dtype="bfloat16"):
        self.parts = ("vllm", model, world_size, worker_id, chunk_hash, dtype)

    def to_string(self):
        return "@".join(str(p) for p in self.parts)


class LMCacheConfig:
    """The fields of LMCacheEngineConfig the connector reads."""

    def __init__(self, remote_url, extra_config):
        self.remote_url = remote_url
        self.extra_config = extra_config
