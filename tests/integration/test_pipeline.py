"""The request pipeline (server/pipeline.h, docs/design.md "A request, end to end"), checked
against redis-server in the same run where Redis has the same behaviour:

- the one key extractor: COMMAND GETKEYS of a sample call of every command in the table gives
  exactly its keys, and redis-server's answer for Redis's own commands;
- the slot ownership stage: keys in slots this node does not serve get -MOVED before anything
  is loaded, moved or allocated (DEBUG SET-SLOT-OWNER, a test aid), with the slot redis-server's
  CLUSTER KEYSLOT gives;
- command statistics: INFO commandstats / errorstats / total_error_replies and CONFIG RESETSTAT
  count as redis-server does for the same sequence of commands.
"""

import os
import tempfile
import time

import pytest

from fastpath_util import FastConn, Segment
from harness import TARGET, launch_redis, redis_binary, stop_servers
from resp_util import Err, Simple

OK = Simple("OK")
MiB = 1 << 20
ELSEWHERE = "10.0.0.9:7001"  # the node DEBUG SET-SLOT-OWNER hands slots to

pytestmark = pytest.mark.skipif(TARGET == "redis",
                                reason="compares stratakv with redis-server side by side")

NO_KEYS = Err("ERR The command has no key arguments")
CONTAINER = "container"  # a container: GETKEYS reaches its subcommands only

