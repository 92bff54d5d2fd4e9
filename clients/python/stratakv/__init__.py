"""stratakv: the Python client of the stratakv KV-cache server.

    import stratakv, torch
    kv = stratakv.Client("unix:///run/stratakv.sock")   # shm fast path; "redis://host:port" = RESP
    kv = stratakv.Client("redis+cluster://10.0.0.1:7000,10.0.0.2:7000")   # a cluster
    kv.put("k", b"bytes")                                # bytes, buffers, numpy arrays, torch CPU tensors
    kv.put_tensor("t", torch.randn(4, 8, dtype=torch.bfloat16))
    t = kv.get_tensor("t")                                # dtype and shape kept

Every call releases the GIL while it talks to the server; a Client may be shared by threads.
Failures raise stratakv.Error (str(e) is the server's error text, e.kind says what failed).
See docs/sdk.md.
"""

from . import tensors
from ._native import Buffer, Error
from ._native import Client as _NativeClient

__all__ = ["Client", "Buffer", "Error", "tensors"]


class Client(_NativeClient):
    """A connection pool to one stratakv server, or one per node of a cluster.

    Client(url, *, max_connections=8, transport="auto", connect_timeout_ms=5000,
           io_timeout_ms=60000, max_staging_bytes=256 MiB, password=None,
           cluster_max_attempts=5, cluster_unix_sockets=True, stripe_ttl_ms=3600000,
           read_from=None, ssl_ca_certs=None, ssl_certfile=None, ssl_keyfile=None,
           ssl_cert_reqs=None, ssl_check_hostname=None)

    url: "redis://host:port", "rediss://host:port" (TLS), "unix:///path.sock", or
    "redis+cluster://host:port[,host:port...]" (seeds of a cluster: keys are routed by slot,
    batches split by node and run in parallel, -MOVED/-ASK followed; `cluster` is then True),
    or "rediss+cluster://host:tls-port[,...]" (the same over TLS, to every node).

    ssl_* (a rediss:// or rediss+cluster:// URL's TLS; redis-py's names, also accepted in the URL's query; None: the
    URL's, else the default): ssl_ca_certs (PEM file of trusted CAs; default the system's),
    ssl_certfile/ssl_keyfile (a client certificate, for tls-auth-clients), ssl_cert_reqs
    ("required", the default, or "none": no verification), ssl_check_hostname (default False,
    as redis-py: any certificate the CA signed is accepted). Payloads go over RESP in TLS.

    read_from (a cluster's reads: get, get_into, batch_get_into, exists, batch_exists,
    prefix_match without pin_ms): None
    (the URL's ?read_from=, else "primary"), "primary", "replicas" (a replica of the key's
    shard, in turn) or "nearest" (the shard's node with the lowest measured round trip). A
    replica's miss is asked again of the primary; a replica may lag (docs/sdk.md).

    transport: "auto" (verbs when this host and the server have an RDMA device, else shm on a
    unix:// URL or a cluster node on this host, else RESP), or one of "verbs", "shm", "resp"
    (stratakv.Error when it is not available).

    Raw-bytes calls (values are stored as their bytes, no header):
      put(key, value, ttl_ms=None, nx=False, stripes=0) -> bool
                                                         value: bytes/buffer/array/tensor, or a
                                                         list of them (gathered); stripes=N cuts
                                                         a large value in N parts on different
                                                         shards (docs/sdk.md "Striping")
      get(key) -> bytes | None
      get_into(key, target) -> int | None                 target: writable buffer/array/tensor,
                                                         or a list of them (scattered)
      batch_put(keys, values, ttl_ms=None, nx=False, stripes=0) -> [bool]
      batch_get_into(keys, targets) -> [int | None]
      exists, batch_exists, prefix_match(keys, pin_ms=None), unpin, remove, batch_remove,
      scan(pattern) -> [bytes]                           keys matching a glob, every node (admin)
      alloc_buffer(size) -> Buffer (registered memory: zero copy on shm)
      register_buffer(obj) -> Buffer (caller memory; staged on shm)
    Tensor calls (values carry dtype and shape, see stratakv.tensors):
      put_tensor, get_tensor, get_ndarray, batch_put_tensors, batch_get_tensors_into,
      alloc_tensor, alloc_array
    """

    # ---- tensors -------------------------------------------------------------------------
    def put_tensor(self, key, t, ttl_ms=None, nx=False, stripes=0):
        """Stores a torch CPU tensor or numpy array with its dtype and shape. Returns False only
        when `nx` is set and the key exists. stripes: as put."""
        t = tensors.contiguous(t)
        head = tensors.encode_header(tensors.dtype_name(t), t.shape)
        return self.put(key, [head, t] if tensors.nbytes(t) else [head], ttl_ms=ttl_ms, nx=nx,
                        stripes=stripes)

    def batch_put_tensors(self, keys, ts, ttl_ms=None, nx=False, stripes=0):
        """put_tensor of many keys in one round trip. Returns [bool]."""
        values = []
        for t in ts:
            t = tensors.contiguous(t)
            head = tensors.encode_header(tensors.dtype_name(t), t.shape)
            values.append([head, t] if tensors.nbytes(t) else [head])
        return self.batch_put(keys, values, ttl_ms=ttl_ms, nx=nx, stripes=stripes)

    def get_tensor(self, key):
        """The torch tensor stored by put_tensor (same dtype and shape), or None when missing.
        Raises ValueError when the value is not in the tensor format."""
        arr = self._get_uint8(key)
        if arr is None:
            return None
        dtype, shape, hlen = tensors.decode_header(arr)
        return tensors.from_bytes(arr, dtype, shape, hlen)

    def get_ndarray(self, key):
        """Like get_tensor, as a numpy array (not for bfloat16)."""
        import numpy as np
        arr = self._get_uint8(key)
        if arr is None:
            return None
        dtype, shape, hlen = tensors.decode_header(arr)
        if dtype == "bfloat16":
            raise TypeError("numpy has no bfloat16: use get_tensor")
        return arr[hlen:].view(np.dtype(dtype)).reshape(shape)

    def batch_get_tensors_into(self, keys, ts):
        """Reads tensor values into the caller's tensors/arrays (contiguous, CPU), which must
        have the stored dtype and shape. Zero copy when they lie in alloc_buffer memory
        (alloc_tensor / alloc_array). Returns [int | None] (value lengths; None = missing);
        raises stratakv.Error(kind "usage") on a dtype or shape mismatch."""
        heads = [bytearray(tensors.header_length(len(t.shape))) for t in ts]
        targets = [[h, t] if tensors.nbytes(t) else [h] for h, t in zip(heads, ts)]
        out = self.batch_get_into(keys, targets)
        for key, head, t, n in zip(keys, heads, ts, out):
            if n is None:
                continue
            dtype, shape, _ = tensors.decode_header(head)
            if dtype != tensors.dtype_name(t) or tuple(shape) != tuple(t.shape):
                e = Error("tensor %r is %s%s, the target is %s%s" % (
                    key, dtype, list(shape), tensors.dtype_name(t), list(t.shape)))
                e.kind = "usage"
                raise e
        return out

    def alloc_tensor(self, shape, dtype):
        """A zero-filled torch tensor in registered memory (zero-copy puts and gets on shm)."""
        import torch
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype)
        n = 1
        for d in shape:
            n *= int(d)
        size = n * torch.empty((), dtype=dtype).element_size()
        buf = self.alloc_buffer(max(size, 1))
        return torch.frombuffer(buf, dtype=torch.uint8, count=size).view(dtype).reshape(tuple(shape))

    def alloc_array(self, shape, dtype):
        """A zero-filled numpy array in registered memory."""
        import numpy as np
        dtype = np.dtype(dtype)
        n = 1
        for d in shape:
            n *= int(d)
        buf = self.alloc_buffer(max(n * dtype.itemsize, 1))
        return np.frombuffer(buf, dtype=dtype, count=n).reshape(tuple(shape))
