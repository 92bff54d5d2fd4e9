"""String commands, with Redis 7 semantics and exact error texts."""

import time

import pytest

from resp_util import OK, Err

ERR_SYNTAX = Err("ERR syntax error")
ERR_NOT_INT = Err("ERR value is not an integer or out of range")
ERR_NOT_FLOAT = Err("ERR value is not a valid float")
ERR_OVERFLOW = Err("ERR increment or decrement would overflow")


def expire_err(cmd):
    return Err("ERR invalid expire time in '%s' command" % cmd)


def arity_err(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


@pytest.fixture
def c(r, raw):
    """A raw RESP2 connection on a freshly flushed server."""
    return raw()


# ---------------------------------------------------------------- GET / SET

def test_get_set_basic(r, c):
    assert r.get("nokey") is None
    assert c.call_raw("GET", "nokey") == b"$-1\r\n"
    assert c.call_raw("SET", "k", "v") == b"+OK\r\n"
    assert c.call_raw("GET", "k") == b"$1\r\nv\r\n"
    assert r.set("k", b"") is True
    assert c.call_raw("GET", "k") == b"$0\r\n\r\n"
    key = b"model@8@3@" + bytes(range(1, 40)) + b"{}/:%@"
    val = bytes(range(256)) * 4
    assert r.set(key, val) is True
    assert r.get(key) == val
    assert c.call("GET") == arity_err("get")
    assert c.call("GET", "a", "b") == arity_err("get")
    assert c.call("SET", "k") == arity_err("set")


def test_set_overwrites_and_clears_ttl(r):
    r.set("k", "v1", ex=100)
    assert r.ttl("k") > 0
    r.set("k", "v2")
    assert r.get("k") == b"v2"
    assert r.ttl("k") == -1


def test_set_ex_px(r, c):
    assert c.call("SET", "k", "v", "EX", "100") == OK
    assert 99 <= r.ttl("k") <= 100
    assert c.call("SET", "k", "v", "PX", "100000") == OK
    assert 99000 <= r.pttl("k") <= 100000
    assert c.call("SET", "k", "v", "ex", "50") == OK  # options are case-insensitive
    assert 49 <= r.ttl("k") <= 50


def test_set_exat_pxat(r, c):
    at = int(time.time()) + 200
    assert c.call("SET", "k", "v", "EXAT", str(at)) == OK
    assert r.expiretime("k") == at
    assert 198 <= r.ttl("k") <= 200
    atms = int(time.time() * 1000) + 300000
    assert c.call("SET", "k", "v", "PXAT", str(atms)) == OK
    assert r.pexpiretime("k") == atms
    # a time in the past: the key is set and immediately gone
    assert c.call("SET", "past", "v", "EXAT", "1") == OK
    assert r.get("past") is None
    assert r.exists("past") == 0
    assert c.call("SET", "past", "v", "PXAT", "1", "GET") is None
    assert r.exists("past") == 0


def test_set_nx_xx(r, c):
    assert c.call_raw("SET", "k", "v1", "XX") == b"$-1\r\n"
    assert r.exists("k") == 0
    assert c.call_raw("SET", "k", "v1", "NX") == b"+OK\r\n"
    assert c.call_raw("SET", "k", "v2", "NX") == b"$-1\r\n"
    assert r.get("k") == b"v1"
    assert c.call_raw("SET", "k", "v3", "XX") == b"+OK\r\n"
    assert r.get("k") == b"v3"
    assert r.set("k", "v4", nx=True) is None
    assert r.set("k", "v4", xx=True) is True


def test_set_keepttl(r, c):
    assert c.call("SET", "k", "v1", "EX", "100") == OK
    assert c.call("SET", "k", "v2", "KEEPTTL") == OK
    assert r.get("k") == b"v2"
    assert 98 <= r.ttl("k") <= 100
    assert c.call("SET", "k", "v3") == OK
    assert r.ttl("k") == -1
    assert c.call("SET", "nottl", "v", "KEEPTTL") == OK
    assert r.ttl("nottl") == -1


def test_set_get_option(r, c):
    assert c.call_raw("SET", "k", "v1", "GET") == b"$-1\r\n"
    assert r.get("k") == b"v1"
    assert c.call_raw("SET", "k", "v2", "GET") == b"$2\r\nv1\r\n"
    assert r.get("k") == b"v2"
    # NX + GET (allowed since 7.0): returns old value, does not set
    assert c.call("SET", "k", "v3", "NX", "GET") == b"v2"
    assert r.get("k") == b"v2"
    assert c.call("SET", "new", "n1", "NX", "GET") is None
    assert r.get("new") == b"n1"
    # XX + GET
    assert c.call("SET", "k", "v4", "XX", "GET") == b"v2"
    assert r.get("k") == b"v4"
    assert c.call("SET", "absent", "x", "XX", "GET") is None
    assert r.exists("absent") == 0
    # GET + EX + KEEPTTL interplay
    assert c.call("SET", "k", "v5", "GET", "EX", "100") == b"v4"
    assert 98 <= r.ttl("k") <= 100
    assert c.call("SET", "k", "v6", "KEEPTTL", "GET") == b"v5"
    assert 98 <= r.ttl("k") <= 100


def test_set_option_combinations_and_errors(r, c):
    assert c.call("SET", "k", "v", "NX", "XX") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "EX", "10", "PX", "100") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "EX", "10", "KEEPTTL") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "KEEPTTL", "PX", "10") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "EXAT", "10", "PXAT", "10") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "EX") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "FOO") == ERR_SYNTAX
    assert c.call("SET", "k", "v", "EX", "abc") == ERR_NOT_INT
    assert c.call("SET", "k", "v", "EX", "1.5") == ERR_NOT_INT
    assert c.call("SET", "k", "v", "EX", "0") == expire_err("set")
    assert c.call("SET", "k", "v", "EX", "-1") == expire_err("set")
    assert c.call("SET", "k", "v", "PX", "0") == expire_err("set")
    assert c.call("SET", "k", "v", "EXAT", "0") == expire_err("set")
    assert c.call("SET", "k", "v", "EX", "9223372036854775807") == expire_err("set")
    assert c.call("SET", "k", "v", "PX", "9223372036854775807") == expire_err("set")
    # none of the failing SETs created the key
    assert r.exists("k") == 0
    # valid combinations
    assert c.call("SET", "k", "v", "NX", "EX", "10") == OK
    assert c.call("SET", "k", "v", "XX", "PX", "10000", "GET") == b"v"
    assert 9000 <= r.pttl("k") <= 10000


