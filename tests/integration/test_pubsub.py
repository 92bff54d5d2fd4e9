"""Pub/Sub and keyspace notifications (docs/pubsub.md), compared with redis-server (Redis 7.0)
in the same run wherever Redis has the behaviour: (un)subscribe replies and counts, RESP2's
subscribed mode and its error, RESP3 pushes, messages and pattern messages, shard channels,
PUBSUB introspection, keyspace events of every command family, CONFIG round trips, redis-py's
pubsub(), the output buffer limit; then stratakv's own: delivery across I/O threads, events of
eviction, demotion and promotion, CLIENT LIST fields, cluster mode."""

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import harness
from harness import launch_redis, stop_servers
from resp_util import Err, Push, RawConn, Simple

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"
KiB, MiB = 1 << 10, 1 << 20


class Pair:
    """The same client on both servers: every reply's raw bytes must be identical."""

    def __init__(self, ours, theirs):
        self.ours, self.theirs = ours, theirs

    def send(self, *args, replies=1):
        """Sends `args` to both and reads `replies` replies from each; asserts them equal."""
        got = []
        for c in (self.ours, self.theirs):
            c.send_cmd(*args)
            got.append([c.read_raw_reply() for _ in range(replies)])
        assert got[0] == got[1], "%r: stratakv %r, redis %r" % (args, got[0], got[1])
        return got[0]

    def read(self, n=1, unordered=False):
        """Reads `n` replies (messages) from both; asserts them equal (as multisets when
        `unordered`: Redis walks its pattern dict in hash order)."""
        got = [[c.read_raw_reply() for _ in range(n)] for c in (self.ours, self.theirs)]
        if unordered:
            got = [sorted(g) for g in got]
        assert got[0] == got[1], "stratakv %r, redis %r" % (got[0], got[1])
        return got[0]

    def quiet(self, wait=0.2):
        """Asserts neither connection received anything more."""
        time.sleep(wait)
        for c in (self.ours, self.theirs):
            c.sock.setblocking(False)
            try:
                data = c.sock.recv(1 << 16)
            except BlockingIOError:
                data = b""
            finally:
                c.sock.setblocking(True)
                c.sock.settimeout(c.timeout)
            assert data == b"" and not c.buf, "unexpected bytes %r" % (bytes(c.buf) + data)


@pytest.fixture
def pair(r, raw, redis_srv):
    """pair(resp3=False) -> a Pair of fresh connections; both servers flushed, keyspace
    notifications off."""
    redis_srv.raw().call("FLUSHALL")

    def make(resp3=False):
        return Pair(raw(resp3=resp3), raw(redis_srv, resp3=resp3))

    yield make
    for srv in (None, redis_srv):
        c = raw(srv)
        c.call("CONFIG", "SET", "notify-keyspace-events", "")
        c.call("CONFIG", "SET", "client-output-buffer-limit", harness_default_limits())


def harness_default_limits():
    return "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"


# ---- subscribe, unsubscribe, subscribed mode --------------------------------

def test_resp2_subscribe_counts_and_subscribed_mode(pair):
    p = pair()
    p.send("SUBSCRIBE", "a", "b", "a", replies=3)  # a repeat is answered, not counted
    p.send("PSUBSCRIBE", "p*", "q*", replies=2)
    p.send("SSUBSCRIBE", "s1", replies=1)  # counts shard channels alone
    # RESP2's subscribed mode: PING answers ["pong", arg]; other commands are refused.
    p.send("PING")
    p.send("PING", "hi")
    for refused in (("GET", "k"), ("SET", "k", "v"), ("CONFIG", "GET", "maxmemory"),
                    ("MULTI",), ("PUBLISH", "a", "x"), ("CLIENT", "ID")):
        p.send(*refused)
    p.send("NOSUCH")  # an unknown command is that error first
    p.send("SUBSCRIBE")  # and a wrong arity
    p.send("UNSUBSCRIBE", "b", "never", replies=2)
    p.send("PUNSUBSCRIBE", "q*")
    p.send("PUNSUBSCRIBE")  # all: p*
    p.send("PUNSUBSCRIBE")  # none left: [punsubscribe, nil, count]
    p.send("UNSUBSCRIBE")  # all: a (the shard channel is still subscribed)
    p.send("GET", "k")  # still subscribed (s1)
    p.send("SUNSUBSCRIBE", "s1")
    p.send("UNSUBSCRIBE")  # nothing: [unsubscribe, nil, 0]
    p.send("SUNSUBSCRIBE")
    p.send("GET", "k")  # normal again
    p.send("PING")


def test_reset_and_quit_in_subscribed_mode(pair):
    p = pair()
    p.send("SUBSCRIBE", "x", "y", replies=2)
    p.send("PSUBSCRIBE", "z*")
    p.send("RESET")  # drops every subscription, no reply for them
    p.send("GET", "k")
    p.send("PUBSUB", "NUMSUB", "x", "y")
    p.send("PUBSUB", "NUMPAT")
    p.send("SUBSCRIBE", "x")
    p.send("QUIT")
    for c in (p.ours, p.theirs):
        assert c.read_until_closed(timeout=5)[1]


