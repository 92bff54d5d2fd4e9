"""The value format of the LMCache connector: one key per chunk, a 64-byte header (the
chunk's shape, dtype, memory format and length) followed by the chunk's bytes. LMCache's own
Redis connector writes two keys (`<key>metadata`, `<key>kv_bytes`), so eviction can drop one of
them; one value cannot be half evicted.

    offset  size  field
    0       4     magic b"SKVL"
    4       1     format version (1)
    5       1     dtype code (DTYPES; 0 = none: raw bytes)
    6       1     ndim (at most 5)
    7       1     LMCache MemoryFormat value (int)
    8       8     payload length in bytes, little-endian
    16      8*5   shape, int64 little-endian (unused dimensions 0)
    56      8     zero
    64      ...   payload (the memory object's bytes, C order)
"""

import struct

MAGIC = b"SKVL"
VERSION = 1
HEADER = 64
MAX_DIMS = 5
_HEAD = struct.Struct("<4sBBBBQ5qQ")
assert _HEAD.size == HEADER

# torch dtype name -> code (names as in str(torch.dtype) without "torch.")
DTYPES = {
    "float32": 1, "float16": 2, "bfloat16": 3, "int8": 4, "uint8": 5, "int16": 6, "int32": 7,
    "int64": 8, "float64": 9, "bool": 10, "float8_e4m3fn": 11, "float8_e5m2": 12,
}
_NAMES = {code: name for name, code in DTYPES.items()}


def encode(shape, dtype, fmt, length):
    """The header for a payload of `length` bytes; dtype a torch dtype or None."""
    shape = [int(d) for d in shape]
    if len(shape) > MAX_DIMS:
        raise ValueError("a chunk has at most %d dimensions, not %d" % (MAX_DIMS, len(shape)))
    code = 0 if dtype is None else DTYPES[str(dtype).replace("torch.", "")]
    dims = shape + [0] * (MAX_DIMS - len(shape))
    return _HEAD.pack(MAGIC, VERSION, code, len(shape), int(fmt), int(length), *dims, 0)


def decode(buf):
    """(shape tuple, torch dtype or None, fmt int, payload length); ValueError when `buf` does
    not start with a chunk header."""
    mv = memoryview(buf).cast("B")
    if len(mv) < HEADER:
        raise ValueError("not a stratakv chunk (too short)")
    magic, version, code, ndim, fmt, length, *rest = _HEAD.unpack_from(mv, 0)
    if magic != MAGIC or version != VERSION or ndim > MAX_DIMS or (code and code not in _NAMES):
        raise ValueError("not a stratakv chunk (bad magic, version or dtype)")
    shape = tuple(rest[:ndim])
    dtype = None
    if code:
        import torch
        dtype = getattr(torch, _NAMES[code])
    return shape, dtype, fmt, length