def test_setnx(r, c):
    assert c.call("SETNX", "k", "v1") == 1
    assert c.call("SETNX", "k", "v2") == 0
    assert r.get("k") == b"v1"
    assert c.call("SETNX", "k") == arity_err("setnx")


def test_setex_psetex(r, c):
    assert c.call("SETEX", "k", "100", "v") == OK
    assert r.get("k") == b"v"
    assert 99 <= r.ttl("k") <= 100
    assert c.call("PSETEX", "p", "100000", "v") == OK
    assert 99000 <= r.pttl("p") <= 100000
    assert c.call("SETEX", "k", "0", "v") == expire_err("setex")
    assert c.call("SETEX", "k", "-10", "v") == expire_err("setex")
    assert c.call("PSETEX", "k", "-5", "v") == expire_err("psetex")
    assert c.call("SETEX", "k", "abc", "v") == ERR_NOT_INT
    assert c.call("SETEX", "k", "10") == arity_err("setex")


def test_getset(r, c):
    assert c.call_raw("GETSET", "k", "1") == b"$-1\r\n"
    assert c.call("GETSET", "k", "2") == b"1"
    assert r.get("k") == b"2"
    r.set("t", "x", ex=100)
    assert c.call("GETSET", "t", "y") == b"x"
    assert r.ttl("t") == -1  # GETSET discards the TTL


def test_getdel(r, c):
    r.set("k", "v")
    assert c.call("GETDEL", "k") == b"v"
    assert r.exists("k") == 0
    assert c.call_raw("GETDEL", "k") == b"$-1\r\n"


