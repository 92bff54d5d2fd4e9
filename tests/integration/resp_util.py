"""A tiny, strict RESP2/RESP3 client for the integration tests.

redis-py 4.3.4 cannot speak RESP3 and strips the "ERR " prefix from errors, so
tests that check exact error texts, exact reply bytes, protocol errors or RESP3
shapes use this module instead.

Reply types returned by RawConn.read_reply()/call():
  +simple      -> Simple (a str subclass; equal only to another Simple)
  -error       -> Err (a str subclass; equal only to another Err) -- returned, not raised
  :integer     -> int
  $bulk        -> bytes (None for $-1)
  *array       -> list (None for *-1)
  _ null       -> None
  ,double      -> float
  #bool        -> bool
  (big number  -> int
  =verbatim    -> Verbatim(fmt, data)
  %map         -> dict (list keys become tuples)
  ~set         -> RespSet (a list subclass, server order kept)
  >push        -> Push (a list subclass)
  !blob error  -> Err
"""

import socket
import time


class Simple(str):
    """A RESP simple string (+...)."""

    def __eq__(self, other):
        return type(other) is Simple and str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __repr__(self):
        return "Simple(%s)" % str.__repr__(self)


class Err(str):
    """A RESP error reply (-...), full text including the prefix (ERR, WRONGPASS...)."""

    def __eq__(self, other):
        return type(other) is Err and str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __repr__(self):
        return "Err(%s)" % str.__repr__(self)


class Verbatim:
    def __init__(self, fmt, data):
        self.fmt = fmt
        self.data = data

    def __eq__(self, other):
        return isinstance(other, Verbatim) and (self.fmt, self.data) == (other.fmt, other.data)

    def __repr__(self):
        return "Verbatim(%r, %r)" % (self.fmt, self.data)


class RespSet(list):
    def __repr__(self):
        return "RespSet(%s)" % list.__repr__(self)


class Push(list):
    def __repr__(self):
        return "Push(%s)" % list.__repr__(self)


OK = Simple("OK")


class ConnectionClosed(Exception):
    pass


class Incomplete(Exception):
    pass


def encode_command(*args):
    """Encode a command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, float):
            a = repr(a).encode()
        out.append(b"$%d\r\n" % len(a))
        out.append(bytes(a))
        out.append(b"\r\n")
    return b"".join(out)


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((_hashable(k), _hashable(x)) for k, x in v.items()))
    return v


def parse_reply(buf, pos=0):
    """Parse one reply from buf[pos:]. Returns (value, new_pos); raises Incomplete."""

    def line(p):
        end = buf.find(b"\r\n", p)
        if end < 0:
            raise Incomplete()
        return bytes(buf[p:end]), end + 2

    if pos >= len(buf):
        raise Incomplete()
    t = buf[pos:pos + 1]
    body, p = line(pos + 1)
    if t == b"+":
        return Simple(body.decode("utf-8", "replace")), p
    if t == b"-":
        return Err(body.decode("utf-8", "replace")), p
    if t == b":":
        return int(body), p
    if t == b"(":
        return int(body), p
    if t == b",":
        s = body.decode()
        if s == "inf":
            return float("inf"), p
        if s == "-inf":
            return float("-inf"), p
        return float(s), p
    if t == b"#":
        if body == b"t":
            return True, p
        if body == b"f":
            return False, p
        raise ValueError("bad boolean %r" % body)
    if t == b"_":
        if body != b"":
            raise ValueError("bad null %r" % body)
        return None, p
    if t in (b"$", b"=", b"!"):
        n = int(body)
        if n < 0:
            if t != b"$":
                raise ValueError("negative length for %r" % t)
            return None, p
        if len(buf) < p + n + 2:
            raise Incomplete()
        data = bytes(buf[p:p + n])
        if buf[p + n:p + n + 2] != b"\r\n":
            raise ValueError("bulk not terminated by CRLF")
        p += n + 2
        if t == b"$":
            return data, p
        if t == b"!":
            return Err(data.decode("utf-8", "replace")), p
        if len(data) < 4 or data[3:4] != b":":
            raise ValueError("bad verbatim string %r" % data[:10])
        return Verbatim(data[:3].decode(), data[4:]), p
    if t in (b"*", b"~", b">"):
        n = int(body)
        if n < 0:
            if t != b"*":
                raise ValueError("negative length for %r" % t)
            return None, p
        items = []
        for _ in range(n):
            v, p = parse_reply(buf, p)
            items.append(v)
        if t == b"~":
            return RespSet(items), p
        if t == b">":
            return Push(items), p
        return items, p
    if t == b"%":
        n = int(body)
        d = {}
        for _ in range(n):
            k, p = parse_reply(buf, p)
            v, p = parse_reply(buf, p)
            d[_hashable(k)] = v
        return d, p
    if t == b"|":
        # attribute: skip it and return the reply that follows
        n = int(body)
        for _ in range(2 * n):
            _, p = parse_reply(buf, p)
        return parse_reply(buf, p)
    raise ValueError("unknown RESP type byte %r at %d: %r" % (t, pos, bytes(buf[pos:pos + 40])))


class RawConn:
    """A raw socket connection that sends bytes and reads exact replies."""

    def __init__(self, host="127.0.0.1", port=None, unix_path=None, timeout=10.0):
        if unix_path is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(unix_path)
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = bytearray()
        self.eof = False

    # ---- sending -------------------------------------------------------
    def send(self, data):
        self.sock.sendall(data)

    def send_cmd(self, *args):
        self.sock.sendall(encode_command(*args))

    # ---- receiving -----------------------------------------------------
    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out waiting for a reply; buffered=%r" % bytes(self.buf[:200]))
        self.sock.settimeout(remaining)
        try:
            d = self.sock.recv(1 << 20)
        except ConnectionResetError:
            d = b""
        finally:
            self.sock.settimeout(self.timeout)
        if not d:
            self.eof = True
            raise ConnectionClosed("connection closed by server; buffered=%r" % bytes(self.buf[:200]))
        self.buf += d

    def read_reply_with_raw(self, timeout=None):
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            try:
                v, p = parse_reply(self.buf, 0)
            except Incomplete:
                self._fill(deadline)
                continue
            raw = bytes(self.buf[:p])
            del self.buf[:p]
            return v, raw

    def read_reply(self, timeout=None):
        return self.read_reply_with_raw(timeout)[0]

    def read_raw_reply(self, timeout=None):
        """Exact bytes of the next complete reply."""
        return self.read_reply_with_raw(timeout)[1]

    def read_exact(self, n, timeout=None):
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while len(self.buf) < n:
            self._fill(deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def call(self, *args, timeout=None):
        self.send_cmd(*args)
        return self.read_reply(timeout)

    def call_raw(self, *args, timeout=None):
        self.send_cmd(*args)
        return self.read_raw_reply(timeout)

    def read_until_closed(self, timeout=5.0):
        """Read everything until the server closes the connection.

        Returns (data, closed): data is all bytes received (including any
        buffered ones), closed tells whether EOF/reset was seen in time."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._fill(deadline)
            except ConnectionClosed:
                data = bytes(self.buf)
                self.buf.clear()
                return data, True
            except (socket.timeout, TimeoutError):
                data = bytes(self.buf)
                self.buf.clear()
                return data, False

    def hello3(self):
        v = self.call("HELLO", "3")
        assert isinstance(v, dict), v
        return v

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
