"""Engine memory named by raw addresses (SGLang's host pool hands out page pointers), as
writable buffers the stratakv SDK accepts, without copying.

`Regions` keeps a memoryview over each large buffer the engine registered once (its host KV
pool), so a page pointer inside one becomes a slice of it (cheap); any other pointer gets a
ctypes array over its bytes. The caller keeps the engine's memory alive, as the engine does.
"""

import bisect
import ctypes


def tensor_span(t):
    """(address, length in bytes) of a contiguous torch CPU tensor."""
    return t.data_ptr(), t.numel() * t.element_size()


def raw(ptr, size):
    """A writable buffer over `size` bytes at address `ptr` (no copy)."""
    return memoryview((ctypes.c_ubyte * size).from_address(ptr)).cast("B")


class Regions:
    """Address ranges with a memoryview each; view(ptr, size) slices the one holding it.
    Not thread-safe to add to; view() may be called from any thread once adding is done."""

    def __init__(self):
        self.starts = []
        self.items = []  # (start, end, memoryview), sorted by start

    def add(self, ptr, size):
        if size <= 0:
            return
        i = bisect.bisect_right(self.starts, ptr)
        self.starts.insert(i, ptr)
        self.items.insert(i, (ptr, ptr + size, raw(ptr, size)))

    def view(self, ptr, size):
        i = bisect.bisect_right(self.starts, ptr) - 1
        if i >= 0:
            start, end, mv = self.items[i]
            if ptr + size <= end:
                return mv[ptr - start:ptr - start + size]
        return raw(ptr, size)
