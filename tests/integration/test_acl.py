"""ACL users (docs/acl.md): the same scenario against redis-server 7.0 and stratakv in the same
run, replies compared byte for byte where Redis has the behaviour: ACL SETUSER rules and their
errors, GETUSER/LIST/USERS/CAT/WHOAMI/DELUSER/DRYRUN/LOG, AUTH and HELLO AUTH as users, -NOPERM
for commands, read/write key patterns and channels (top level, MULTI, scripts), requirepass as
the default user's password, the aclfile; then the fast path under the same key rules."""
import os
import tempfile

import pytest

from harness import launch_redis, launch_server, redis_binary, stop_servers
from fastpath_util import FastConn, Segment
from resp_util import ConnectionClosed, Err, RawConn, Simple

OK = b"+OK\r\n"


@pytest.fixture
def pair():
    """A fresh stratakv and a fresh redis-server (ACL state is per process)."""
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    ours, theirs = launch_server(), launch_redis()
    yield ours, theirs
    stop_servers(ours, theirs)


class Both:
    """One connection to each server; call() asserts the two raw replies are equal."""

    def __init__(self, ours, theirs):
        self.a = RawConn(ours.host, ours.port)
        self.b = RawConn(theirs.host, theirs.port)

    def call(self, *args):
        mine, ref = self.a.call_raw(*args), self.b.call_raw(*args)
        assert mine == ref, "%r: stratakv %r, redis %r" % (args, mine, ref)
        return mine

    def each(self, *args):
        return self.a.call(*args), self.b.call(*args)

    def close(self):
        self.a.close()
        self.b.close()


def test_setuser_rules_and_introspection_match_redis(pair):
    admin = Both(*pair)
    admin.call("ACL", "SETUSER", "alice")
    admin.call("ACL", "LIST")
    admin.call("ACL", "GETUSER", "alice")
    admin.call("ACL", "GETUSER", "default")
    # (At most one single command per user compared: Redis lists those in its hash table's
    # order, which changes from process to process.)
    admin.call("ACL", "SETUSER", "bob", "on", ">p1", "~foo:*", "%R~r:*", "%W~w:*", "&ch*",
               "+@read", "-get")
    admin.call("ACL", "GETUSER", "bob")
    admin.call("ACL", "LIST")
    admin.call("ACL", "SETUSER", "bob", "+get")  # the best fit: -@all +@read
    admin.call("ACL", "LIST")
    admin.call("ACL", "SETUSER", "bob", "+set", "-@read")  # -@all +set
    admin.call("ACL", "LIST")
    admin.call("ACL", "SETUSER", "bob", "allcommands", "-flushall")
    admin.call("ACL", "GETUSER", "bob")
    admin.call("ACL", "SETUSER", "bob", "reset")
    admin.call("ACL", "LIST")
    admin.call("ACL", "SETUSER", "bob", "nopass", "allkeys", "allchannels", "+client|id")
    admin.call("ACL", "LIST")
    admin.call("ACL", "USERS")
    admin.call("ACL", "WHOAMI")
    admin.call("ACL", "CAT")
    for rules in (["bogus"], ["+bogus"], ["+@bogus"], ["#abc"], ["<nope"],
                  ["allkeys", "~foo"], ["allchannels", "&foo"], ["-select|0"],
                  ["+client|list|x"], ["+client|bogus"], ["%X~a"], ["on", "+nosuchcommand"]):
        admin.call("ACL", "SETUSER", "x", *rules)
    admin.call("ACL", "GETUSER", "x")  # a failed SETUSER created nothing
    admin.call("ACL", "SETUSER", "a b")
    admin.call("ACL", "DELUSER", "default")
    admin.call("ACL", "GETUSER", "nobody")
    admin.call("ACL", "CAT", "bogus")
    admin.call("ACL", "GENPASS", "0")
    admin.call("ACL", "GENPASS", "4097")
    a, b = admin.each("ACL", "GENPASS")
    assert len(a) == len(b) == 64
    a, b = admin.each("ACL", "GENPASS", "5")
    assert len(a) == len(b) == 2
    admin.call("ACL", "SAVE")  # no aclfile
    admin.call("ACL", "LOAD")
    admin.call("ACL", "SETUSER", "s", "on", ">pw", "+@all", "-set", "~a*", "&c*")
    admin.call("ACL", "DRYRUN", "s", "set", "a", "b")
    admin.call("ACL", "DRYRUN", "s", "get", "b")
    admin.call("ACL", "DRYRUN", "s", "get", "a1")
    admin.call("ACL", "DRYRUN", "s", "publish", "d", "x")
    admin.call("ACL", "DRYRUN", "nobody", "get", "b")
    admin.call("ACL", "DELUSER", "s", "nobody", "bob")
    admin.call("ACL", "USERS")
    admin.call("ACL", "BOGUS")
    admin.close()