def test_publish_messages_pattern_messages_and_payloads(pair):
    sub, pub = pair(), pair()
    sub.send("SUBSCRIBE", "news", "other", replies=2)
    sub.send("PSUBSCRIBE", "n*", "*s", "zz*", replies=3)
    assert pub.send("PUBLISH", "news", "hello") == [b":3\r\n"]
    sub.read(1)  # the channel's subscribers come first
    sub.read(2, unordered=True)  # then one pmessage per matching pattern
    pub.send("PUBLISH", "nobody", "x")
    sub.read(1)  # n*
    pub.send("PUBLISH", "void", "x")  # nobody listens
    for payload in (b"", b"a\r\nb\x00c", b"\xff" * 100, b"L" * (100 * KiB)):
        pub.send("PUBLISH", "other", payload)
        sub.read(1)
    sub.quiet()
    sub.send("UNSUBSCRIBE", "news")
    pub.send("PUBLISH", "news", "again")  # patterns only now
    sub.read(2, unordered=True)
    sub.quiet()


def test_resp3_pushes_and_any_command_while_subscribed(pair):
    sub, pub = pair(resp3=True), pair()
    sub.send("SUBSCRIBE", "a")
    sub.send("PSUBSCRIBE", "a*")
    sub.send("GET", "k")  # RESP3 has no subscribed mode
    sub.send("SET", "k", "v")
    sub.send("PING")
    pub.send("PUBLISH", "a", "m1")
    sub.read(2)  # >3 message, >4 pmessage
    sub.send("PUBLISH", "a", "self", replies=3)  # its own messages come before the reply
    sub.send("GET", "k")
    sub.send("SSUBSCRIBE", "sh")
    pub.send("SPUBLISH", "sh", "m2")
    sub.read(1)  # >3 smessage
    sub.send("UNSUBSCRIBE", replies=1)
    sub.send("PUNSUBSCRIBE", replies=1)
    sub.send("SUNSUBSCRIBE", replies=1)
    sub.send("UNSUBSCRIBE")  # >3 unsubscribe _ 0
    sub.quiet()


def test_shard_channels_are_their_own_namespace(pair):
    sub, pub = pair(), pair()
    sub.send("SSUBSCRIBE", "c1", "c2", replies=2)
    sub.send("SUBSCRIBE", "c1")  # the global c1 is another channel
    pub.send("SPUBLISH", "c1", "s")
    sub.read(1)  # smessage only
    pub.send("PUBLISH", "c1", "g")
    sub.read(1)  # message only
    pub.send("SPUBLISH", "nobody", "x")
    pub.send("PUBSUB", "SHARDNUMSUB", "c1", "c2", "c3")
    pub.send("PUBSUB", "NUMSUB", "c1", "c2")
    sub.send("SUNSUBSCRIBE", "c2", "c9", replies=2)
    sub.quiet()


def test_pubsub_introspection(pair):
    subs = [pair() for _ in range(3)]
    subs[0].send("SUBSCRIBE", "news.a", "news.b", "misc", replies=3)
    subs[1].send("SUBSCRIBE", "news.a", replies=1)
    subs[1].send("PSUBSCRIBE", "news.*", "x?", replies=2)
    subs[2].send("PSUBSCRIBE", "news.*", replies=1)
    subs[2].send("SSUBSCRIBE", "sh.1", "sh.2", replies=2)
    q = pair()

    def sorted_array(*args):
        got = [c.call(*args) for c in (q.ours, q.theirs)]
        assert sorted(got[0]) == sorted(got[1]), got
        return sorted(got[0])

    assert sorted_array("PUBSUB", "CHANNELS") == [b"misc", b"news.a", b"news.b"]
    assert sorted_array("PUBSUB", "CHANNELS", "news.*") == [b"news.a", b"news.b"]
    sorted_array("PUBSUB", "CHANNELS", "nomatch*")
    assert sorted_array("PUBSUB", "SHARDCHANNELS") == [b"sh.1", b"sh.2"]
    sorted_array("PUBSUB", "SHARDCHANNELS", "*2")
    q.send("PUBSUB", "NUMSUB", "news.a", "news.b", "none")
    q.send("PUBSUB", "NUMSUB")
    q.send("PUBSUB", "NUMPAT")  # unique patterns
    q.send("PUBSUB", "SHARDNUMSUB", "sh.1", "x")
    q.send("PUBSUB", "SHARDNUMSUB")
    q.send("PUBSUB", "HELP")
    q.send("PUBSUB", "CHANNELS", "a", "b")
    q.send("PUBSUB", "SHARDCHANNELS", "a", "b")
    q.send("PUBSUB", "NOPE")
    q.send("PUBSUB", "NUMPAT", "x")
    q.send("PUBSUB")
    q.send("PUBLISH", "x")
    # A closed subscriber's subscriptions go with it.
    for c in (subs[1].ours, subs[1].theirs):
        c.close()
    deadline = time.monotonic() + 5
    while q.ours.call("PUBSUB", "NUMPAT") != 1 or q.theirs.call("PUBSUB", "NUMPAT") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    q.send("PUBSUB", "NUMSUB", "news.a")