# One sample call per command and subcommand of the table, with the keys it names (None: the
# command takes no keys). The walk below fails when COMMAND lists a command that is missing
# here (or this table names one the server does not have), so the table stays complete.
SAMPLES = {
    "ping": (["PING", "hi"], None),
    "echo": (["ECHO", "hi"], None),
    "auth": (["AUTH", "pw"], None),
    "hello": (["HELLO", "3"], None),
    "select": (["SELECT", "0"], None),
    "replicaof": (["REPLICAOF", "NO", "ONE"], None),
    "slaveof": (["SLAVEOF", "NO", "ONE"], None),
    "role": (["ROLE", "x"], None),
    "wait": (["WAIT", "0", "0"], None),
    "replconf": (["REPLCONF", "listening-port", "1"], None),
    "psync": (["PSYNC", "?", "-1"], None),
    "quit": (["QUIT", "x"], None),
    "reset": (["RESET", "x"], None),
    "client": CONTAINER,
    "client|id": (["CLIENT", "ID"], None),
    "client|setname": (["CLIENT", "SETNAME", "n"], None),
    "client|getname": (["CLIENT", "GETNAME"], None),
    "client|list": (["CLIENT", "LIST"], None),
    "client|info": (["CLIENT", "INFO"], None),
    "client|setinfo": (["CLIENT", "SETINFO", "lib-name", "x"], None),
    "client|kill": (["CLIENT", "KILL", "1.2.3.4:5"], None),
    "client|no-evict": (["CLIENT", "NO-EVICT", "on"], None),
    "client|help": (["CLIENT", "HELP"], None),
    "get": (["GET", "k"], ["k"]),
    "set": (["SET", "k", "v", "EX", "10", "GET"], ["k"]),
    "setnx": (["SETNX", "k", "v"], ["k"]),
    "setex": (["SETEX", "k", "10", "v"], ["k"]),
    "psetex": (["PSETEX", "k", "10", "v"], ["k"]),
    "getset": (["GETSET", "k", "v"], ["k"]),
    "getdel": (["GETDEL", "k"], ["k"]),
    "getex": (["GETEX", "k", "PERSIST"], ["k"]),
    "mget": (["MGET", "a", "b", "c"], ["a", "b", "c"]),
    "mset": (["MSET", "a", "1", "b", "2"], ["a", "b"]),
    "msetnx": (["MSETNX", "a", "1", "b", "2", "c", "3"], ["a", "b", "c"]),
    "append": (["APPEND", "k", "v"], ["k"]),
    "strlen": (["STRLEN", "k"], ["k"]),
    "getrange": (["GETRANGE", "k", "0", "1"], ["k"]),
    "setrange": (["SETRANGE", "k", "0", "v"], ["k"]),
    "incr": (["INCR", "k"], ["k"]),
    "decr": (["DECR", "k"], ["k"]),
    "incrby": (["INCRBY", "k", "2"], ["k"]),
    "decrby": (["DECRBY", "k", "2"], ["k"]),
    "incrbyfloat": (["INCRBYFLOAT", "k", "1.5"], ["k"]),
    "del": (["DEL", "a", "b"], ["a", "b"]),
    "unlink": (["UNLINK", "a", "b"], ["a", "b"]),
    "exists": (["EXISTS", "a", "b", "a"], ["a", "b", "a"]),
    "touch": (["TOUCH", "a", "b"], ["a", "b"]),
    "type": (["TYPE", "k"], ["k"]),
    "rename": (["RENAME", "a", "b"], ["a", "b"]),
    "renamenx": (["RENAMENX", "a", "b"], ["a", "b"]),
    "copy": (["COPY", "a", "b", "REPLACE"], ["a", "b"]),
    "keys": (["KEYS", "*"], None),
    "scan": (["SCAN", "0", "MATCH", "k*"], None),
    "randomkey": (["RANDOMKEY", "x"], None),
    "dbsize": (["DBSIZE", "x"], None),
    "flushdb": (["FLUSHDB", "ASYNC"], None),
    "flushall": (["FLUSHALL", "ASYNC"], None),
    "expire": (["EXPIRE", "k", "10", "NX"], ["k"]),
    "pexpire": (["PEXPIRE", "k", "10"], ["k"]),
    "expireat": (["EXPIREAT", "k", "100", "GT"], ["k"]),
    "pexpireat": (["PEXPIREAT", "k", "100"], ["k"]),
    "ttl": (["TTL", "k"], ["k"]),
    "pttl": (["PTTL", "k"], ["k"]),
    "expiretime": (["EXPIRETIME", "k"], ["k"]),
    "pexpiretime": (["PEXPIRETIME", "k"], ["k"]),
    "persist": (["PERSIST", "k"], ["k"]),
    "object": CONTAINER,
    "object|encoding": (["OBJECT", "ENCODING", "k"], ["k"]),
    "object|freq": (["OBJECT", "FREQ", "k"], ["k"]),
    "object|idletime": (["OBJECT", "IDLETIME", "k"], ["k"]),
    "object|refcount": (["OBJECT", "REFCOUNT", "k"], ["k"]),
    "object|help": (["OBJECT", "HELP"], None),
    "info": (["INFO", "server"], None),
    "time": (["TIME", "x"], None),
    "lastsave": (["LASTSAVE", "x"], None),
    "shutdown": (["SHUTDOWN", "NOSAVE"], None),
    "debug": (["DEBUG", "SLEEP", "0"], None),
    "config": CONTAINER,
    "config|get": (["CONFIG", "GET", "maxmemory"], None),
    "config|set": (["CONFIG", "SET", "maxmemory", "0"], None),
    "config|resetstat": (["CONFIG", "RESETSTAT"], None),
    "config|help": (["CONFIG", "HELP"], None),
    "command": CONTAINER,
    "command|count": (["COMMAND", "COUNT"], None),
    "command|docs": (["COMMAND", "DOCS", "get"], None),
    "command|getkeys": (["COMMAND", "GETKEYS", "get", "k"], None),
    "command|getkeysandflags": (["COMMAND", "GETKEYSANDFLAGS", "get", "k"], None),
    "command|help": (["COMMAND", "HELP"], None),
    "command|info": (["COMMAND", "INFO", "get"], None),
    "command|list": (["COMMAND", "LIST"], None),
    "slowlog": CONTAINER,
    "slowlog|get": (["SLOWLOG", "GET", "1"], None),
    "slowlog|len": (["SLOWLOG", "LEN"], None),
    "slowlog|reset": (["SLOWLOG", "RESET"], None),
    "slowlog|help": (["SLOWLOG", "HELP"], None),
    "memory": CONTAINER,
    "memory|usage": (["MEMORY", "USAGE", "k", "SAMPLES", "5"], ["k"]),
    "memory|stats": (["MEMORY", "STATS"], None),
    "memory|purge": (["MEMORY", "PURGE"], None),
    "memory|help": (["MEMORY", "HELP"], None),
    "tier": (["TIER", "k"], ["k"]),
    "kv.register": (["KV.REGISTER", "SHM", "4096"], None),
    "kv.connect": (["KV.CONNECT", "VERBS", "00" * 16, "1", "2", "1024"], None),
    "kv.unregister": (["KV.UNREGISTER", "1"], None),
    "kv.put": (["KV.PUT", "k", "3", "1", "0", "3", "EX", "10"], ["k"]),
    "kv.get": (["KV.GET", "k", "1", "0", "2", "1", "8", "1"], ["k"]),
    "kv.mput": (["KV.MPUT", "2", "a", "3", "1", "1", "0", "3",
                 "b", "4", "2", "1", "0", "2", "1", "2", "2", "PX", "100", "NX"], ["a", "b"]),
    "kv.mget": (["KV.MGET", "3", "a", "1", "1", "0", "3", "b", "0", "c", "1", "1", "3", "3"],
                ["a", "b", "c"]),
    "kv.prefix": (["KV.PREFIX", "a", "b", "c", "PIN", "100"], ["a", "b", "c"]),
    "kv.unpin": (["KV.UNPIN", "a", "b"], ["a", "b"]),
    "asking": (["ASKING", "x"], None),
    "readonly": (["READONLY", "x"], None),
    "readwrite": (["READWRITE", "x"], None),
    "cluster": CONTAINER,
    "cluster|slots": (["CLUSTER", "SLOTS"], None),
    "cluster|shards": (["CLUSTER", "SHARDS"], None),
    "cluster|nodes": (["CLUSTER", "NODES"], None),
    "cluster|info": (["CLUSTER", "INFO"], None),
    "cluster|myid": (["CLUSTER", "MYID"], None),
    "cluster|myshardid": (["CLUSTER", "MYSHARDID"], None),
    "cluster|help": (["CLUSTER", "HELP"], None),
    "cluster|replicas": (["CLUSTER", "REPLICAS", "a" * 40], None),
    "cluster|keyslot": (["CLUSTER", "KEYSLOT", "k"], None),
    "cluster|topology": (["CLUSTER", "TOPOLOGY"], None),
    "cluster|syncslots": (["CLUSTER", "SYNCSLOTS", "x"], None),
    "cluster|getslotmigrations": (["CLUSTER", "GETSLOTMIGRATIONS"], None),
    "cluster|countkeysinslot": (["CLUSTER", "COUNTKEYSINSLOT", "1"], None),
    "cluster|getkeysinslot": (["CLUSTER", "GETKEYSINSLOT", "1", "1"], None),
    # The commands of a gossip cluster (each answers an error naming stratakv-admin).
    "cluster|meet": (["CLUSTER", "MEET", "x"], None),
    "cluster|forget": (["CLUSTER", "FORGET", "x"], None),
    "cluster|addslots": (["CLUSTER", "ADDSLOTS", "x"], None),
    "cluster|addslotsrange": (["CLUSTER", "ADDSLOTSRANGE", "x"], None),
    "cluster|delslots": (["CLUSTER", "DELSLOTS", "x"], None),
    "cluster|delslotsrange": (["CLUSTER", "DELSLOTSRANGE", "x"], None),
    "cluster|flushslots": (["CLUSTER", "FLUSHSLOTS", "x"], None),
    "cluster|setslot": (["CLUSTER", "SETSLOT", "x"], None),
    "cluster|replicate": (["CLUSTER", "REPLICATE", "x"], None),
    "cluster|failover": (["CLUSTER", "FAILOVER", "x"], None),
    "cluster|reset": (["CLUSTER", "RESET", "x"], None),
    "cluster|set-config-epoch": (["CLUSTER", "SET-CONFIG-EPOCH", "x"], None),
    "cluster|bumpepoch": (["CLUSTER", "BUMPEPOCH", "x"], None),
    "cluster|saveconfig": (["CLUSTER", "SAVECONFIG", "x"], None),
    "cluster|count-failure-reports": (["CLUSTER", "COUNT-FAILURE-REPORTS", "x"], None),
    "cluster|links": (["CLUSTER", "LINKS", "x"], None),
    "multi": (["MULTI", "x"], None),
    "exec": (["EXEC", "x"], None),
    "discard": (["DISCARD", "x"], None),
    "watch": (["WATCH", "a", "b"], ["a", "b"]),
    "unwatch": (["UNWATCH", "x"], None),
    "lcs": (["LCS", "a", "b", "LEN"], ["a", "b"]),
    "substr": (["SUBSTR", "k", "0", "1"], ["k"]),
    "setbit": (["SETBIT", "k", "7", "1"], ["k"]),
    "getbit": (["GETBIT", "k", "7"], ["k"]),
    "bitcount": (["BITCOUNT", "k", "0", "-1", "BIT"], ["k"]),
    "bitpos": (["BITPOS", "k", "1", "0"], ["k"]),
    "bitop": (["BITOP", "AND", "d", "a", "b"], ["d", "a", "b"]),
    "bitfield": (["BITFIELD", "k", "GET", "u8", "0"], ["k"]),
    "bitfield_ro": (["BITFIELD_RO", "k", "GET", "u8", "0"], ["k"]),
    "subscribe": (["SUBSCRIBE", "c"], None),
    "unsubscribe": (["UNSUBSCRIBE", "c"], None),
    "psubscribe": (["PSUBSCRIBE", "c*"], None),
    "punsubscribe": (["PUNSUBSCRIBE", "c*"], None),
    "publish": (["PUBLISH", "c", "m"], None),
    "ssubscribe": (["SSUBSCRIBE", "c"], None),
    "sunsubscribe": (["SUNSUBSCRIBE", "c"], None),
    "spublish": (["SPUBLISH", "c", "m"], None),
    "pubsub": CONTAINER,
    "pubsub|channels": (["PUBSUB", "CHANNELS", "c*"], None),
    "pubsub|numpat": (["PUBSUB", "NUMPAT"], None),
    "pubsub|numsub": (["PUBSUB", "NUMSUB", "c"], None),
    "pubsub|shardchannels": (["PUBSUB", "SHARDCHANNELS"], None),
    "pubsub|shardnumsub": (["PUBSUB", "SHARDNUMSUB", "c"], None),
    "pubsub|help": (["PUBSUB", "HELP"], None),
    "eval": (["EVAL", "return 1", "2", "a", "b", "x"], ["a", "b"]),
    "evalsha": (["EVALSHA", "f" * 40, "1", "a", "x"], ["a"]),
    "eval_ro": (["EVAL_RO", "return 1", "1", "a"], ["a"]),
    "evalsha_ro": (["EVALSHA_RO", "f" * 40, "2", "a", "b"], ["a", "b"]),
    "script": CONTAINER,
    "script|load": (["SCRIPT", "LOAD", "return 1"], None),
    "script|exists": (["SCRIPT", "EXISTS", "x"], None),
    "script|flush": (["SCRIPT", "FLUSH"], None),
    "script|kill": (["SCRIPT", "KILL"], None),
    "script|help": (["SCRIPT", "HELP"], None),
    "script|debug": (["SCRIPT", "DEBUG", "NO"], None),
    "acl": CONTAINER,
    "acl|cat": (["ACL", "CAT"], None),
    "acl|deluser": (["ACL", "DELUSER", "nobody"], None),
    "acl|dryrun": (["ACL", "DRYRUN", "default", "GET", "k"], None),
    "acl|genpass": (["ACL", "GENPASS"], None),
    "acl|getuser": (["ACL", "GETUSER", "default"], None),
    "acl|help": (["ACL", "HELP"], None),
    "acl|list": (["ACL", "LIST"], None),
    "acl|load": (["ACL", "LOAD"], None),
    "acl|log": (["ACL", "LOG"], None),
    "acl|save": (["ACL", "SAVE"], None),
    "acl|setuser": (["ACL", "SETUSER", "someone"], None),
    "acl|users": (["ACL", "USERS"], None),
    "acl|whoami": (["ACL", "WHOAMI"], None),
    "latency": CONTAINER,
    "latency|doctor": (["LATENCY", "DOCTOR"], None),
    "latency|graph": (["LATENCY", "GRAPH", "command"], None),
    "latency|help": (["LATENCY", "HELP"], None),
    "latency|history": (["LATENCY", "HISTORY", "command"], None),
    "latency|latest": (["LATENCY", "LATEST"], None),
    "latency|reset": (["LATENCY", "RESET", "command"], None),
    "monitor": (["MONITOR", "x"], None),
}