def test_auth_and_noperm_match_redis(pair):
    ours, theirs = pair
    admin = Both(ours, theirs)
    admin.call("ACL", "SETUSER", "carol", "on", ">pw", "+@all", "-flushall", "~foo:*",
               "%R~r:*", "%W~w:*", "&ch*")
    admin.call("SET", "r:1", "old")
    c = Both(ours, theirs)
    c.call("AUTH", "carol", "wrong")
    c.call("AUTH", "nobody", "pw")
    c.call("AUTH", "carol", "pw")
    c.call("ACL", "WHOAMI")
    # Commands.
    c.call("FLUSHALL")
    # Keys: read patterns, write patterns, both.
    c.call("SET", "foo:1", "x")
    c.call("GET", "foo:1")
    c.call("GET", "r:1")
    c.call("GET", "w:1")
    c.call("SET", "w:1", "x")
    c.call("SET", "r:1", "x")
    c.call("SET", "w:1", "x", "GET")  # SET ... GET reads too
    c.call("SET", "elsewhere", "x")
    c.call("INCR", "w:2")  # reads and writes
    c.call("DEL", "w:1")  # writes only
    c.call("MGET", "foo:1", "r:1")
    c.call("MGET", "foo:1", "w:1")
    c.call("MSET", "w:1", "a", "foo:2", "b")
    c.call("MSET", "w:1", "a", "r:1", "b")
    c.call("STRLEN", "r:1")
    # Channels.
    c.call("PUBLISH", "ch1", "x")
    c.call("PUBLISH", "other", "x")
    c.call("SUBSCRIBE", "other")
    c.call("PSUBSCRIBE", "ch1*")  # a pattern must be one of the user's literally
    # MULTI: refused at queue time, the transaction aborted.
    c.call("MULTI")
    c.call("SET", "foo:3", "x")
    c.call("GET", "w:1")
    c.call("EXEC")
    c.call("GET", "foo:3")
    # Scripts: EVAL's keys at the top level, redis.call's commands inside.
    c.call("EVAL", "return redis.call('get', KEYS[1])", "1", "w:1")
    c.call("EVAL", "return redis.call('get', KEYS[1])", "1", "foo:1")
    admin.call("ACL", "SETUSER", "dave", "on", ">pw", "+@all", "-set", "allkeys")
    d = Both(ours, theirs)
    d.call("AUTH", "dave", "pw")
    d.call("EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "k")
    d.call("EVAL", "return redis.pcall('set', KEYS[1], 'x')", "1", "k")
    # CLIENT LIST names the user.
    a, b = c.each("CLIENT", "INFO")
    assert " user=carol " in str(a) and " user=carol " in str(b)
    # ACL LOG: the same entries (all but their age and client info).
    mine, ref = admin.each("ACL", "LOG")

    def strip(entries):
        out = []
        for e in entries:
            d = dict(zip(e[::2], e[1::2]))
            d.pop(b"age-seconds")
            assert b"user=" in d.pop(b"client-info")
            out.append(d)
        return out

    assert strip(mine) == strip(ref)
    assert len(mine) == 10
    mine, ref = admin.each("ACL", "LOG", "2")
    assert strip(mine) == strip(ref) and len(mine) == 2
    admin.call("ACL", "LOG", "-1")
    admin.call("ACL", "LOG", "x")
    admin.call("ACL", "LOG", "RESET")
    admin.call("ACL", "LOG")
    # DELUSER closes the user's connections.
    admin.call("ACL", "DELUSER", "carol")
    for conn in (c.a, c.b):
        with pytest.raises(ConnectionClosed):
            conn.call("PING")
    # HELLO 3 AUTH.
    h = Both(ours, theirs)
    h.call("HELLO", "3", "AUTH", "dave", "wrong")
    mine, ref = h.each("HELLO", "3", "AUTH", "dave", "pw")
    assert mine[b"proto"] == ref[b"proto"] == 3
    h.call("ACL", "WHOAMI")
    h.call("SET", "k", "v")
    h.call("RESET")
    h.call("ACL", "WHOAMI")
    for x in (admin, d, h):
        x.close()


def test_rules_changed_after_queueing_refuse_at_exec_as_redis(pair):
    """Redis 7.0's execCommand checks each queued command's ACL again: a command the rules no
    longer allow answers -NOPERM in EXEC's array (the reason per kind), the rest run, and each
    refusal is logged with context "multi"."""
    ours, theirs = pair
    admin = Both(ours, theirs)
    admin.call("ACL", "SETUSER", "erin", "on", ">pw", "+@all", "~*", "&*")
    e = Both(ours, theirs)
    e.call("AUTH", "erin", "pw")
    e.call("MULTI")
    e.call("GET", "k")
    e.call("SET", "x", "1")
    e.call("PUBLISH", "ch", "m")
    e.call("SET", "y", "1")
    admin.call("ACL", "SETUSER", "erin", "-get", "resetkeys", "~x*", "resetchannels")
    e.call("EXEC")  # NOPERM (command), +OK, NOPERM (channel), NOPERM (key)
    e.call("GET", "x")
    admin.call("ACL", "SETUSER", "erin", "+get", "~*", "&*")
    e.call("MULTI")
    e.call("GET", "x")
    e.call("EXEC")  # nothing changed since: runs
    # A broken WATCH answers nil first, and logs nothing.
    e.call("WATCH", "w")
    e.call("MULTI")
    e.call("GET", "x")
    admin.call("SET", "w", "changed")
    admin.call("ACL", "SETUSER", "erin", "-get")
    e.call("EXEC")
    mine, ref = admin.each("ACL", "LOG")

    def strip(entries):
        return [{k: v for k, v in zip(x[::2], x[1::2]) if k not in (b"age-seconds", b"client-info")}
                for x in entries]

    assert strip(mine) == strip(ref)
    # Newest first: the GET refused at the top level, then EXEC's three (the broken WATCH's
    # EXEC logged nothing).
    assert [x[b"context"] for x in strip(mine)] == [b"toplevel"] + [b"multi"] * 3
    for x in (admin, e):
        x.close()


def test_subscribers_whose_channels_were_taken_away_are_disconnected(pair):
    """ACL SETUSER that takes channels away closes that user's subscribers whose channels or
    patterns are no longer allowed (Redis 7.0's ACLKillPubsubClientsIfNeeded); a subscriber
    whose subscriptions all stay allowed keeps its connection."""
    ours, theirs = pair
    admin = Both(ours, theirs)
    admin.call("ACL", "SETUSER", "sub", "on", ">pw", "+@all", "~*", "&chan*", "&news")
    keep, lose, pat = Both(ours, theirs), Both(ours, theirs), Both(ours, theirs)
    for x in (keep, lose, pat):
        x.call("AUTH", "sub", "pw")
    keep.call("SUBSCRIBE", "news")
    lose.call("SUBSCRIBE", "chan1")
    pat.call("PSUBSCRIBE", "chan*")
    # Taking away a channel nobody uses closes nobody.
    admin.call("ACL", "SETUSER", "sub", "resetchannels", "&chan*", "&news")
    for x in (keep, lose, pat):
        x.call("PING")
    # chan1 still matches chan1*, but the pattern chan* is no longer a pattern of the user's.
    admin.call("ACL", "SETUSER", "sub", "resetchannels", "&chan1*", "&news")
    keep.call("PING")
    lose.call("PING")
    for conn in (pat.a, pat.b):
        with pytest.raises(ConnectionClosed):
            conn.call("PING")
    admin.call("ACL", "SETUSER", "sub", "resetchannels", "&news")
    keep.call("PING")
    for conn in (lose.a, lose.b):
        with pytest.raises(ConnectionClosed):
            conn.call("PING")
    admin.call("PUBLISH", "news", "still here")
    for x in (admin, keep):
        x.close()


def test_requirepass_is_the_default_users_password(pair):
    ours, theirs = pair
    admin = Both(ours, theirs)
    admin.call("CONFIG", "SET", "requirepass", "s3cret")
    admin.call("ACL", "GETUSER", "default")
    admin.call("ACL", "LIST")
    c = Both(ours, theirs)
    c.call("GET", "k")
    c.call("AUTH", "wrong")
    c.call("AUTH", "s3cret")
    c.call("GET", "k")
    n = Both(ours, theirs)
    n.call("AUTH", "default", "s3cret")
    n.call("CONFIG", "SET", "requirepass", "")
    n.call("ACL", "GETUSER", "default")
    fresh = Both(ours, theirs)
    fresh.call("GET", "k")
    fresh.call("AUTH", "x")
    # The default user may be limited like any other.
    n.call("ACL", "SETUSER", "default", "resetkeys", "~public:*")
    fresh.call("GET", "secret")
    fresh.call("GET", "public:1")
    n.call("ACL", "SETUSER", "default", "allkeys")
    for x in (admin, c, n, fresh):
        x.close()


def test_aclfile_load_and_save(start_server):
    d = tempfile.mkdtemp(prefix="skv-acl-")
    path = os.path.join(d, "users.acl")
    with open(path, "w") as f:
        f.write("user default on nopass ~* &* +@all\n"
                "user reader on >rpw %R~data:* resetchannels -@all +get +acl|whoami\n")
    srv = start_server(aclfile=path)
    c = srv.raw()
    assert c.call("ACL", "USERS") == [b"default", b"reader"]
    r = srv.raw()
    assert r.call("AUTH", "reader", "rpw") == Simple("OK")
    assert r.call("GET", "data:1") is None
    assert r.call("SET", "data:1", "x") == Err(
        "NOPERM this user has no permissions to run the 'set' command")
    assert c.call("ACL", "SETUSER", "writer", "on", ">wpw", "%W~data:*", "+set") == Simple("OK")
    assert c.call("ACL", "SAVE") == Simple("OK")
    text = open(path).read()
    assert "user writer on #" in text and "%W~data:* resetchannels -@all +set" in text
    # LOAD replaces every user with the file's.
    with open(path, "a") as f:
        f.write("user third on nopass ~* +ping\n")
    assert c.call("ACL", "LOAD") == Simple("OK")
    assert c.call("ACL", "USERS") == [b"default", b"reader", b"third", b"writer"]
    with open(path, "a") as f:
        f.write("user broken on +nosuchcommand\n")
    err = c.call("ACL", "LOAD")
    assert isinstance(err, Err) and "Unknown command or category name in ACL" in err, err
    assert c.call("ACL", "USERS") == [b"default", b"reader", b"third", b"writer"]
    # A file that does not load stops the start, as in Redis.
    with pytest.raises(RuntimeError):
        launch_server(aclfile=os.path.join(d, "missing.acl"))


def test_fast_path_obeys_key_patterns(start_server):
    d = tempfile.mkdtemp(prefix="skv-")
    sock = os.path.join(d, "s.sock")
    srv = start_server(unixsocket=sock, memory__capacity="64mb")
    admin = srv.raw()
    assert admin.call("ACL", "SETUSER", "kv", "on", ">pw", "+@all", "%R~r:*", "%W~w:*") == Simple("OK")
    c = FastConn(sock)
    assert c.call("AUTH", "kv", "pw") == Simple("OK")
    seg = Segment(1 << 20)
    c.register(seg)
    seg.write(0, b"payload!")
    noperm = Err("NOPERM this user has no permissions to access one of the keys used as arguments")
    assert c.call("KV.PUT", "w:1", 8, seg.id, 0, 8) == Simple("OK")
    assert c.call("KV.PUT", "r:1", 8, seg.id, 0, 8) == noperm
    assert c.call("KV.PUT", "x", 8, seg.id, 0, 8) == noperm
    assert admin.call("SET", "r:1", "readable") == Simple("OK")
    assert c.call("KV.GET", "r:1", seg.id, 0, 64) == 8
    assert seg.read(0, 8) == b"readable"
    assert c.call("KV.GET", "w:1", seg.id, 0, 64) == noperm
    assert c.call("KV.MPUT", 2, "w:2", 1, 1, seg.id, 0, 1, "w:3", 1, 1, seg.id, 0, 1) == [
        Simple("OK"), Simple("OK")]
    assert c.call("KV.MPUT", 2, "w:2", 1, 1, seg.id, 0, 1, "r:2", 1, 1, seg.id, 0, 1) == noperm
    assert c.call("KV.MGET", 2, "r:1", 1, seg.id, 0, 8, "w:2", 1, seg.id, 8, 8) == noperm
    assert c.call("KV.PREFIX", "r:1", "r:2") == 1
    assert c.call("KV.PREFIX", "r:1", "w:1") == noperm
    log = admin.call("ACL", "LOG", "1")[0]
    assert log[log.index(b"object") + 1] == b"w:1"
    c.close()
    seg.close()