def test_info_counts_and_client_kill_type_as_redis(pair):
    sub, q = pair(), pair()
    ids = [c.call("CLIENT", "ID") for c in (sub.ours, sub.theirs)]
    sub.send("SUBSCRIBE", "a", "b", replies=2)
    sub.send("PSUBSCRIBE", "p*")
    sub.send("SSUBSCRIBE", "s")
    names = ("pubsub_channels", "pubsub_patterns", "pubsubshard_channels")
    for c in (q.ours, q.theirs):
        deadline = time.monotonic() + 5  # earlier tests' subscribers may still be closing
        while True:
            info = dict(line.split(":", 1) for line in c.call("INFO", "stats").decode().split("\r\n")
                        if ":" in line)
            if [info[n] for n in names] == ["2", "1", "1"] or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert [info[n] for n in names] == ["2", "1", "1"], info
    for conn, cid in zip((q.ours, q.theirs), ids):
        assert conn.call("CLIENT", "KILL", "ID", str(cid), "TYPE", "normal") == 0
        assert conn.call("CLIENT", "KILL", "ID", str(cid), "TYPE", "master") == 0
        assert conn.call("CLIENT", "KILL", "ID", str(cid), "TYPE", "pubsub") == 1
    q.send("CLIENT", "KILL", "TYPE", "bogus")
    for c in (sub.ours, sub.theirs):
        assert c.read_until_closed(timeout=5)[1]


def test_command_info_of_pubsub_commands(pair):
    p = pair()
    for name in ("SUBSCRIBE", "PUBLISH", "SSUBSCRIBE", "SPUBLISH", "SUNSUBSCRIBE"):
        got = [c.call("COMMAND", "INFO", name)[0] for c in (p.ours, p.theirs)]
        # name, arity, flags, first, last, step and ACL categories as Redis 7.0's.
        for i in (0, 1, 3, 4, 5):
            assert got[0][i] == got[1][i], (name, i, got)
        assert sorted(got[0][2]) == sorted(x for x in got[1][2] if str(x) != "may_replicate"), got
        assert sorted(got[0][6]) == sorted(got[1][6]), got
    p.send("COMMAND", "GETKEYS", "SSUBSCRIBE", "a", "b")
    p.send("COMMAND", "GETKEYS", "SPUBLISH", "a", "m")


# ---- keyspace notifications -------------------------------------------------

class Events:
    """A subscriber to every keyspace notification of one server; collect() returns what a run
    of commands raised, as (channel, payload) in order."""

    def __init__(self, conn, pattern="__key*__:*"):
        self.c = conn
        self.c.send_cmd("PSUBSCRIBE", pattern)
        assert self.c.read_reply()[0] == b"psubscribe"
        self.c.send_cmd("SUBSCRIBE", "zz:end")
        assert self.c.read_reply()[0] == b"subscribe"

    def collect(self, publisher, timeout=10):
        publisher.call("PUBLISH", "zz:end", "x")
        out = []
        while True:
            m = self.c.read_reply(timeout=timeout)
            if m[0] == b"message" and m[1] == b"zz:end":
                return out
            assert m[0] == b"pmessage", m
            out.append((m[2], m[3]))


def run_both(pair_, flags, commands):
    """Runs `commands` on both servers with notify-keyspace-events `flags`; asserts the replies
    and the keyspace events equal; returns the events."""
    p, sub = pair_(), pair_()
    p.send("CONFIG", "SET", "notify-keyspace-events", flags)
    evs = [Events(sub.ours), Events(sub.theirs)]
    for cmd in commands:
        p.send(*cmd)
    got = [evs[0].collect(p.ours), evs[1].collect(p.theirs)]
    assert got[0] == got[1], "stratakv %r\nredis %r" % (got[0], got[1])
    return got[0]


FUTURE = int(time.time()) + 100_000