# Commands whose COMMAND entry has keys that COMMAND GETKEYS does not give: shard channels,
# keys for the cluster's slot stage only (Redis's key specs flag them not_key).
NOT_KEY = {"ssubscribe", "sunsubscribe", "spublish"}


def command_names(c):
    """Every command and subcommand COMMAND lists, with whether its entry says it takes keys
    (a key range, key specs, or movablekeys)."""
    names = {}

    def walk(entry):
        name, flags, first, specs = entry[0].decode(), entry[2], entry[3], entry[8]
        names[name] = first > 0 or len(specs) > 0 or Simple("movablekeys") in flags
        for sub in entry[9] or []:
            walk(sub)

    for entry in c.call("COMMAND"):
        walk(entry)
    return names


def getkeys(c, args):
    return c.call("COMMAND", "GETKEYS", *args)


def test_getkeys_sample_table_is_complete(raw):
    names = command_names(raw())
    assert sorted(set(names) - set(SAMPLES)) == [], "commands without a sample call"
    assert sorted(set(SAMPLES) - set(names)) == [], "samples of commands the server lacks"
    for name, takes_keys in names.items():
        if SAMPLES[name] is CONTAINER:
            continue
        assert takes_keys == (SAMPLES[name][1] is not None or name in NOT_KEY), name


