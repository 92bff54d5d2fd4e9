"""The tensor format of stratakv values: a small header, then the tensor's bytes.

A value written by ``put_tensor`` is::

    offset  size       field
    0       4          magic b"SKVT"
    4       1          format version (1)
    5       1          dtype code (DTYPE_CODES)
    6       2          ndim, little-endian
    8       4          header length in bytes (a multiple of 64), little-endian
    12      4          zero
    16      8 * ndim   shape, int64 little-endian
    ...     padding    zeros up to the header length
    header  nbytes     the tensor's elements, C order, native (little-endian) byte order

so the data starts 64-byte aligned (64 bytes of header for up to 6 dimensions). Plain
``GET`` returns the same bytes, so any client can decode it.
"""

import struct

MAGIC = b"SKVT"
VERSION = 1
_FIXED = struct.Struct("<4sBBHII")

# dtype name (as in torch and numpy) -> (code, bytes per element)
DTYPE_CODES = {
    "float32": (1, 4), "float16": (2, 2), "bfloat16": (3, 2), "int8": (4, 1),
    "uint8": (5, 1), "int16": (6, 2), "int32": (7, 4), "int64": (8, 8),
    "float64": (9, 8), "bool": (10, 1),
}
_BY_CODE = {code: name for name, (code, _) in DTYPE_CODES.items()}


def header_length(ndim):
    """Bytes of the header for a tensor of `ndim` dimensions."""
    return (16 + 8 * ndim + 63) // 64 * 64


def encode_header(dtype, shape):
    """The header for a tensor of dtype name `dtype` and `shape`."""
    if dtype not in DTYPE_CODES:
        raise TypeError("unsupported dtype %r (supported: %s)" % (dtype, ", ".join(DTYPE_CODES)))
    shape = tuple(int(d) for d in shape)
    hlen = header_length(len(shape))
    head = _FIXED.pack(MAGIC, VERSION, DTYPE_CODES[dtype][0], len(shape), hlen, 0)
    head += struct.pack("<%dq" % len(shape), *shape)
    return head + bytes(hlen - len(head))


def decode_header(buf):
    """(dtype name, shape tuple, header length) from the start of a value; ValueError when it
    is not a tensor value."""
    mv = memoryview(buf).cast("B")
    if len(mv) < _FIXED.size:
        raise ValueError("not a stratakv tensor value (too short)")
    magic, version, code, ndim, hlen, _ = _FIXED.unpack_from(mv, 0)
    if magic != MAGIC or version != VERSION or code not in _BY_CODE:
        raise ValueError("not a stratakv tensor value (bad magic, version or dtype)")
    if hlen != header_length(ndim) or len(mv) < hlen:
        raise ValueError("not a stratakv tensor value (bad header length)")
    shape = struct.unpack_from("<%dq" % ndim, mv, 16)
    return _BY_CODE[code], shape, hlen


def dtype_name(t):
    """'float32', 'bfloat16', ... for a torch tensor or a numpy array."""
    dt = t.dtype
    name = str(dt)
    return name[6:] if name.startswith("torch.") else getattr(dt, "name", name)


def is_torch(t):
    return type(t).__module__.startswith("torch")


def nbytes(t):
    if is_torch(t):
        return t.numel() * t.element_size()
    return t.nbytes


def contiguous(t):
    """`t` itself when C-contiguous, else a contiguous copy (for puts)."""
    if is_torch(t):
        return t if t.is_contiguous() else t.contiguous()
    import numpy as np
    return np.ascontiguousarray(t)


def from_bytes(arr, dtype, shape, offset):
    """A torch tensor over the uint8 numpy array `arr` from `offset` (no copy)."""
    import torch
    data = torch.from_numpy(arr[offset:])
    return data.view(getattr(torch, dtype)).reshape(shape)
