"""Wire protocol: inline commands, pipelining, fragmentation, protocol errors,
limits (proto-max-bulk-len, unauthenticated limits) and exact RESP3 shapes."""

import os
import random
import time

import pytest

from harness import TARGET, launch_server, stop_servers
from resp_util import OK, Err, Simple, encode_command

PASSWORD = "proto-pw"


@pytest.fixture
def c(r, raw):
    return raw()


@pytest.fixture(scope="module")
def auth_server():
    srv = launch_server(requirepass=PASSWORD)
    yield srv
    stop_servers(srv)


@pytest.fixture(scope="module")
def small_bulk_server():
    srv = launch_server(proto_max_bulk_len="1mb")
    yield srv
    stop_servers(srv)


def over_bulk_limit(length, limit):
    """The error of a bulk over proto-max-bulk-len: Redis's text, to which stratakv adds the
    length and the limit (issue 17: an error that names the limit and the size)."""
    if TARGET == "redis":
        return "invalid bulk length"
    return "invalid bulk length %d (proto-max-bulk-len is %d)" % (length, limit)


def expect_protocol_error(conn, payload, message):
    """Send payload; expect exactly `-ERR Protocol error: <message>` then a close."""
    conn.send(payload)
    data, closed = conn.read_until_closed(timeout=5)
    assert data == b"-ERR Protocol error: " + message.encode() + b"\r\n"
    assert closed, "server did not close the connection after a protocol error"


# ---------------------------------------------------------------- inline commands

def test_inline_commands_with_quotes(r, c):
    c.send(b"SET \"a b\" 'c d'\r\nGET \"a b\"\r\n")
    assert c.read_raw_reply() == b"+OK\r\n"
    assert c.read_raw_reply() == b"$3\r\nc d\r\n"
    assert r.get("a b") == b"c d"
    c.send(b"PING\r\n")
    assert c.read_raw_reply() == b"+PONG\r\n"
    c.send(b"ECHO \"\\x41\\n\\t\"\r\n")
    assert c.read_raw_reply() == b"$3\r\nA\n\t\r\n"
    c.send(b"SET k 'it''s'\r\n")  # adjacent quoted strings are not allowed
    data, closed = c.read_until_closed(timeout=5)
    assert data == b"-ERR Protocol error: unbalanced quotes in request\r\n" and closed


def test_inline_with_lf_only_and_empty_lines(r, c):
    c.send(b"SET inl 5\nINCR inl\n")
    assert c.read_raw_reply() == b"+OK\r\n"
    assert c.read_raw_reply() == b":6\r\n"
    c.send(b"\r\n\r\n\nPING\r\n")
    assert c.read_raw_reply() == b"+PONG\r\n"
    c.send(b"   GET    inl   \r\n")
    assert c.read_raw_reply() == b"$1\r\n6\r\n"


def test_inline_unknown_command(c):
    c.send(b"NOSUCH a b\r\n")
    assert c.read_reply() == Err("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ")


def test_inline_unbalanced_quotes(c):
    expect_protocol_error(c, b"SET \"a b\r\n", "unbalanced quotes in request")


NUL_CASES = [
    (b"SET nul b\x00c\r\n", b"", "too big inline request"),
    (b"PING\x00\r\n", b"", "too big inline request"),
    (b"PING\r\n\x00PING\r\n", b"+PONG\r\n", "too big inline request"),
    (b"SET nul \"x\x00y\"\r\nPING\r\n", b"", "too big inline request"),
    (b"*1\x00\r\n$4\r\nPING\r\n", b"", "too big mbulk count string"),
    (b"*1\r\n$4\x00\r\nPING\r\n", b"", "too big bulk count string"),
]


@pytest.mark.parametrize("payload,first,message", NUL_CASES,
                         ids=["inline-set", "inline-ping", "after-a-request", "in-quotes",
                              "mbulk-count", "bulk-count"])