def test_getkeys_of_every_command(raw, redis_srv):
    c, redis = raw(), redis_srv.raw()
    compared = 0
    for name, sample in sorted(SAMPLES.items()):
        if sample is CONTAINER:
            continue
        args, keys = sample
        got = getkeys(c, args)
        want = NO_KEYS if keys is None else [k.encode() for k in keys]
        assert got == want, (name, args)
        if redis.call("COMMAND", "INFO", name.replace("|", " ").split()[0]) == [None]:
            continue  # stratakv's own command
        if "|" in name and redis.call("COMMAND", "INFO", name) == [None]:
            continue  # a subcommand Redis 7.0 does not have (CLIENT SETINFO is 7.2's)
        assert got == getkeys(redis, args), (name, args)
        compared += 1
    assert compared >= 80


def test_getkeys_errors_and_layouts(raw, redis_srv):
    c, redis = raw(), redis_srv.raw()
    for args in (["NOSUCH", "a"], ["GET", "a", "b"], ["CONFIG", "NOSUCH"], ["PING", "x"],
                 ["MSET", "a", "1", "b"], ["SET", "k"]):
        assert getkeys(c, args) == getkeys(redis, args), args
    # KV.PREFIX: a trailing PIN <ms> is an option, anything else a key.
    assert getkeys(c, ["KV.PREFIX", "a", "pin"]) == [b"a", b"pin"]
    assert getkeys(c, ["KV.PREFIX", "a", "PIN", "x"]) == [b"a", b"PIN", b"x"]
    assert getkeys(c, ["KV.PREFIX", "a", "b", "PIN", "0"]) == [b"a", b"b"]
    # Batches: the handler's layout, counts checked against the arguments.
    invalid = Err("ERR Invalid arguments specified for command")
    for args in (["KV.MGET", "2", "a", "1", "1", "0", "3"],            # count past the entries
                 ["KV.MGET", "1", "a", str(10 ** 15), "1", "0", "1"],  # nsegs past them
                 ["KV.MGET", "1", "a", "1", "1", "0", "3", "extra"],   # trailing arguments
                 ["KV.MPUT", "1", "a", "-1", "1", "1", "0", "3"],      # negative length
                 ["KV.MPUT", "0", "a", "3", "1", "1", "0", "3"],       # count not positive
                 ["KV.MPUT", str(2 ** 64), "a", "3", "1", "1", "0", "3"]):
        assert getkeys(c, args) == invalid, args
    assert getkeys(c, ["KV.MPUT", "1", "a", "3", "0", "EX", "10"]) == [b"a"]


