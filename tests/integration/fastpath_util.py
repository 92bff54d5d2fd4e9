"""A minimal fast-path client for the integration tests (docs/fast-path.md), in pure Python:
memfd segments passed over the Unix socket with SCM_RIGHTS, and the KV.* commands."""

import mmap
import os
import socket

from resp_util import RawConn, encode_command


class Segment:
    """A memfd of `size` bytes, mapped here; `id` once registered."""

    def __init__(self, size, name="stratakv-test"):
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.size = size
        self.map = mmap.mmap(self.fd, size)
        self.id = None

    def write(self, offset, data):
        self.map[offset:offset + len(data)] = data

    def read(self, offset, length):
        return bytes(self.map[offset:offset + length])

    def close(self):
        self.map.close()
        os.close(self.fd)


class FastConn(RawConn):
    """A Unix-socket connection that can pass file descriptors with a command."""

    def __init__(self, path, timeout=30.0):
        super().__init__(unix_path=path, timeout=timeout)

    def call_with_fd(self, fd, *args):
        socket.send_fds(self.sock, [encode_command(*args)], [fd])
        return self.read_reply()

    def register(self, seg):
        seg.id = self.call_with_fd(seg.fd, "KV.REGISTER", "SHM", seg.size)
        assert isinstance(seg.id, int), seg.id
        return seg.id