def test_nul_before_a_lines_end_as_redis(raw, redis_srv, payload, first, message):
    """Redis 7.0 finds a line's end with strchr(): a NUL before it hides it. Nothing after the
    NUL runs; the connection waits until more than 64 KiB wait, then gets a protocol error."""
    redis_srv.raw().call("FLUSHALL")
    raw().call("FLUSHALL")
    got = {}
    for name, srv in (("stratakv", None), ("redis", redis_srv)):
        conn = raw(srv)
        conn.send(payload)
        replies, closed = conn.read_until_closed(timeout=0.5)
        assert not closed, name
        check = raw(srv)
        stored = check.call_raw("GET", "nul")
        conn.send(b"PING\r\n")  # a later request waits too
        later, closed_later = conn.read_until_closed(timeout=0.3)
        # One byte more than 64 KiB waiting from the blocked line's start (all of it is read
        # before the server closes: no reset that could lose the reply).
        start = payload.rfind(b"\n", 0, payload.index(b"\x00")) + 1
        conn.send(b"a" * (64 * 1024 + 1 - (len(payload) - start + len(b"PING\r\n"))))
        tail, closed_at_end = conn.read_until_closed(timeout=5)
        got[name] = (replies, stored, later, closed_later, tail, closed_at_end)
    assert got["stratakv"] == got["redis"]
    assert got["stratakv"] == (first, b"$-1\r\n", b"", False,
                               b"-ERR Protocol error: " + message.encode() + b"\r\n", True)


def test_nul_line_limit_is_counted_from_the_lines_start(raw, redis_srv):
    """Exactly 64 KiB waiting after the line's start is still accepted; one more byte is not."""
    for srv in (None, redis_srv):
        conn = raw(srv)
        conn.send(b"PING\x00" + b"a" * (64 * 1024 - 5))
        assert conn.read_until_closed(timeout=0.5) == (b"", False)
        conn.send(b"a")
        assert conn.read_until_closed(timeout=5) == (
            b"-ERR Protocol error: too big inline request\r\n", True)