def test_command_info_of_batches_says_movablekeys(raw):
    c = raw()
    (entry,) = c.call("COMMAND", "INFO", "KV.MGET")
    assert Simple("movablekeys") in entry[2]
    (spec,) = entry[8]
    assert spec[spec.index(b"begin_search") + 1] == [b"type", b"unknown", b"spec", []]


# ---------------------------------------------------------------- slot ownership

def slot_of(c, key):
    """The slot of `key` as this node's -MOVED says, with every slot served elsewhere."""
    assert c.call("DEBUG", "SET-SLOT-OWNER", 0, 16383, ELSEWHERE) == OK
    try:
        reply = c.call("GET", key)
    finally:
        assert c.call("DEBUG", "SET-SLOT-OWNER", 0, 16383, "MYSELF") == OK
    assert isinstance(reply, Err) and reply.startswith("MOVED "), reply
    slot, to = reply.split()[1:]
    assert to == ELSEWHERE
    return int(slot)


def give_away(c, key):
    slot = slot_of(c, key)
    assert c.call("DEBUG", "SET-SLOT-OWNER", slot, slot, ELSEWHERE) == OK
    return slot


def test_moved_slots_are_redis_cluster_keyslots(raw, start_server):
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    cluster = launch_redis(cluster_enabled="yes")
    try:
        redis = cluster.raw()
        c = raw()
        for key in ("foo", "bar", "somekey", "", "{user1000}.following", "foo{}{bar}",
                    "foo{{bar}}zap", "}{x}", "a" * 1000, "\xff\x00"):
            assert slot_of(c, key) == redis.call("CLUSTER", "KEYSLOT", key), key
    finally:
        stop_servers(cluster)