def test_getex(r, c):
    assert c.call_raw("GETEX", "nokey") == b"$-1\r\n"
    assert c.call("GETEX", "nokey", "EX", "10") is None
    assert r.exists("nokey") == 0
    r.set("k", "v")
    assert c.call("GETEX", "k") == b"v"
    assert r.ttl("k") == -1
    assert c.call("GETEX", "k", "EX", "100") == b"v"
    assert 99 <= r.ttl("k") <= 100
    assert c.call("GETEX", "k", "PX", "50000") == b"v"
    assert 49000 <= r.pttl("k") <= 50000
    at = int(time.time()) + 300
    assert c.call("GETEX", "k", "EXAT", str(at)) == b"v"
    assert r.expiretime("k") == at
    atms = int(time.time() * 1000) + 400000
    assert c.call("GETEX", "k", "PXAT", str(atms)) == b"v"
    assert r.pexpiretime("k") == atms
    assert c.call("GETEX", "k", "PERSIST") == b"v"
    assert r.ttl("k") == -1
    # errors
    assert c.call("GETEX", "k", "EX", "0") == expire_err("getex")
    assert c.call("GETEX", "k", "PX", "-1") == expire_err("getex")
    assert c.call("GETEX", "k", "EX", "abc") == ERR_NOT_INT
    assert c.call("GETEX", "k", "PERSIST", "EX", "10") == ERR_SYNTAX
    assert c.call("GETEX", "k", "EX", "10", "PX", "10") == ERR_SYNTAX
    assert c.call("GETEX", "k", "FOO") == ERR_SYNTAX
    assert c.call("GETEX", "k", "EX") == ERR_SYNTAX
    assert r.ttl("k") == -1
    # an EXAT in the past deletes the key, but still returns the value
    assert c.call("GETEX", "k", "EXAT", "1") == b"v"
    assert r.exists("k") == 0


GETEX_OPTIONS = [
    ("EX", "bad"), ("PX", "bad"), ("EXAT", "bad"), ("PXAT", "0"), ("EX", "-1"), ("EX", "0"),
    ("EX", "99999999999999999"), ("EXAT", "99999999999999999"), ("ex", "bad"),
    ("PERSIST",), ("PERSIST", "PERSIST"), ("EX", "10", "EX", "bad"), ("EX", "10", "EX", "20"),
    ("EX",), ("FOO",), ("KEEPTTL",), ("EX", "10", "PX", "10"), ("PERSIST", "EX", "10"),
    ("EX", "bad", "PERSIST"), ("EX", "bad", "FOO"),
]


def test_getex_checks_in_redis_order(same):
    """GETEX (t_string.c getexCommand): the options' syntax, then the key (missing: nil), then
    the time. Byte-equal to redis-server for a missing and for an existing key."""
    for opts in GETEX_OPTIONS:
        same("DEL", "gx")
        same("GETEX", "gx", *opts)
        same("SET", "gx", "v")
        same("GETEX", "gx", *opts)
        same("TTL", "gx")


SET_OPTIONS = [
    ("EX", "bad"), ("EX", "bad", "NX", "XX"), ("EX", "0", "NX", "XX"), ("EX", "bad", "FOO"),
    ("EX", "10", "EX", "bad"), ("EX", "10", "EX", "20"), ("EX", "bad", "KEEPTTL"),
    ("KEEPTTL", "KEEPTTL"), ("EX", "0", "GET"), ("NX", "NX"),
]


def test_set_checks_syntax_before_the_time(same):
    """SET, like GETEX, reads all of its options' syntax before it checks the time."""
    for opts in SET_OPTIONS:
        same("DEL", "sx")
        same("SET", "sx", "v", *opts)
        same("TTL", "sx")


# ---------------------------------------------------------------- multi-key

def test_mget_mset(r, c):
    assert c.call("MSET", "a", "1", "b", "2", "c", "3") == OK
    assert c.call_raw("MGET", "a", "nokey", "c") == b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n"
    assert r.mget(["a", "b", "c"]) == [b"1", b"2", b"3"]
    assert c.call("MSET", "a", "x", "a", "y") == OK  # last one wins
    assert r.get("a") == b"y"
    assert c.call("MSET", "a", "1", "b") == arity_err("mset")
    assert c.call("MSET") == arity_err("mset")
    assert c.call("MGET") == arity_err("mget")


def test_mset_clears_ttl(r, c):
    r.set("a", "1", ex=100)
    assert c.call("MSET", "a", "2") == OK
    assert r.ttl("a") == -1


def test_msetnx(r, c):
    assert c.call("MSETNX", "a", "1", "b", "2") == 1
    assert c.call("MSETNX", "b", "x", "c", "3") == 0  # all or nothing
    assert r.get("b") == b"2"
    assert r.exists("c") == 0
    assert c.call("MSETNX", "c", "3", "d", "4") == 1
    assert r.mget("a", "b", "c", "d") == [b"1", b"2", b"3", b"4"]
    assert c.call("MSETNX", "a", "1", "b") == arity_err("msetnx")


# ---------------------------------------------------------------- APPEND / STRLEN / ranges