STRING_COMMANDS = [
    ("SET", "k", "v"), ("SET", "k", "v2", "EX", "100"), ("SET", "k", "v3", "KEEPTTL"),
    ("SET", "k", "v4", "PX", "100000", "GET"), ("SET", "k", "x", "NX"), ("SET", "nx", "1", "XX"),
    ("SET", "k", "v5", "EXAT", str(FUTURE)), ("SETNX", "n", "1"), ("SETNX", "n", "2"),
    ("SETEX", "se", "100", "v"), ("PSETEX", "pse", "100000", "v"), ("GETSET", "k", "g"),
    ("MSET", "m1", "1", "m2", "2"), ("MSETNX", "m3", "1", "m4", "2"),
    ("MSETNX", "m3", "9", "m5", "9"), ("APPEND", "k", "++"), ("APPEND", "ap", "new"),
    ("SETRANGE", "k", "1", "ZZ"), ("SETRANGE", "sr", "3", "ab"), ("SETRANGE", "sr2", "0", ""),
    ("INCR", "c"), ("INCRBY", "c", "5"), ("DECR", "c"), ("DECRBY", "c", "2"),
    ("INCRBYFLOAT", "f", "1.5"), ("INCRBYFLOAT", "f", "-0.5"), ("INCR", "k"),
    ("GETDEL", "m1"), ("GETDEL", "nope"), ("GETEX", "m2", "EX", "100"),
    ("GETEX", "m2", "PERSIST"), ("GETEX", "m2", "PERSIST"), ("GETEX", "m2"),
    ("GETEX", "m2", "PXAT", "1"), ("GET", "k"), ("MGET", "k", "c"), ("STRLEN", "k"),
]

GENERIC_COMMANDS = [
    ("SET", "g1", "v"), ("EXPIRE", "g1", "100"), ("EXPIRE", "g1", "50", "GT"),
    ("PEXPIRE", "g1", "200000"), ("EXPIREAT", "g1", str(FUTURE)),
    ("PEXPIREAT", "g1", str(FUTURE * 1000)), ("EXPIRE", "g1", "10", "NX"), ("PERSIST", "g1"),
    ("PERSIST", "g1"), ("EXPIRE", "nokey", "10"), ("EXPIRE", "g1", "0"), ("EXISTS", "g1"),
    ("SET", "g2", "v"), ("PEXPIREAT", "g2", "1"),
    ("SET", "r1", "v", "EX", "100"), ("RENAME", "r1", "r2"), ("SET", "r3", "x"),
    ("RENAME", "r2", "r3"), ("TTL", "r3"), ("RENAMENX", "r3", "r4"), ("SET", "r5", "y"),
    ("RENAMENX", "r4", "r5"), ("RENAME", "r4", "r4"), ("RENAME", "missing", "r9"),
    ("COPY", "r4", "c1"), ("COPY", "r4", "c1"), ("COPY", "r4", "c1", "REPLACE"),
    ("DEL", "c1", "r4", "nokey"), ("SET", "u", "1"), ("UNLINK", "u", "u"), ("TOUCH", "r5"),
    ("TYPE", "r5"), ("FLUSHALL",), ("SET", "after", "1"),
    ("MULTI",), ("SET", "tx", "1"), ("APPEND", "tx", "2"), ("EXPIRE", "tx", "100"),
    ("RENAME", "tx", "tx2"), ("EXEC",),
]

BIT_COMMANDS = [
    ("SETBIT", "b", "7", "1"), ("SETBIT", "b", "7", "1"), ("SETBIT", "b", "100", "0"),
    ("GETBIT", "b", "7"), ("BITFIELD", "bf", "SET", "u8", "0", "255"),
    ("BITFIELD", "bf", "GET", "u8", "0"), ("BITFIELD", "bf", "INCRBY", "u8", "8", "1"),
    ("BITFIELD", "nobf", "GET", "u8", "0"), ("BITOP", "AND", "dst", "b", "bf"),
    ("BITOP", "AND", "dst", "nokey1", "nokey2"), ("BITOP", "OR", "dst2", "nokey1"),
    ("BITOP", "NOT", "dst3", "b"), ("BITCOUNT", "b"),
]


@pytest.mark.parametrize("family", ["string", "generic", "bitmap"])
def test_keyspace_events_of_each_command_family_as_redis(pair, family):
    commands = {"string": STRING_COMMANDS, "generic": GENERIC_COMMANDS,
                "bitmap": BIT_COMMANDS}[family]
    events = run_both(pair, "KEA", commands)
    assert events, "no events at all"


def test_keyspace_event_classes_filter_as_redis(pair):
    cmds = [("SET", "a", "1"), ("APPEND", "a", "2"), ("EXPIRE", "a", "100"), ("DEL", "a"),
            ("INCR", "n"), ("RENAME", "n", "m")]
    assert [c for c, _ in run_both(pair, "K$", cmds)] == [b"__keyspace@0__:a",
                                                          b"__keyspace@0__:a",
                                                          b"__keyspace@0__:n"]
    run_both(pair, "Eg", cmds)
    run_both(pair, "KEg$", cmds)
    assert run_both(pair, "A", cmds) == []  # neither K nor E: nothing is published
    assert run_both(pair, "KE", cmds) == []  # no class: nothing


