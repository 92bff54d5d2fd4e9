"""Keyspace commands: DEL/EXISTS/TYPE/RENAME/COPY/KEYS/SCAN/expiry/OBJECT/MEMORY."""

import time

import pytest

from resp_util import OK, Err

ERR_SYNTAX = Err("ERR syntax error")
ERR_NOT_INT = Err("ERR value is not an integer or out of range")
ERR_NO_SUCH_KEY = Err("ERR no such key")
ERR_EXPIRE_OPTS = Err("ERR NX and XX, GT or LT options at the same time are not compatible")
ERR_GT_LT = Err("ERR GT and LT options at the same time are not compatible")
ERR_LFU = Err(
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
    "that when switching between policies at runtime LRU and LFU data will take some time "
    "to adjust."
)


@pytest.fixture
def c(r, raw):
    return raw()


def scan_all(c, *extra):
    """Iterate SCAN to cursor 0; return (all keys as a list, number of calls)."""
    cursor = b"0"
    keys = []
    calls = 0
    while True:
        reply = c.call("SCAN", cursor, *extra)
        assert isinstance(reply, list) and len(reply) == 2, reply
        cursor, batch = reply
        assert isinstance(cursor, bytes) and cursor.isdigit(), cursor
        assert isinstance(batch, list)
        keys.extend(batch)
        calls += 1
        assert calls < 100000
        if cursor == b"0":
            return keys, calls


# ---------------------------------------------------------------- DEL / EXISTS / TYPE

def test_del_unlink(r, c):
    r.mset({"a": 1, "b": 2, "c": 3})
    assert c.call("DEL", "a", "a", "nokey") == 1
    assert c.call("UNLINK", "b", "c", "nokey") == 2
    assert c.call("DEL", "a") == 0
    assert r.dbsize() == 0
    assert c.call("DEL") == Err("ERR wrong number of arguments for 'del' command")


def test_exists_counts_duplicates(r, c):
    r.set("a", 1)
    r.set("b", 2)
    assert c.call("EXISTS", "a") == 1
    assert c.call("EXISTS", "nokey") == 0
    assert c.call("EXISTS", "a", "a", "b", "nokey") == 3
    assert c.call("EXISTS", "a", "a", "a") == 3


def test_touch(r, c):
    r.set("a", 1)
    assert c.call("TOUCH", "a", "a", "nokey") == 2
    assert c.call("TOUCH", "nokey") == 0


def test_type(r, c):
    r.set("s", "v")
    assert c.call_raw("TYPE", "s") == b"+string\r\n"
    assert c.call_raw("TYPE", "nokey") == b"+none\r\n"
    assert r.type("s") == b"string"


# ---------------------------------------------------------------- RENAME / COPY

def test_rename(r, c):
    r.set("src", "v", ex=100)
    assert c.call("RENAME", "src", "dst") == OK
    assert r.exists("src") == 0
    assert r.get("dst") == b"v"
    assert 98 <= r.ttl("dst") <= 100  # TTL carried over
    r.set("other", "o")
    assert c.call("RENAME", "other", "dst") == OK  # overwrites, drops dst's TTL
    assert r.get("dst") == b"o"
    assert r.ttl("dst") == -1
    assert c.call("RENAME", "nokey", "x") == ERR_NO_SUCH_KEY
    assert c.call("RENAME", "dst", "dst") == OK
    assert r.get("dst") == b"o"


def test_renamenx(r, c):
    r.set("a", "1", ex=100)
    r.set("b", "2")
    assert c.call("RENAMENX", "a", "b") == 0
    assert r.get("a") == b"1" and r.get("b") == b"2"
    assert c.call("RENAMENX", "a", "c") == 1
    assert r.get("c") == b"1" and r.exists("a") == 0
    assert 98 <= r.ttl("c") <= 100
    assert c.call("RENAMENX", "nokey", "x") == ERR_NO_SUCH_KEY
    assert c.call("RENAMENX", "c", "c") == 0


def test_copy(r, c):
    r.set("src", "v", ex=100)
    assert c.call("COPY", "src", "dst") == 1
    assert r.get("dst") == b"v"
    assert 98 <= r.ttl("dst") <= 100  # TTL copied
    assert r.get("src") == b"v"
    r.set("src", "w")
    assert c.call("COPY", "src", "dst") == 0  # exists, no REPLACE
    assert r.get("dst") == b"v"
    assert c.call("COPY", "src", "dst", "REPLACE") == 1
    assert r.get("dst") == b"w"
    assert r.ttl("dst") == -1
    assert c.call("COPY", "src", "d0", "DB", "0") == 1
    assert r.get("d0") == b"w"
    assert c.call("COPY", "nokey", "x") == 0
    assert c.call("COPY", "src", "src") == Err("ERR source and destination objects are the same")
    assert c.call("COPY", "src", "x", "DB", "abc") == ERR_NOT_INT
    assert c.call("COPY", "src", "x", "FOO") == ERR_SYNTAX
    # the copy is independent of the source
    r.append("src", "z")
    assert r.get("d0") == b"w"