def test_append_strlen(r, c):
    assert c.call("APPEND", "k", "hello") == 5
    assert c.call("APPEND", "k", " world") == 11
    assert r.get("k") == b"hello world"
    assert c.call("STRLEN", "k") == 11
    assert c.call("STRLEN", "nokey") == 0
    r.set("n", 12345)
    assert c.call("STRLEN", "n") == 5  # length of the integer's text
    assert c.call("APPEND", "n", "6") == 6
    assert r.get("n") == b"123456"
    assert r.incr("n") == 123457
    r.set("t", "x", ex=100)
    assert c.call("APPEND", "t", "y") == 2
    assert 98 <= r.ttl("t") <= 100  # APPEND keeps the TTL


def test_substr(r, c):
    """SUBSTR: Redis 7.0's deprecated name of GETRANGE, same handler."""
    r.set("k", "hello")
    for args in (("0", "-1"), ("1", "3"), ("-3", "-1"), ("3", "1"), ("5", "10")):
        assert c.call_raw("SUBSTR", "k", *args) == c.call_raw("GETRANGE", "k", *args)
    assert c.call_raw("SUBSTR", "nokey", "0", "-1") == b"$0\r\n\r\n"
    assert c.call("SUBSTR", "k", "x", "1") == ERR_NOT_INT
    assert c.call("SUBSTR", "k", "1") == arity_err("substr")


def test_getrange(r, c):
    r.set("k", "hello")
    assert c.call("GETRANGE", "k", "0", "-1") == b"hello"
    assert c.call("GETRANGE", "k", "0", "0") == b"h"
    assert c.call("GETRANGE", "k", "1", "3") == b"ell"
    assert c.call("GETRANGE", "k", "-3", "-1") == b"llo"
    assert c.call("GETRANGE", "k", "-100", "-4") == b"he"
    assert c.call("GETRANGE", "k", "2", "100") == b"llo"
    assert c.call_raw("GETRANGE", "k", "5", "10") == b"$0\r\n\r\n"
    assert c.call("GETRANGE", "k", "3", "1") == b""
    assert c.call("GETRANGE", "k", "-1", "-100") == b""
    assert c.call_raw("GETRANGE", "nokey", "0", "-1") == b"$0\r\n\r\n"
    assert c.call("GETRANGE", "k", "abc", "1") == ERR_NOT_INT
    r.set("n", 1234)
    assert c.call("GETRANGE", "n", "1", "2") == b"23"


def test_setrange(r, c):
    assert c.call("SETRANGE", "k", "5", "x") == 6
    assert r.get("k") == b"\x00\x00\x00\x00\x00x"
    r.set("s", "Hello World")
    assert c.call("SETRANGE", "s", "6", "Redis") == 11
    assert r.get("s") == b"Hello Redis"
    assert c.call("SETRANGE", "s", "11", "!!") == 13
    assert r.get("s") == b"Hello Redis!!"
    assert c.call("SETRANGE", "s", "0", "") == 13  # empty value: no-op, returns length
    assert c.call("SETRANGE", "s", "100", "") == 13
    assert c.call("SETRANGE", "nokey", "0", "") == 0
    assert c.call("SETRANGE", "nokey", "10", "") == 0
    assert r.exists("nokey") == 0
    assert c.call("SETRANGE", "s", "-1", "x") == Err("ERR offset is out of range")
    assert c.call("SETRANGE", "s", "abc", "x") == ERR_NOT_INT
    r.set("n", 12345)
    assert c.call("SETRANGE", "n", "1", "x") == 5
    assert r.get("n") == b"1x345"


def test_setrange_and_append_respect_proto_max_bulk_len(start_server):
    srv = start_server(proto_max_bulk_len="1mb")
    c = srv.raw()
    try:
        limit = 1024 * 1024
        too_big = Err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        assert c.call("SETRANGE", "k", str(limit), "x") == too_big
        assert c.call("EXISTS", "k") == 0
        assert c.call("SETRANGE", "k", str(limit - 1), "x") == limit
        assert c.call("STRLEN", "k") == limit
        assert c.call("APPEND", "k", "y") == too_big
        assert c.call("STRLEN", "k") == limit
    finally:
        c.close()


# ---------------------------------------------------------------- counters