@pytest.fixture
def sock_path():
    yield os.path.join(tempfile.mkdtemp(prefix="skv-"), "s.sock")


def test_keys_in_unowned_slots_get_moved_and_others_work(start_server, sock_path):
    srv = start_server(unixsocket=sock_path, memory__capacity="256mb")
    c = FastConn(sock_path)
    try:
        seg = Segment(MiB)
        c.register(seg)
        seg.write(0, b"abc")
        assert slot_of(c, "bar") != slot_of(c, "foo")
        moved = give_away(c, "foo")
        redirect = Err("MOVED %d %s" % (moved, ELSEWHERE))
        assert c.call("SET", "foo", "x") == redirect
        assert c.call("GET", "foo") == redirect
        assert c.call("KV.PUT", "foo", 3, seg.id, 0, 3) == redirect
        # A batch routes each key (docs/cluster.md): bar is stored, foo's entry says where it goes.
        assert c.call("KV.MPUT", 2, "bar", 3, 1, seg.id, 0, 3, "foo", 3, 1, seg.id, 0, 3) == [
            OK, redirect]
        assert c.call("DEL", "bar") == 1
        assert c.call("MGET", "bar", "foo") == redirect
        assert c.call("DEL", "foo") == redirect
        assert c.call("COMMAND", "GETKEYS", "GET", "foo") == [b"foo"]  # no keys of its own
        assert srv.client().info("fastpath")["kv_put_bytes"] == 3  # bar's bytes, none of foo's
        assert c.call("SET", "bar", "y") == OK
        assert c.call("GET", "bar") == b"y"
        assert c.call("KV.PUT", "bar", 3, seg.id, 0, 3) == OK
        assert c.call("GET", "bar") == b"abc"
        # Errors of the earlier stages come first, as in Redis: unknown, arity, then MOVED.
        assert c.call("GET", "foo", "x") == Err("ERR wrong number of arguments for 'get' command")
        assert c.call("DEBUG", "SET-SLOT-OWNER", moved, moved, "MYSELF") == OK
        assert c.call("GET", "foo") is None  # nothing was written while it was elsewhere
        assert c.call("SET", "foo", "x") == OK
        assert c.call("DEBUG", "SET-SLOT-OWNER", 1, 0, ELSEWHERE) == Err(
            "ERR Invalid or out of range slot")
        assert c.call("DEBUG", "SET-SLOT-OWNER", 0, 16384, ELSEWHERE) == Err(
            "ERR Invalid or out of range slot")
    finally:
        c.close()