def test_copy_to_other_db_fails(r, c):
    r.set("src", "v")
    assert c.call("COPY", "src", "x", "DB", "1") == Err("ERR DB index is out of range")


# ---------------------------------------------------------------- KEYS

def test_keys_glob_patterns(r, c):
    names = ["hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "h?llo", "h[a]llo", "other"]
    for n in names:
        r.set(n, 1)

    def keys(p):
        reply = c.call("KEYS", p)
        assert isinstance(reply, list)
        assert len(reply) == len(set(reply))
        return sorted(k.decode() for k in reply)

    assert keys("*") == sorted(names)
    assert keys("h?llo") == sorted(["hello", "hallo", "hxllo", "h*llo", "h?llo"])
    assert keys("h*llo") == sorted(n for n in names if n != "other")
    assert keys("h[ae]llo") == ["hallo", "hello"]
    assert keys("h[^e]llo") == sorted(["hallo", "hxllo", "h*llo", "h?llo"])
    assert keys("h[a-b]llo") == ["hallo"]
    assert keys("h\\*llo") == ["h*llo"]
    assert keys("h\\?llo") == ["h?llo"]
    assert keys("h\\[a\\]llo") == ["h[a]llo"]
    assert keys("nomatch*") == []
    assert keys("other") == ["other"]
    assert keys("*t*r") == ["other"]
    assert c.call_raw("KEYS", "nomatch*") == b"*0\r\n"


def test_keys_skips_expired(r, c):
    r.set("live", 1)
    r.set("dead", 1, px=1)
    time.sleep(0.05)
    assert c.call("KEYS", "*") == [b"live"]


# ---------------------------------------------------------------- SCAN

def test_scan_iterates_every_key(r, c):
    n = 3000
    expected = set()
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        k = "key:%d" % i
        expected.add(k.encode())
        pipe.set(k, i)
    pipe.execute()
    keys, calls = scan_all(c, "COUNT", "100")
    assert set(keys) == expected
    assert calls > 1  # COUNT is a hint, but 3000 keys do not come back in one call of 100
    keys, _ = scan_all(c)
    assert set(keys) == expected
    keys, _ = scan_all(c, "COUNT", "1000")
    assert set(keys) == expected


def test_scan_match_and_type(r, c):
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set("user:%d" % i, i)
        pipe.set("item:%d" % i, i)
    pipe.execute()
    keys, _ = scan_all(c, "MATCH", "user:1*", "COUNT", "50")
    assert set(keys) == {("user:%d" % i).encode() for i in range(1000) if str(i).startswith("1")}
    keys, _ = scan_all(c, "MATCH", "nomatch*")
    assert keys == []
    keys, _ = scan_all(c, "TYPE", "string", "COUNT", "200")
    assert len(set(keys)) == 2000
    keys, _ = scan_all(c, "TYPE", "list")
    assert keys == []
    keys, _ = scan_all(c, "MATCH", "item:99*", "TYPE", "string")
    assert set(keys) == {b"item:99"} | {("item:99%d" % i).encode() for i in range(10)}
    # redis-py's scan_iter drives the same cursor protocol
    assert set(r.scan_iter(match="item:5*", count=100)) == {
        ("item:%d" % i).encode() for i in range(1000) if str(i).startswith("5")}


def test_scan_empty_and_errors(r, c):
    assert c.call_raw("SCAN", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    assert c.call("SCAN", "abc") == Err("ERR invalid cursor")
    assert c.call("SCAN", "0", "COUNT", "0") == ERR_SYNTAX
    assert c.call("SCAN", "0", "COUNT", "abc") == ERR_NOT_INT
    assert c.call("SCAN", "0", "FOO", "x") == ERR_SYNTAX
    assert c.call("SCAN", "0", "MATCH") == ERR_SYNTAX


# ---------------------------------------------------------------- RANDOMKEY / DBSIZE / FLUSH

def test_randomkey_and_dbsize(r, c):
    assert c.call_raw("RANDOMKEY") == b"$-1\r\n"
    assert c.call_raw("DBSIZE") == b":0\r\n"
    names = {("rk%d" % i).encode() for i in range(20)}
    for n in names:
        r.set(n, 1)
    assert c.call("DBSIZE") == 20
    seen = {c.call("RANDOMKEY") for _ in range(50)}
    assert seen <= names
    assert len(seen) > 1


def test_flushdb_flushall(r, c):
    for i in range(10):
        r.set("f%d" % i, i)
    assert c.call("FLUSHDB") == OK
    assert r.dbsize() == 0
    r.set("a", 1)
    assert c.call("FLUSHALL") == OK
    assert r.dbsize() == 0
    r.set("a", 1)
    assert c.call("FLUSHALL", "SYNC") == OK
    assert r.dbsize() == 0
    r.set("a", 1)
    assert c.call("FLUSHALL", "ASYNC") == OK
    assert r.dbsize() == 0
    assert r.get("a") is None
    r.set("a", 1)
    assert c.call("FLUSHDB", "ASYNC") == OK
    assert r.dbsize() == 0
    assert c.call("FLUSHALL", "FOO") == ERR_SYNTAX
    assert c.call("FLUSHDB", "SYNC", "ASYNC") == ERR_SYNTAX


# ---------------------------------------------------------------- expiry

def test_ttl_pttl_states(r, c):
    assert c.call("TTL", "nokey") == -2
    assert c.call("PTTL", "nokey") == -2
    r.set("k", "v")
    assert c.call("TTL", "k") == -1
    assert c.call("PTTL", "k") == -1
    r.pexpire("k", 5000)
    assert 4000 < c.call("PTTL", "k") <= 5000
    assert c.call("TTL", "k") in (4, 5)


def test_expire_family(r, c):
    r.set("k", "v")
    assert c.call("EXPIRE", "k", "100") == 1
    assert 99 <= r.ttl("k") <= 100
    assert c.call("PEXPIRE", "k", "200000") == 1
    assert 199000 <= r.pttl("k") <= 200000
    at = int(time.time()) + 500
    assert c.call("EXPIREAT", "k", str(at)) == 1
    assert c.call("EXPIRETIME", "k") == at
    assert c.call("PEXPIRETIME", "k") == at * 1000
    atms = int(time.time() * 1000) + 600000
    assert c.call("PEXPIREAT", "k", str(atms)) == 1
    assert c.call("PEXPIRETIME", "k") == atms
    assert c.call("EXPIRETIME", "k") == (atms + 500) // 1000
    assert c.call("EXPIRE", "nokey", "10") == 0
    assert c.call("PEXPIRE", "nokey", "10") == 0
    assert c.call("EXPIREAT", "nokey", "10") == 0
    assert c.call("EXPIRETIME", "nokey") == -2
    assert c.call("PEXPIRETIME", "nokey") == -2
    r.set("p", "v")
    assert c.call("EXPIRETIME", "p") == -1
    assert c.call("PEXPIRETIME", "p") == -1


def test_expire_in_the_past_deletes(r, c):
    for cmd, arg in (("EXPIRE", "0"), ("EXPIRE", "-5"), ("PEXPIRE", "-1"),
                     ("EXPIREAT", "1"), ("PEXPIREAT", "1")):
        r.set("k", "v")
        assert c.call(cmd, "k", arg) == 1, cmd
        assert r.exists("k") == 0, cmd
        assert c.call("TTL", "k") == -2


def test_expire_options(r, c):
    r.set("k", "v")
    assert c.call("EXPIRE", "k", "100", "XX") == 0  # no TTL yet
    assert c.call("EXPIRE", "k", "100", "GT") == 0  # no TTL counts as infinite
    assert r.ttl("k") == -1
    assert c.call("EXPIRE", "k", "100", "NX") == 1
    assert c.call("EXPIRE", "k", "50", "NX") == 0
    assert c.call("EXPIRE", "k", "50", "GT") == 0
    assert c.call("EXPIRE", "k", "200", "GT") == 1
    assert 199 <= r.ttl("k") <= 200
    assert c.call("EXPIRE", "k", "300", "LT") == 0
    assert c.call("EXPIRE", "k", "10", "LT") == 1
    assert 9 <= r.ttl("k") <= 10
    assert c.call("EXPIRE", "k", "20", "XX") == 1
    assert 19 <= r.ttl("k") <= 20
    assert c.call("PEXPIRE", "k", "30000", "XX", "GT") == 1
    assert 29000 <= r.pttl("k") <= 30000
    r.set("p", "v")
    assert c.call("EXPIRE", "p", "10", "LT") == 1  # any TTL is lower than infinite
    assert c.call("EXPIRE", "k", "10", "NX", "XX") == ERR_EXPIRE_OPTS
    assert c.call("EXPIRE", "k", "10", "NX", "GT") == ERR_EXPIRE_OPTS
    assert c.call("PEXPIRE", "k", "10", "NX", "LT") == ERR_EXPIRE_OPTS
    assert c.call("EXPIREAT", "k", "10", "NX", "XX") == ERR_EXPIRE_OPTS
    assert c.call("EXPIRE", "k", "10", "GT", "LT") == ERR_GT_LT
    assert c.call("EXPIRE", "k", "10", "FOO") == Err("ERR Unsupported option FOO")
    assert c.call("EXPIRE", "k", "abc") == ERR_NOT_INT
    assert c.call("EXPIRE", "k", "9223372036854775807") == Err("ERR invalid expire time in 'expire' command")
    assert c.call("PEXPIRE", "k", "9223372036854775807") == Err("ERR invalid expire time in 'pexpire' command")
    assert c.call("EXPIREAT", "k", "9223372036854775807") == Err("ERR invalid expire time in 'expireat' command")


def test_persist(r, c):
    r.set("k", "v", ex=100)
    assert c.call("PERSIST", "k") == 1
    assert r.ttl("k") == -1
    assert c.call("PERSIST", "k") == 0
    assert c.call("PERSIST", "nokey") == 0


def test_lazy_expiry(r, c):
    r.set("k", "v", px=100)
    r.set("keep", "v")
    assert r.get("k") == b"v"
    time.sleep(0.25)
    assert c.call("GET", "k") is None
    assert c.call("EXISTS", "k") == 0
    assert c.call("TTL", "k") == -2
    assert c.call("STRLEN", "k") == 0
    assert c.call("GET", "keep") == b"v"
    # an expired key does not block SET NX
    r.set("nx", "old", px=50)
    time.sleep(0.15)
    assert c.call("SET", "nx", "new", "NX") == OK
    assert r.get("nx") == b"new"
    assert r.ttl("nx") == -1


def test_active_expiry(r, c):
    pipe = r.pipeline(transaction=False)
    for i in range(200):
        pipe.set("vol:%d" % i, "x", px=200)
    for i in range(20):
        pipe.set("stay:%d" % i, "x")
    pipe.execute()
    assert c.call("DBSIZE") == 220
    # never touch the volatile keys again: only active expiry can remove them
    deadline = time.monotonic() + 3.0
    size = None
    while time.monotonic() < deadline:
        size = c.call("DBSIZE")
        if size == 20:
            break
        time.sleep(0.05)
    assert size == 20, "active expiry did not remove the expired keys (DBSIZE=%s)" % size
    info = r.info("keyspace")
    assert info["db0"]["keys"] == 20
    assert info["db0"]["expires"] == 0


# ---------------------------------------------------------------- OBJECT / MEMORY

def test_object_encoding(r, c):
    cases = [
        ("12345", b"int"),
        ("-5", b"int"),
        ("0", b"int"),
        ("9223372036854775807", b"int"),
        ("12345678901234567890", b"embstr"),  # out of long long range
        ("01", b"embstr"),  # not the canonical form of an integer
        ("1.5", b"embstr"),
        ("hello", b"embstr"),
        ("a" * 44, b"embstr"),
        ("a" * 45, b"raw"),
        ("x" * 1000, b"raw"),
    ]
    for i, (value, enc) in enumerate(cases):
        r.set("e%d" % i, value)
        assert c.call("OBJECT", "ENCODING", "e%d" % i) == enc, value
    assert c.call_raw("OBJECT", "ENCODING", "nokey") == b"$-1\r\n"
    r.set("ap", "hello")
    r.append("ap", "!")
    assert c.call("OBJECT", "ENCODING", "ap") == b"raw"  # APPEND makes it raw


def test_object_freq_idletime(r, c):
    r.set("k", "v")
    assert c.call("OBJECT", "FREQ", "k") == ERR_LFU
    idle = c.call("OBJECT", "IDLETIME", "k")
    assert isinstance(idle, int) and 0 <= idle <= 2
    assert c.call_raw("OBJECT", "IDLETIME", "nokey") == b"$-1\r\n"
    assert c.call("OBJECT", "NOSUCH", "k") == Err("ERR unknown subcommand 'NOSUCH'. Try OBJECT HELP.")
    assert c.call("OBJECT", "IDLETIME") == Err("ERR wrong number of arguments for 'object|idletime' command")


def test_memory_usage(r, c):
    r.set("small", "v")
    r.set("big", "x" * 100000)
    small = c.call("MEMORY", "USAGE", "small")
    big = c.call("MEMORY", "USAGE", "big")
    assert isinstance(small, int) and small >= 1
    assert isinstance(big, int) and big >= 100000
    assert big < 100000 * 2
    assert c.call_raw("MEMORY", "USAGE", "nokey") == b"$-1\r\n"
    assert c.call("MEMORY", "USAGE", "big", "SAMPLES", "0") == big
    assert c.call("MEMORY", "USAGE") == Err("ERR wrong number of arguments for 'memory|usage' command")