def test_new_key_events_as_redis(pair):
    cmds = [("SET", "n1", "v"), ("SET", "n1", "v2"), ("INCR", "cnt"), ("INCR", "cnt"),
            ("APPEND", "ap", "x"), ("SETRANGE", "sr", "2", "x"), ("MSET", "a", "1", "b", "2", "a", "3"),
            ("SETEX", "n2", "10", "v"), ("SETBIT", "bits", "3", "1"), ("SET", "n1", "v3", "NX")]
    events = run_both(pair, "KEAn", cmds)
    assert (b"__keyevent@0__:new", b"n1") in events
    run_both(pair, "En", cmds)


def test_keymiss_events_as_redis(pair):
    cmds = [("SET", "here", "1"), ("GET", "nope"), ("GET", "here"), ("MGET", "a", "here", "b"),
            ("STRLEN", "x"), ("GETRANGE", "x", "0", "1"), ("EXISTS", "e1", "here"), ("TYPE", "t"),
            ("TTL", "t"), ("PTTL", "t"), ("TOUCH", "t"), ("OBJECT", "ENCODING", "o"),
            ("OBJECT", "FREQ", "o"), ("GETBIT", "g", "1"), ("BITCOUNT", "g"), ("LCS", "l1", "l2"),
            ("COPY", "nosrc", "dst"), ("SET", "s", "v", "GET"), ("GETDEL", "gd"), ("GETEX", "ge"),
            ("DEL", "d"), ("INCR", "cnt"), ("APPEND", "ap", "x"), ("RENAME", "here", "there"),
            ("BITOP", "OR", "dst", "s1", "s2")]
    events = run_both(pair, "KEm", cmds)
    assert (b"__keyevent@0__:keymiss", b"nope") in events
    run_both(pair, "KEA", cmds)  # A leaves m out


def test_expired_events_as_redis(pair):
    p, sub = pair(), pair()
    p.send("CONFIG", "SET", "notify-keyspace-events", "Ex")
    for c in (sub.ours, sub.theirs):
        c.send_cmd("SUBSCRIBE", "__keyevent@0__:expired")
        c.read_reply()
    p.send("SET", "t1", "v", "PX", "100")  # active expiry (the cron)
    p.send("SET", "t2", "v", "PX", "50")
    time.sleep(0.3)
    p.send("GET", "t2")  # gone, whether lazily or actively
    got = [sorted(c.read_reply(timeout=5)[2] for _ in range(2)) for c in (sub.ours, sub.theirs)]
    assert got[0] == got[1] == [b"t1", b"t2"]
    sub.quiet()


def test_notify_keyspace_events_round_trips_as_redis(pair):
    p = pair()
    for flags in ("KEA", "AKE", "Kg$", "Ex", "KEAn", "Kn", "KEm", "Elshzxetd", "K$lshzxetd",
                  "gK", "", "AAA", "KEA$g"):
        p.send("CONFIG", "SET", "notify-keyspace-events", flags)
        p.send("CONFIG", "GET", "notify-keyspace-events")
    for bad in ("KEQ", "T!", "a", "KE x"):
        p.send("CONFIG", "SET", "notify-keyspace-events", bad)
    p.send("CONFIG", "GET", "notify-keyspace-events")
    # stratakv's own class T, after the classes, before K and E.
    c = p.ours
    for flags, shown in (("KET", "TKE"), ("AKET", "ATKE"), ("T", "T"), ("ExT", "xTE")):
        assert c.call("CONFIG", "SET", "notify-keyspace-events", flags) == Simple("OK")
        assert c.call("CONFIG", "GET", "notify-keyspace-events") == [
            b"notify-keyspace-events", shown.encode()]


def test_client_output_buffer_limit_config_as_redis(pair):
    p = pair()
    p.send("CONFIG", "GET", "client-output-buffer-limit")
    p.send("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 512kb 10")
    p.send("CONFIG", "GET", "client-output-buffer-limit")
    p.send("CONFIG", "SET", "client-output-buffer-limit", "normal 1gb 2m 5 replica 1k 1 1")
    p.send("CONFIG", "GET", "client-output-buffer-limit")
    for bad in ("pubsub 1mb", "foo 1 1 1", "pubsub x 1 1", "pubsub 1 1 -1", "master 1 1 1",
                "pubsub 1 1 1x", "normal 1 1 1 pubsub 1"):
        p.send("CONFIG", "SET", "client-output-buffer-limit", bad)
    p.send("CONFIG", "GET", "client-output-buffer-limit")  # nothing of a bad value applied
    p.send("CONFIG", "SET", "client-output-buffer-limit", harness_default_limits())


# ---- redis-py and Node.js clients -------------------------------------------