def test_empty_and_null_multibulk_are_ignored(c):
    c.send(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n")
    assert c.read_raw_reply() == b"+PONG\r\n"


def test_binary_safe_arguments(r, c):
    key = b"k\r\n\x00\xff"
    val = b"\r\n$3\r\n*1\r\n\x00" * 10
    c.send_cmd("SET", key, val)
    assert c.read_reply() == OK
    assert r.get(key) == val
    assert c.call("GET", key) == val
    assert c.call_raw("SET", "", "") == b"+OK\r\n"
    assert c.call_raw("GET", "") == b"$0\r\n\r\n"


# ---------------------------------------------------------------- pipelining / fragmentation

def test_pipeline_of_1000_commands_in_one_send(r, c):
    payload = []
    expected = []
    for i in range(1000):
        kind = i % 4
        if kind == 0:
            payload.append(encode_command("SET", "p:%d" % i, "v%d" % i))
            expected.append(b"+OK\r\n")
        elif kind == 1:
            payload.append(encode_command("GET", "p:%d" % (i - 1)))
            v = b"v%d" % (i - 1)
            expected.append(b"$%d\r\n%s\r\n" % (len(v), v))
        elif kind == 2:
            payload.append(encode_command("INCR", "counter"))
            expected.append(b":%d\r\n" % (i // 4 + 1))
        else:
            payload.append(encode_command("GET", "missing:%d" % i))
            expected.append(b"$-1\r\n")
    c.send(b"".join(payload))
    got = [c.read_raw_reply() for _ in range(1000)]
    assert got == expected
    assert r.get("counter") == b"250"
    assert r.dbsize() == 251


def test_redis_py_pipeline(r):
    pipe = r.pipeline(transaction=False)
    for i in range(5000):
        pipe.set("rp:%d" % i, i)
    assert all(x is True for x in pipe.execute())
    pipe = r.pipeline(transaction=False)
    for i in range(5000):
        pipe.get("rp:%d" % i)
    assert pipe.execute() == [str(i).encode() for i in range(5000)]


def test_request_split_into_single_bytes(r, c):
    payload = encode_command("SET", "split", "hello world") + encode_command("GET", "split")
    for i in range(len(payload)):
        c.send(payload[i:i + 1])
        time.sleep(0.001)
    assert c.read_raw_reply() == b"+OK\r\n"
    assert c.read_raw_reply() == b"$11\r\nhello world\r\n"
    inline = b"SET split2 inline-value\r\n"
    for i in range(len(inline)):
        c.send(inline[i:i + 1])
        time.sleep(0.001)
    assert c.read_raw_reply() == b"+OK\r\n"
    assert r.get("split2") == b"inline-value"


def test_large_bulk_in_random_chunks(r, c):
    rnd = random.Random(1234)
    value = os.urandom(300000)
    payload = encode_command("SET", "chunky", value)
    pos = 0
    while pos < len(payload):
        n = rnd.randint(1, 70000)
        c.send(payload[pos:pos + n])
        pos += n
        if rnd.random() < 0.3:
            time.sleep(0.002)
    assert c.read_reply() == OK
    assert r.get("chunky") == value


def test_commands_before_protocol_error_are_executed(r, c):
    c.send(b"*3\r\n$3\r\nSET\r\n$2\r\npe\r\n$1\r\n1\r\nPING\r\n*1\r\n$-5\r\n*1\r\n$4\r\nPING\r\n")
    data, closed = c.read_until_closed(timeout=5)
    assert data == b"+OK\r\n+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
    assert closed
    assert r.get("pe") == b"1"


# ---------------------------------------------------------------- protocol errors

@pytest.mark.parametrize("payload,message", [
    (b"*1\r\n$-5\r\n", "invalid bulk length"),
    (b"*1\r\n$abc\r\n", "invalid bulk length"),
    (b"*1\r\n$600000000\r\n", over_bulk_limit(600000000, 512 << 20)),
    (b"*abc\r\n", "invalid multibulk length"),
    (b"*3000000000\r\n", "invalid multibulk length"),
    (b"*1\r\n:5\r\n", "expected '$', got ':'"),
    (b"*2\r\n$3\r\nGET\r\nxx\r\n", "expected '$', got 'x'"),
    (b"x" * 70000, "too big inline request"),
    (b"*" + b"1" * 70000, "too big mbulk count string"),
    (b"*1\r\n$" + b"1" * 70000, "too big bulk count string"),
], ids=["negative-bulk", "non-numeric-bulk", "bulk-over-limit", "non-numeric-multibulk",
        "multibulk-over-int-max", "integer-instead-of-bulk", "garbage-instead-of-bulk",
        "inline-over-64k", "mbulk-count-over-64k", "bulk-count-over-64k"])
def test_protocol_errors_reply_and_close(c, payload, message):
    expect_protocol_error(c, payload, message)


def test_server_survives_protocol_errors(r, raw):
    for _ in range(20):
        x = raw()
        expect_protocol_error(x, b"*abc\r\n", "invalid multibulk length")
    assert r.ping() is True


# ---------------------------------------------------------------- proto-max-bulk-len

def test_proto_max_bulk_len_limit(small_bulk_server):
    srv = small_bulk_server
    limit = 1024 * 1024
    c = srv.raw()
    try:
        expect_protocol_error(c, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n",
                              over_bulk_limit(2000000, limit))
    finally:
        c.close()
    c = srv.raw()
    try:
        expect_protocol_error(c, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (limit + 1),
                              over_bulk_limit(limit + 1, limit))
    finally:
        c.close()
    c = srv.raw()
    try:
        value = os.urandom(limit)
        assert c.call("SET", "exact", value) == OK
        assert c.call_raw("STRLEN", "exact") == b":%d\r\n" % limit
        assert c.call("GET", "exact") == value
        assert c.call("CONFIG", "GET", "proto-max-bulk-len") == [b"proto-max-bulk-len", b"1048576"]
    finally:
        c.close()


# ---------------------------------------------------------------- unauthenticated limits

def test_unauthenticated_multibulk_length(auth_server):
    c = auth_server.raw(auth=False)
    try:
        expect_protocol_error(c, b"*11\r\n", "unauthenticated multibulk length")
    finally:
        c.close()


def test_unauthenticated_bulk_length(auth_server):
    c = auth_server.raw(auth=False)
    try:
        expect_protocol_error(c, b"*2\r\n$4\r\nAUTH\r\n$20000\r\n", "unauthenticated bulk length")
    finally:
        c.close()
    c = auth_server.raw(auth=False)
    try:
        expect_protocol_error(c, b"*1\r\n$16385\r\n", "unauthenticated bulk length")
    finally:
        c.close()


def test_unauthenticated_limits_boundaries(auth_server):
    # 10 arguments and 16384-byte bulks are still allowed before AUTH (answered with NOAUTH)
    c = auth_server.raw(auth=False)
    try:
        args = ["MSET"] + ["k%d" % i for i in range(9)]
        assert c.call(*args) == Err("NOAUTH Authentication required.")
        assert c.call("ECHO", "x" * 16384) == Err("NOAUTH Authentication required.")
        assert c.call("AUTH", PASSWORD) == OK
    finally:
        c.close()


def test_limits_lifted_after_auth(auth_server):
    c = auth_server.raw(auth=False)
    try:
        assert c.call("AUTH", PASSWORD) == OK
        args = ["MSET"]
        for i in range(10):
            args += ["ak%d" % i, "v%d" % i]
        assert len(args) > 11
        assert c.call(*args) == OK
        big = os.urandom(20000)
        assert c.call("SET", "abig", big) == OK
        assert c.call("GET", "abig") == big
        assert c.call("MGET", "ak0", "ak9") == [b"v0", b"v9"]
        assert c.call("DEL", "abig", *["ak%d" % i for i in range(10)]) == 11
    finally:
        c.close()


# ---------------------------------------------------------------- RESP3 exact shapes

def test_resp3_hello_map_bytes(raw):
    c = raw()
    c.send_cmd("HELLO", "3")
    v, rawbytes = c.read_reply_with_raw()
    assert rawbytes.startswith(b"%7\r\n$6\r\nserver\r\n")
    assert b"$5\r\nproto\r\n:3\r\n" in rawbytes
    assert b"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n" in rawbytes
    assert rawbytes.endswith(b"$7\r\nmodules\r\n*0\r\n")


def test_resp3_nulls(r, raw):
    c = raw(resp3=True)
    r.set("a", "1")
    assert c.call_raw("GET", "nokey") == b"_\r\n"
    assert c.call_raw("MGET", "a", "nokey") == b"*2\r\n$1\r\n1\r\n_\r\n"
    assert c.call_raw("GETDEL", "nokey") == b"_\r\n"
    assert c.call_raw("SET", "a", "2", "NX") == b"_\r\n"
    assert c.call_raw("SET", "newkey", "2", "GET") == b"_\r\n"
    assert c.call_raw("OBJECT", "ENCODING", "nokey") == b"_\r\n"
    assert c.call_raw("CLIENT", "GETNAME") == b"_\r\n"
    assert c.call_raw("MEMORY", "USAGE", "nokey") == b"_\r\n"
    assert c.call_raw("COMMAND", "INFO", "nosuchcmd") == b"*1\r\n_\r\n"
    r.flushall()
    assert c.call_raw("RANDOMKEY") == b"_\r\n"


def test_resp3_scalars_unchanged(r, raw):
    c = raw(resp3=True)
    assert c.call_raw("SET", "a", "1") == b"+OK\r\n"
    assert c.call_raw("EXISTS", "a") == b":1\r\n"
    assert c.call_raw("TTL", "a") == b":-1\r\n"
    assert c.call_raw("TYPE", "a") == b"+string\r\n"
    assert c.call_raw("PING") == b"+PONG\r\n"
    assert c.call_raw("ECHO", "xy") == b"$2\r\nxy\r\n"
    assert c.call_raw("KEYS", "*") == b"*1\r\n$1\r\na\r\n"
    assert c.call_raw("SCAN", "0") == b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n"
    assert c.call_raw("COMMAND", "GETKEYS", "set", "a", "b") == b"*1\r\n$1\r\na\r\n"
    t = c.call_raw("TIME")
    assert t.startswith(b"*2\r\n$")
    assert c.call_raw("FOO") == b"-ERR unknown command 'FOO', with args beginning with: \r\n"


def test_resp3_incrbyfloat_stays_bulk_string(raw):
    c = raw(resp3=True)
    assert c.call_raw("INCRBYFLOAT", "f", "2.5") == b"$3\r\n2.5\r\n"
    assert c.call_raw("INCRBYFLOAT", "f", "0.5") == b"$1\r\n3\r\n"


def test_resp3_config_get_is_a_map(raw):
    c = raw(resp3=True)
    v = c.call("CONFIG", "GET", "maxclients")
    assert isinstance(v, dict) and list(v.keys()) == [b"maxclients"]
    mc = v[b"maxclients"]
    assert c.call_raw("CONFIG", "GET", "maxclients") == b"%%1\r\n$10\r\nmaxclients\r\n$%d\r\n%s\r\n" % (len(mc), mc)
    assert c.call_raw("CONFIG", "GET", "nosuchparam") == b"%0\r\n"
    m = c.call("CONFIG", "GET", "*")
    assert isinstance(m, dict) and b"maxmemory" in m and b"timeout" in m


def test_resp3_verbatim_strings(r, raw):
    c = raw(resp3=True)
    r.set("k", "v")
    c.send_cmd("INFO", "keyspace")
    v, rawbytes = c.read_reply_with_raw()
    assert rawbytes.startswith(b"=") and b"\r\ntxt:# Keyspace\r\n" in rawbytes
    assert v.fmt == "txt" and b"db0:keys=1,expires=0" in v.data
    info = c.call("CLIENT", "INFO")
    assert info.fmt == "txt" and info.data.endswith(b"\n")
    lst = c.call("CLIENT", "LIST")
    assert lst.fmt == "txt" and b"resp=3" in lst.data


def test_resp3_command_info_flags_are_sets(raw):
    c = raw(resp3=True)
    c.send_cmd("COMMAND", "INFO", "get")
    v, rawbytes = c.read_reply_with_raw()
    assert rawbytes.startswith(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~")
    entry = v[0]
    assert isinstance(entry[2], list) and type(entry[2]).__name__ == "RespSet"
    assert Simple("readonly") in entry[2]


def test_resp3_then_back_to_resp2(raw):
    c = raw(resp3=True)
    assert c.call_raw("GET", "nokey") == b"_\r\n"
    c.call("HELLO", "2")
    assert c.call_raw("GET", "nokey") == b"$-1\r\n"
    v = c.call("CONFIG", "GET", "maxclients")
    assert isinstance(v, list) and v[0] == b"maxclients"


def test_resp3_on_one_connection_does_not_affect_others(r, raw):
    c3 = raw(resp3=True)
    c2 = raw()
    assert c3.call_raw("GET", "nokey") == b"_\r\n"
    assert c2.call_raw("GET", "nokey") == b"$-1\r\n"
    assert r.get("nokey") is None


# ---------------------------------------------------------------- query buffer limits

def _info_field(r, field):
    return r.info("memory").get(field)


@pytest.mark.skipif(os.environ.get("STRATAKV_TARGET", "stratakv") == "redis",
                    reason="query_buffers_reserved is stratakv's INFO field")
def test_large_bulk_reservation_is_counted_and_freed_on_disconnect(r, raw):
    """A header promising a big bulk reserves its buffer; the reservation shows in INFO and is
    released when the client goes away without sending the bytes."""
    assert _info_field(r, "query_buffers_reserved") == 0
    clients = [raw() for _ in range(3)]
    for i, c in enumerate(clients):
        c.send(b"*3\r\n$3\r\nSET\r\n$5\r\nbig:%d\r\n$100000000\r\npartial" % i)
    deadline = time.monotonic() + 5
    while _info_field(r, "query_buffers_reserved") < 3 * 100_000_000:
        assert time.monotonic() < deadline, "reservations not counted"
        time.sleep(0.02)
    for c in clients:
        c.close()
    deadline = time.monotonic() + 5
    while _info_field(r, "query_buffers_reserved") != 0:
        assert time.monotonic() < deadline, "reservations not released on disconnect"
        time.sleep(0.02)
    assert r.exists("big:0", "big:1", "big:2") == 0


def test_client_query_buffer_limit_closes_only_that_client(start_server):
    srv = start_server(client_query_buffer_limit="1mb")
    bystander = srv.client()
    bystander.set("safe", "value")
    from resp_util import RawConn
    greedy = RawConn(srv.host, srv.port)
    greedy.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4000000\r\n")
    try:
        greedy.send(b"x" * 2_000_000)
    except OSError:
        pass  # the server may already have closed the connection
    data, closed = greedy.read_until_closed(timeout=5)
    assert closed and data == b""
    assert bystander.get("safe") == b"value"
    assert bystander.exists("k") == 0