def region(srv):
    m = srv.client().info("memory")
    return m["region_allocated"], m["query_buffers_reserved"]


def test_large_bulk_for_an_unowned_key_is_never_allocated(start_server):
    """The block of a large SET value is taken from the region as soon as its `$len` arrives;
    for a key another node serves it must not be (nor staged on the heap): the bytes are
    dropped as they come and the reply is the redirect."""
    srv = start_server(memory__capacity="256mb")
    size = 32 * MiB
    half = b"v" * (size // 2)
    c = srv.raw()
    moved = give_away(c, "foo")
    for key, owned in (("bar", True), ("foo", False)):
        base, _ = region(srv)
        w = srv.raw()
        w.send(b"*3\r\n$3\r\nSET\r\n$3\r\n%s\r\n$%d\r\n" % (key.encode(), size) + half)
        # The server has read the header and most of the half by now (socket buffers hold a few
        # MiB at most); give it a moment to be sure.
        time.sleep(0.3)
        allocated, reserved = region(srv)
        if owned:
            assert allocated - base >= size and reserved >= size, (base, allocated, reserved)
        else:
            assert allocated - base < MiB and reserved < MiB, (base, allocated, reserved)
        w.send(half + b"\r\n")
        reply = w.read_reply(timeout=30)
        assert reply == (OK if owned else Err("MOVED %d %s" % (moved, ELSEWHERE))), key
        w.close()
    assert c.call("STRLEN", "bar") == size
    assert c.call("DEBUG", "SET-SLOT-OWNER", moved, moved, "MYSELF") == OK
    assert c.call("EXISTS", "foo") == 0


def test_keys_on_ssd_in_unowned_slots_are_not_loaded(start_server, tmp_path):
    srv = start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(tmp_path / "ssd"),
                       tiering__ssd__flush_on_shutdown="yes", memory__capacity="64mb")
    r = srv.client()
    r.set("foo", b"f" * 100000)
    r.set("bar", b"b" * 100000)
    assert srv.stop() is None
    srv.start()  # every key is on SSD only now
    r = srv.client()
    c = srv.raw()
    assert c.call("TIER", "foo") == b"ssd" and c.call("TIER", "bar") == b"ssd"
    moved = give_away(c, "foo")
    reads = r.info("tiering")["ssd_reads"]
    # A pipeline: GET bar loads bar and prefetches the reads behind it, but not foo.
    c.send(b"*2\r\n$3\r\nGET\r\n$3\r\nbar\r\n*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n")
    assert c.read_reply() == b"b" * 100000
    assert c.read_reply() == Err("MOVED %d %s" % (moved, ELSEWHERE))
    assert r.info("tiering")["ssd_reads"] == reads + 1
    assert c.call("TIER", "foo") == Err("MOVED %d %s" % (moved, ELSEWHERE))
    assert c.call("DEBUG", "SET-SLOT-OWNER", moved, moved, "MYSELF") == OK
    assert c.call("TIER", "foo") == b"ssd"
    assert c.call("GET", "foo") == b"f" * 100000