def redis_py_session(srv):
    """redis-py's documented pubsub usage; returns what it saw, comparable across servers."""
    r = srv.client()
    ps = r.pubsub()
    seen = []
    ps.subscribe("chan")
    seen.append(ps.get_message(timeout=2))
    handled = []
    ps.psubscribe(**{"ch*": handled.append})
    seen.append(ps.get_message(timeout=2))
    seen.append(r.publish("chan", "hi"))
    seen.append(ps.get_message(timeout=2))  # the channel's message
    seen.append(ps.get_message(timeout=2))  # the pattern's: handled, so None
    seen.append(handled)
    seen.append(r.pubsub_numsub("chan"))
    seen.append(r.pubsub_numpat())
    # listen() on another thread while messages are published.
    got = []

    def listener():
        for m in ps.listen():
            if m["type"] == "message":
                got.append(m["data"])
                if len(got) == 3:
                    return

    t = threading.Thread(target=listener)
    t.start()
    for i in range(3):
        r.publish("chan", "m%d" % i)
    t.join(10)
    assert not t.is_alive()
    seen.append(got)
    ps.unsubscribe()
    ps.punsubscribe()
    confirmations = []
    for _ in range(10):  # the last publish's pattern message (handled: None) may come first
        m = ps.get_message(timeout=2)
        if m is not None:
            confirmations.append(m)
        if len(confirmations) == 2:
            break
    seen.append(confirmations)
    ps.close()
    r.close()
    return seen


def test_redis_py_pubsub_as_redis(server, redis_srv):
    ours, theirs = redis_py_session(server), redis_py_session(redis_srv)
    assert ours == theirs
    assert ours[2] == 2 and ours[5][0]["data"] == b"hi" and ours[8] == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("client", ["ioredis", "node-redis"])
def test_node_clients_pubsub_as_redis(server, redis_srv, client):
    if shutil.which("node") is None or not (NODE_DIR / "node_modules").is_dir():
        pytest.skip("node or tests/clients/node/node_modules missing (scripts/install-deps.sh)")
    results = []
    for srv in (server, redis_srv):
        out = subprocess.run(["node", str(NODE_DIR / "pubsub.mjs"), "%s:%d" % (srv.host, srv.port),
                              client], capture_output=True, text=True, timeout=60,
                             cwd=str(NODE_DIR))
        assert out.returncode == 0 and out.stdout.strip(), out.stderr
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]
    assert results[0]["messages"], results[0]


# ---- output buffer limits ---------------------------------------------------

def slow_subscriber(srv, channel):
    """A subscriber that never reads, with a small receive buffer; its client id in `id`."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((srv.host, srv.port))
    c = RawConn.__new__(RawConn)
    c.sock, c.timeout, c.buf, c.eof = s, 10.0, bytearray(), False
    s.settimeout(10.0)
    c.id = c.call("CLIENT", "ID")
    assert c.call("SUBSCRIBE", channel)[0] == b"subscribe"
    return c


def flood_until_gone(srv, channel, payload, limit_s=30, pause=0.0):
    """Publishes `payload` on `channel` until nobody receives it; returns the seconds it took."""
    pub = srv.raw()
    start = time.monotonic()
    while pub.call("PUBLISH", channel, payload) != 0:
        assert time.monotonic() - start < limit_s, "the slow subscriber was never closed"
        if pause:
            time.sleep(pause)
    pub.close()
    return time.monotonic() - start


def log_size(srv):
    return srv.log_path.stat().st_size


def log_has(srv, text, since=0, timeout=5):
    """Whether the server's log has `text` past byte `since` (log_size() before the test)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(srv.log_path, "rb") as f:
            f.seek(since)
            if text.encode() in f.read():
                return True
        time.sleep(0.05)
    return False


LIMIT_LOG = "for overcoming of output buffer limits."


def test_slow_pubsub_client_is_closed_at_its_hard_limit_as_redis(start_server, redis_srv):
    ours = start_server(client_output_buffer_limit="pubsub 256kb 0 0")
    ref = redis_srv.raw()
    ref.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 256kb 0 0")
    try:
        for srv in (ours, redis_srv):
            since = log_size(srv)
            sub = slow_subscriber(srv, "flood")
            flood_until_gone(srv, "flood", b"p" * (64 * KiB))
            assert log_has(srv, LIMIT_LOG, since), srv.log_tail()
            sub.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            assert sub.read_until_closed(timeout=10)[1]
        # A subscriber that keeps up is not closed.
        sub = ours.raw()
        sub.call("SUBSCRIBE", "ok")
        pub = ours.raw()
        for _ in range(100):
            assert pub.call("PUBLISH", "ok", b"q" * (64 * KiB)) == 1
            assert sub.read_reply()[2] == b"q" * (64 * KiB)
    finally:
        ref.call("CONFIG", "SET", "client-output-buffer-limit", harness_default_limits())


def test_soft_limit_closes_after_its_seconds(start_server):
    srv = start_server(client_output_buffer_limit="pubsub 0 128kb 1")
    sub = slow_subscriber(srv, "soft")  # noqa: F841 (kept open)
    took = flood_until_gone(srv, "soft", b"s" * (32 * KiB), pause=0.01)
    assert took > 1.0, took  # over the soft limit for more than its second first
    assert log_has(srv, LIMIT_LOG)