def test_incr_decr(r, c):
    assert c.call_raw("INCR", "n") == b":1\r\n"
    assert c.call("INCR", "n") == 2
    assert c.call("INCRBY", "n", "10") == 12
    assert c.call("DECR", "n") == 11
    assert c.call("DECRBY", "n", "20") == -9
    assert c.call("INCRBY", "n", "-1") == -10
    assert c.call("DECRBY", "fresh", "5") == -5
    assert r.get("n") == b"-10"
    r.set("t", "5", ex=100)
    assert c.call("INCR", "t") == 6
    assert 98 <= r.ttl("t") <= 100  # INCR keeps the TTL


def test_incr_errors(r, c):
    r.set("s", "abc")
    assert c.call("INCR", "s") == ERR_NOT_INT
    r.set("sp", " 1")
    assert c.call("INCR", "sp") == ERR_NOT_INT
    r.set("f", "1.5")
    assert c.call("INCR", "f") == ERR_NOT_INT
    r.set("big", "9223372036854775808")
    assert c.call("INCR", "big") == ERR_NOT_INT
    r.set("e", "")
    assert c.call("INCR", "e") == ERR_NOT_INT
    r.set("n", "10")
    assert c.call("INCRBY", "n", "abc") == ERR_NOT_INT
    assert c.call("INCRBY", "n", "1.0") == ERR_NOT_INT
    assert c.call("INCRBY", "n", "9223372036854775808") == ERR_NOT_INT
    assert c.call("INCRBY", "n") == arity_err("incrby")
    assert r.get("n") == b"10"


def test_incr_overflow(r, c):
    r.set("max", "9223372036854775807")
    assert c.call("INCR", "max") == ERR_OVERFLOW
    assert c.call("INCRBY", "max", "1") == ERR_OVERFLOW
    assert r.get("max") == b"9223372036854775807"
    r.set("min", "-9223372036854775808")
    assert c.call("DECR", "min") == ERR_OVERFLOW
    assert c.call("DECRBY", "min", "1") == ERR_OVERFLOW
    assert r.get("min") == b"-9223372036854775808"
    r.set("n", "10")
    assert c.call("INCRBY", "n", "9223372036854775807") == ERR_OVERFLOW
    # DECRBY with LLONG_MIN cannot be negated: its own message
    assert c.call("DECRBY", "n", "-9223372036854775808") == Err("ERR decrement would overflow")
    assert c.call("INCRBY", "n", "-9223372036854775808") == -9223372036854775798
    assert r.get("n") == b"-9223372036854775798"


def test_incrbyfloat(r, c):
    r.set("f", "10.50")
    assert c.call_raw("INCRBYFLOAT", "f", "0.1") == b"$4\r\n10.6\r\n"
    assert r.get("f") == b"10.6"
    assert c.call("INCRBYFLOAT", "g", "3.0") == b"3"
    assert c.call("INCRBYFLOAT", "g", "1.5") == b"4.5"
    assert c.call("INCRBYFLOAT", "g", "-4.5") == b"0"
    assert c.call("INCRBYFLOAT", "g", "5.0e3") == b"5000"
    assert c.call("INCRBYFLOAT", "g", "2.5e-1") == b"5000.25"
    r.set("e", "1e3")
    assert c.call("INCRBYFLOAT", "e", "0") == b"1000"
    r.set("i", 7)
    assert c.call("INCRBYFLOAT", "i", "0.25") == b"7.25"
    assert c.call("INCRBYFLOAT", "neg", "-0.0") == b"0"
    assert c.call("INCRBYFLOAT", "prec", "1.23456789012345678") == b"1.23456789012345678"
    assert r.incrbyfloat("py", 2.5) == 2.5


def test_incrbyfloat_uses_long_double_precision(r, c):
    # Redis computes in long double and prints with %.17Lf (trailing zeros removed)
    r.set("f", "10.6")
    assert c.call("INCRBYFLOAT", "f", "5.0e3") == b"5010.60000000000000009"


def test_incrbyfloat_errors(r, c):
    r.set("s", "abc")
    assert c.call("INCRBYFLOAT", "s", "1") == ERR_NOT_FLOAT
    r.set("f", "1.5")
    assert c.call("INCRBYFLOAT", "f", "abc") == ERR_NOT_FLOAT
    assert c.call("INCRBYFLOAT", "f", "nan") == ERR_NOT_FLOAT
    assert c.call("INCRBYFLOAT", "f", "") == ERR_NOT_FLOAT
    assert c.call("INCRBYFLOAT", "f", "inf") == Err("ERR increment would produce NaN or Infinity")
    assert c.call("INCRBYFLOAT", "f") == arity_err("incrbyfloat")
    assert r.get("f") == b"1.5"