# ---------------------------------------------------------------- command statistics

def info_fields(c, section):
    text = c.call("INFO", section).decode()
    fields = {}
    for line in text.split("\r\n"):
        if line and not line.startswith("#"):
            name, _, value = line.partition(":")
            fields[name] = value
    return fields


def command_stats(c):
    """cmdstat_<name> -> (calls, rejected_calls, failed_calls); usec are left out."""
    stats = {}
    for name, value in info_fields(c, "commandstats").items():
        assert name.startswith("cmdstat_"), name
        f = dict(kv.split("=") for kv in value.split(","))
        assert set(f) == {"calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"}
        calls, usec = int(f["calls"]), int(f["usec"])
        assert f["usec_per_call"] == "%.2f" % (usec / calls if calls else 0), value
        stats[name] = (calls, int(f["rejected_calls"]), int(f["failed_calls"]))
    return stats


def run_sequence(c):
    """The same commands on either server; returns what INFO says after them."""
    assert c.call("CONFIG", "RESETSTAT") == OK
    for _ in range(3):
        assert c.call("GET", "a") is None
    assert c.call("SET", "a", "not-a-number") == OK
    assert c.call("GET", "a") == b"not-a-number"
    assert c.call("GET") == Err("ERR wrong number of arguments for 'get' command")
    assert c.call("INCR", "a") == Err("ERR value is not an integer or out of range")
    assert c.call("NOSUCHCMD", "x").startswith("ERR unknown command 'NOSUCHCMD'")
    assert c.call("CONFIG", "NOSUCH") == Err("ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.")
    assert c.call("CONFIG", "GET") == Err(
        "ERR wrong number of arguments for 'config|get' command")
    assert c.call("SET", "b", "1", "EX", "0") == Err("ERR invalid expire time in 'set' command")
    before = (command_stats(c), info_fields(c, "errorstats"),
              info_fields(c, "stats")["total_error_replies"])
    assert c.call("CONFIG", "RESETSTAT") == OK
    after = (command_stats(c), info_fields(c, "errorstats"),
             info_fields(c, "stats")["total_error_replies"])
    return before, after


def test_command_and_error_stats_count_as_redis_does(start_server, redis_srv):
    ours = run_sequence(start_server().raw())
    theirs = run_sequence(redis_srv.raw())
    assert ours == theirs
    (cmds, errors, total), (cmds_reset, errors_reset, total_reset) = ours
    assert cmds["cmdstat_get"] == (4, 1, 0)
    assert cmds["cmdstat_incr"] == (1, 0, 1)
    assert cmds["cmdstat_config|get"] == (0, 1, 0)
    assert errors == {"errorstat_ERR": "count=6"} and total == "6"
    assert cmds["cmdstat_set"] == (2, 0, 1)
    assert cmds_reset == {"cmdstat_config|resetstat": (1, 0, 0)}
    assert errors_reset == {} and total_reset == "0"


def test_stats_of_redirects_and_sections(start_server):
    srv = start_server()
    c = srv.raw()
    assert c.call("CONFIG", "RESETSTAT") == OK
    moved = give_away(c, "foo")
    assert c.call("GET", "foo") == Err("MOVED %d %s" % (moved, ELSEWHERE))
    stats = command_stats(c)
    assert stats["cmdstat_get"] == (0, 2, 0)  # slot_of's GET and this one, both redirected
    assert info_fields(c, "errorstats")["errorstat_MOVED"] == "count=2"
    # INFO / INFO default leave commandstats out; all and everything have every section.
    text = c.call("INFO").decode()
    assert "# Errorstats\r\n" in text and "# Commandstats" not in text
    for section in ("all", "everything"):
        text = c.call("INFO", section).decode()
        assert text.index("# CPU") < text.index("# Commandstats") < text.index("# Errorstats")
        assert "cmdstat_get:" in text