def test_normal_client_limit_as_redis(start_server, redis_srv):
    ours = start_server(client_output_buffer_limit="normal 1mb 0 0")
    ref = redis_srv.raw()
    ref.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0")
    try:
        for srv in (ours, redis_srv):
            since = log_size(srv)
            c = srv.raw()
            assert c.call("SET", "big", b"b" * (2 * MiB)) == Simple("OK")
            assert c.call("GET", "small") is None
            c.send_cmd("GET", "big")
            data, closed = c.read_until_closed(timeout=10)
            assert closed and (srv is redis_srv or len(data) < 2 * MiB)
            assert log_has(srv, LIMIT_LOG, since)
    finally:
        ref.call("CONFIG", "SET", "client-output-buffer-limit", harness_default_limits())


# ---- stratakv's own: threads, tiering events, CLIENT LIST, cluster ----------

def test_publish_across_io_threads(start_server):
    srv = start_server(threads=2)
    n_subs, n_pubs, per_pub = 6, 3, 300
    subs = [srv.raw() for _ in range(n_subs)]
    for i, s in enumerate(subs):
        s.call("SUBSCRIBE", "fan") if i % 2 else s.call("PSUBSCRIBE", "f?n")
    errors = []

    def publisher(p):
        c = srv.raw()
        for i in range(per_pub):
            got = c.call("PUBLISH", "fan", "%d:%d" % (p, i))
            if got != n_subs:
                errors.append(got)

    threads = [threading.Thread(target=publisher, args=(p,)) for p in range(n_pubs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors[:5]
    for s in subs:
        last = [-1] * n_pubs
        for _ in range(n_pubs * per_pub):
            m = s.read_reply(timeout=10)
            p, i = map(int, m[-1].split(b":"))
            assert i == last[p] + 1, "per-publisher order"
            last[p] = i
        assert last == [per_pub - 1] * n_pubs


def client_fields(line):
    return dict(kv.split("=", 1) for kv in line.split(" "))


def test_client_list_fields(server, raw, redis_srv):
    """sub=, psub=, ssub=, multi= and the P and x flags as Redis's, and CLIENT LIST TYPE pubsub;
    qbuf= of the command being run; omem= and tot-mem= count what a subscriber has not read."""
    fields = []
    for srv in (server, redis_srv):
        c, m, q = raw(srv), raw(srv), raw(srv)
        cid, mid = c.call("CLIENT", "ID"), m.call("CLIENT", "ID")
        c.call("SUBSCRIBE", "a")
        c.call("SUBSCRIBE", "b")
        c.call("PSUBSCRIBE", "p*")
        c.call("SSUBSCRIBE", "s")
        m.call("MULTI")
        m.call("SET", "x", "1")
        m.call("GET", "x")
        by_id = {}
        for line in q.call("CLIENT", "LIST").decode().strip().split("\n"):
            f = client_fields(line)
            by_id[int(f["id"])] = f
        me = client_fields(q.call("CLIENT", "INFO").decode().strip())
        ids_of = lambda t: {int(client_fields(l)["id"]) for l in  # noqa: E731
                            q.call("CLIENT", "LIST", "TYPE", t).decode().strip().split("\n") if l}
        pubsub_ids, normal_ids = ids_of("pubsub"), ids_of("normal")
        fields.append(([by_id[cid][k] for k in ("flags", "sub", "psub", "ssub", "multi")],
                       [by_id[mid][k] for k in ("flags", "sub", "multi")], me["qbuf"],
                       cid in pubsub_ids, cid in normal_ids, mid in normal_ids))
        c.close()
        m.close()
    assert fields[0] == fields[1], fields
    assert fields[0][0] == ["P", "2", "1", "1", "-1"] and fields[0][1] == ["x", "0", "2"]
    # A subscriber that does not read: its pending output shows in omem and tot-mem.
    sub = slow_subscriber(server, "heavy")
    pub = raw()
    for _ in range(200):
        pub.call("PUBLISH", "heavy", b"h" * (64 * KiB))
    f = client_fields(pub.call("CLIENT", "LIST", "ID", str(sub.id)).decode().strip())
    assert int(f["omem"]) > 0 and int(f["tot-mem"]) > int(f["omem"]), f
    sub.close()


def evict_server(start_server, **config):
    return start_server(memory__capacity="64mb", maxmemory="8mb", maxmemory_policy="allkeys-lru",
                        **config)


@pytest.mark.parametrize("flags", ["Ee", "ET"])
def test_eviction_events(start_server, flags):
    srv = evict_server(start_server, notify_keyspace_events=flags)
    sub = srv.raw()
    sub.call("SUBSCRIBE", "__keyevent@0__:evicted")
    w = srv.raw()
    for i in range(24):
        assert w.call("SET", "ev:%d" % i, b"e" * MiB) == Simple("OK")
    evicted = set()
    deadline = time.monotonic() + 10
    while len(evicted) < 12 and time.monotonic() < deadline:
        evicted.add(sub.read_reply(timeout=10)[2].decode())
    assert len(evicted) >= 12
    for k in evicted:
        assert w.call("EXISTS", k) == 0


def test_demotion_and_promotion_events_with_the_ssd_tier(start_server, tmp_path):
    # admission wait: every victim is written (reuse may evict a never-read value instead of
    # demoting it, and this test needs demotions).
    srv = start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(tmp_path / "ssd"),
                       memory__capacity="64mb", maxmemory="16mb",
                       tiering__ssd__admission="wait", notify_keyspace_events="KET")
    sub = srv.raw()
    sub.call("SUBSCRIBE", "__keyevent@0__:demoted", "__keyevent@0__:promoted")
    sub.call("PSUBSCRIBE", "__keyspace@0__:tier:*")
    w = srv.raw()
    for i in range(40):
        assert w.call("SET", "tier:%d" % i, b"t" * MiB) == Simple("OK")
    demoted = []
    deadline = time.monotonic() + 20
    while len(demoted) < 10 and time.monotonic() < deadline:
        m = sub.read_reply(timeout=20)
        if m[0] == b"message" and m[1] == b"__keyevent@0__:demoted":
            demoted.append(m[2].decode())
    assert len(demoted) >= 10
    key = demoted[0]
    assert w.call("TIER", key) == b"ssd"
    assert w.call("GET", key) == b"t" * MiB
    # The read brought it back: promoted, on both channels.
    seen = set()
    deadline = time.monotonic() + 10
    while not {"keyevent", "keyspace"} <= seen and time.monotonic() < deadline:
        m = sub.read_reply(timeout=10)
        if m[0] == b"message" and m[1] == b"__keyevent@0__:promoted" and m[2] == key.encode():
            seen.add("keyevent")
        if m[0] == b"pmessage" and m[2] == ("__keyspace@0__:" + key).encode() and m[3] == b"promoted":
            seen.add("keyspace")
    assert seen == {"keyevent", "keyspace"}
    assert w.call("TIER", key) in (b"memory", b"memory+ssd")


def test_cluster_mode_shard_channels_route_by_slot(redis_srv):
    from cluster_util import StaticCluster
    cluster = StaticCluster(2).start()
    theirs = launch_redis(cluster_enabled="yes")
    try:
        a, b = cluster.nodes[0].raw(), cluster.nodes[1].raw()
        slot = lambda ch: a.call("CLUSTER", "KEYSLOT", ch)  # noqa: E731
        mine = next(ch for ch in ("c%d" % i for i in range(100)) if cluster.owner_of(slot(ch)) == 0)
        other = next(ch for ch in ("c%d" % i for i in range(100)) if cluster.owner_of(slot(ch)) == 1)
        moved = a.call("SSUBSCRIBE", other)
        assert moved == Err("MOVED %d 127.0.0.1:%d" % (slot(other), cluster.ports[1]))
        assert a.call("SPUBLISH", other, "x") == moved
        assert a.call("SUNSUBSCRIBE", other) == moved
        assert b.call("SSUBSCRIBE", other) == [b"ssubscribe", other.encode(), 1]
        pub = cluster.nodes[1].raw()
        assert pub.call("SPUBLISH", other, "hello") == 1
        assert b.read_reply() == [b"smessage", other.encode(), b"hello"]
        # Two slots in one request: CROSSSLOT, as a Redis cluster answers.
        ref = theirs.raw()
        ref.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        deadline = time.monotonic() + 10
        while b"cluster_state:ok" not in ref.call("CLUSTER", "INFO"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        c = cluster.nodes[0].raw()
        two = [mine, next(ch for ch in ("d%d" % i for i in range(100))
                          if cluster.owner_of(slot(ch)) == 0 and slot(ch) != slot(mine))]
        assert c.call("SSUBSCRIBE", *two) == ref.call("SSUBSCRIBE", *two)
        assert c.call("SSUBSCRIBE", *two) == Err("CROSSSLOT Keys in request don't hash to the same slot")
        # PUBLISH reaches the subscribers of the node it was sent to only.
        s0, s1 = cluster.nodes[0].raw(), cluster.nodes[1].raw()
        s0.call("SUBSCRIBE", "news")
        s1.call("SUBSCRIBE", "news")
        assert cluster.nodes[0].raw().call("PUBLISH", "news", "n0") == 1
        assert s0.read_reply() == [b"message", b"news", b"n0"]
        with pytest.raises(socket.timeout):
            s1.read_reply(timeout=0.3)
    finally:
        cluster.stop()
        stop_servers(theirs)
