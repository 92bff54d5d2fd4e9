"""MULTI, EXEC, DISCARD, WATCH, UNWATCH (server/transaction.h, server/exec.cc): every reply and
error byte for byte against a redis-server started in the same run, WATCH races between two
clients, expiry of a watched key, redis-py's pipelines (transaction=True/False) and its
optimistic-locking loop, and atomicity of a transaction over several shards under concurrent
writers."""

import threading
import time

import pytest
import redis as redislib

from harness import TARGET, launch_redis, stop_servers

pytestmark = pytest.mark.skipif(TARGET == "redis",
                                reason="compares stratakv with redis-server side by side")


class Pair:
    """The same client on both servers: every call's raw reply must be identical."""

    def __init__(self, ours, theirs):
        self.ours, self.theirs = ours, theirs

    def call(self, *args):
        mine = self.ours.call_raw(*args)
        ref = self.theirs.call_raw(*args)
        assert mine == ref, "%r: stratakv %r, redis %r" % (args, mine, ref)
        return mine

    def seq(self, *calls):
        return [self.call(*c) for c in calls]


@pytest.fixture
def pair(r, raw, redis_srv):
    """Two connections to each server (a, b), both flushed."""
    redis_srv.raw().call("FLUSHALL")

    def make():
        return Pair(raw(), raw(redis_srv))

    return make


def test_replies_and_errors(pair):
    p = pair()
    p.seq(("EXEC",), ("DISCARD",), ("UNWATCH",), ("WATCH",), ("MULTI", "x"))
    # A plain transaction, and a nested MULTI (an error that does not abort it).
    p.seq(("MULTI",), ("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("GET", "a"), ("EXEC",))
    # An empty one; DISCARD; EXEC after DISCARD.
    p.seq(("MULTI",), ("EXEC",), ("MULTI",), ("SET", "a", "9"), ("DISCARD",), ("GET", "a"),
          ("EXEC",))
    # Runtime errors are entries of the array; the other commands still run.
    p.seq(("MULTI",), ("SET", "s", "x"), ("INCR", "s"), ("APPEND", "s", "y"), ("GET", "s"),
          ("EXEC",))
    # Errors when queueing abort the whole transaction: nothing runs.
    for bad in (("SET", "a"), ("NOSUCHCMD", "1"), ("GET", "a", "b"), ("EXEC", "x")):
        p.seq(("MULTI",), ("SET", "never", "1"), bad, ("INCR", "a"), ("EXEC",), ("GET", "never"))
    # WATCH inside MULTI is refused without aborting; connection commands run queued.
    p.seq(("MULTI",), ("WATCH", "a"), ("PING",), ("ECHO", "hi"), ("SET", "w", "1"), ("EXEC",))
    # RESET leaves MULTI.
    p.seq(("MULTI",), ("SET", "r", "1"), ("RESET",), ("EXEC",), ("GET", "r"))
    # A multi-key command and keys of many shards in one transaction.
    keys = ["k%d" % i for i in range(20)]
    calls = [("MULTI",)] + [("INCRBY", k, str(i)) for i, k in enumerate(keys)]
    calls += [("MSET", "m1", "a", "m2", "b"), ("MGET", *keys[:5]), ("DEL", "k1", "k2"),
              ("EXEC",), ("MGET", *keys)]
    p.seq(*calls)


def test_keyspace_commands_inside(pair):
    p = pair()
    p.seq(("SET", "x", "1"), ("MULTI",), ("DBSIZE",), ("EXISTS", "x"), ("FLUSHALL",),
          ("DBSIZE",), ("EXEC",), ("DBSIZE",))


def test_pipelined(pair):
    """MULTI ... EXEC sent in one write, and a transaction between plain commands."""
    p = pair()
    from resp_util import encode_command
    batch = b"".join(encode_command(*c) for c in (
        ("SET", "p", "1"), ("MULTI",), ("INCR", "p"), ("BADCMD",), ("EXEC",),
        ("MULTI",), ("INCR", "p"), ("INCR", "p"), ("EXEC",), ("GET", "p")))
    out = []
    for conn in (p.ours, p.theirs):
        conn.send(batch)
        out.append([conn.read_raw_reply() for _ in range(10)])
    assert out[0] == out[1]


def test_watch_races(pair):
    a, b = pair(), pair()
    a.call("SET", "k", "1")
    # A write from another client between WATCH and EXEC aborts (nil).
    a.seq(("WATCH", "k"))
    b.call("SET", "k", "2")
    a.seq(("MULTI",), ("INCR", "k"), ("EXEC",), ("GET", "k"))
    # The same client's own write aborts too.
    a.seq(("WATCH", "k"), ("SET", "k", "5"), ("MULTI",), ("INCR", "k"), ("EXEC",))
    # Untouched: it runs; EXEC unwatched, so a later write changes nothing.
    a.seq(("WATCH", "k", "other"), ("MULTI",), ("INCR", "k"), ("EXEC",))
    b.call("SET", "k", "7")
    a.seq(("MULTI",), ("INCR", "k"), ("EXEC",))
    # UNWATCH forgets; DISCARD unwatches.
    a.seq(("WATCH", "k"), ("UNWATCH",))
    b.call("SET", "k", "1")
    a.seq(("MULTI",), ("GET", "k"), ("EXEC",))
    a.seq(("WATCH", "k"), ("MULTI",), ("DISCARD",))
    b.call("SET", "k", "1")
    a.seq(("MULTI",), ("GET", "k"), ("EXEC",))
    # A missing key created, a key deleted, a deadline set, FLUSHALL: each aborts.
    for change in (("SET", "new", "1"), ("DEL", "k"), ("EXPIRE", "k", "100"), ("FLUSHALL",)):
        a.call("SET", "k", "1")
        a.call("DEL", "new")
        a.seq(("WATCH", "k", "new"))
        b.call(*change)
        a.seq(("MULTI",), ("SET", "after", "1"), ("EXEC",), ("EXISTS", "after"))
    # A read from another client changes nothing.
    a.call("SET", "k", "1")
    a.seq(("WATCH", "k"))
    b.call("GET", "k")
    a.seq(("MULTI",), ("GET", "k"), ("EXEC",))


def test_watch_expiry(pair):
    """A watched key that expires between WATCH and EXEC aborts; one already expired does not."""
    a = pair()
    a.call("SET", "e", "1", "PX", "100")
    a.seq(("WATCH", "e"))
    time.sleep(0.25)
    a.seq(("MULTI",), ("SET", "x", "1"), ("EXEC",))
    a.call("SET", "gone", "1", "PX", "1")
    time.sleep(0.05)
    a.seq(("WATCH", "gone"), ("MULTI",), ("SET", "x", "2"), ("EXEC",))


def test_commandstats(pair):
    p = pair()
    p.call("CONFIG", "RESETSTAT")
    p.seq(("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("INCR", "a"), ("EXEC",),
          ("MULTI",), ("SET", "a"), ("EXEC",), ("EXEC",))

    def calls(conn):
        info = conn.call("INFO", "commandstats").decode()
        out = {}
        for line in info.splitlines():
            if line.startswith("cmdstat_"):
                name, rest = line.split(":", 1)
                fields = dict(f.split("=") for f in rest.split(","))
                out[name] = (fields["calls"], fields["rejected_calls"], fields["failed_calls"])
        return out

    ours, theirs = calls(p.ours), calls(p.theirs)
    for name in ("cmdstat_multi", "cmdstat_exec", "cmdstat_set", "cmdstat_incr"):
        assert ours.get(name) == theirs.get(name), name


def test_redis_py_pipelines(server, redis_srv):
    for srv in (server, redis_srv):
        srv.client().flushall()
    results = []
    for srv in (server, redis_srv):
        r = srv.client()
        got = []
        for transaction in (True, False):
            pipe = r.pipeline(transaction=transaction)
            pipe.set("pk", "1").incr("pk").get("pk").incrby("pk", 5)
            got.append(pipe.execute())
        pipe = r.pipeline()
        pipe.set("s", "x").incr("s").get("s")
        got.append(pipe.execute(raise_on_error=False))
        results.append([[str(v) for v in g] for g in got])
        # A command refused while queueing: nothing of the transaction runs.
        pipe = r.pipeline()
        pipe.set("never", "1").execute_command("NOSUCHCMD")
        with pytest.raises(redislib.ResponseError):
            pipe.execute()
        assert r.get("never") is None
    assert results[0] == results[1]


def test_redis_py_watch_loop(server):
    """Optimistic locking: threads increment one counter with WATCH/GET/MULTI/SET/EXEC,
    retrying on WatchError; no increment is lost."""
    server.client().set("counter", "0")
    per_thread, threads = 100, 4

    def work():
        r = server.client()
        for _ in range(per_thread):
            with r.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch("counter")
                        v = int(pipe.get("counter"))
                        pipe.multi()
                        pipe.set("counter", v + 1)
                        pipe.execute()
                        break
                    except redislib.WatchError:
                        continue

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(server.client().get("counter")) == per_thread * threads


def test_atomic_across_shards(server):
    """Writers run MULTI INCR a; INCR b; ... EXEC over keys of different shards while a reader
    reads them all in one transaction: the reader never sees a half-applied transaction."""
    keys = ["atom:%d" % i for i in range(8)]
    stop = threading.Event()
    errors = []

    def writer():
        r = server.client()
        while not stop.is_set():
            pipe = r.pipeline(transaction=True)
            for k in keys:
                pipe.incr(k)
            pipe.execute()

    def reader():
        r = server.client()
        while not stop.is_set():
            pipe = r.pipeline(transaction=True)
            for k in keys:
                pipe.get(k)
            vals = pipe.execute()
            if len(set(vals)) != 1:
                errors.append(vals)

    ts = [threading.Thread(target=writer) for _ in range(2)] + [threading.Thread(target=reader)]
    for t in ts:
        t.start()
    time.sleep(2.0)
    stop.set()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
    vals = server.client().mget(keys)
    assert len(set(vals)) == 1 and int(vals[0]) > 0


NODE_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "clients" / "node"


@pytest.mark.parametrize("client", ["ioredis", "node-redis"])
def test_node_clients(server, redis_srv, client):
    import json
    import shutil
    import subprocess
    if shutil.which("node") is None or not (NODE_DIR / "node_modules").is_dir():
        pytest.skip("node or tests/clients/node/node_modules missing (scripts/install-deps.sh)")
    results = []
    for srv in (server, redis_srv):
        out = subprocess.run(["node", str(NODE_DIR / "transactions.mjs"),
                              "%s:%d" % (srv.host, srv.port), client],
                             capture_output=True, text=True, timeout=60, cwd=str(NODE_DIR))
        assert out.returncode == 0 and out.stdout.strip(), out.stderr
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]
    assert results[0]["plain"] == ["OK", 2, "2"]


def test_exec_needing_room(start_server):
    """A transaction whose writes find the region full: under noeviction each write answers
    -OOM as its entry (room cannot be made; nothing applied twice) and the server keeps
    answering; under allkeys-lru EXEC makes room with no lock held and runs again from the
    start, and every write is applied once."""
    from resp_util import Err, Simple
    from test_room import fill_region
    srv = start_server(memory__capacity="16mb", maxmemory="1gb", maxmemory_policy="noeviction")
    c = srv.raw(timeout=20)
    assert fill_region(c, srv) >= 8
    oom = c.call("SET", "probe", "1.5")
    assert isinstance(oom, Err) and oom.startswith("OOM")
    calls = [("MULTI",), ("GET", "nothing"), ("INCRBYFLOAT", "p", "1.5"), ("APPEND", "q", "abc"),
             ("INCRBYFLOAT", "p", "1"), ("EXEC",)]
    replies = [c.call(*x) for x in calls]
    assert replies[-1][0] is None and all(isinstance(e, Err) for e in replies[-1][1:])
    assert c.call("PING") == Simple("PONG") and c.call("EXISTS", "p", "q") == 0
    assert c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == Simple("OK")
    time.sleep(0.35)  # the evictor takes the policy at a cron tick
    replies = [c.call(*x) for x in calls]
    assert replies[-1] == [None, b"1.5", 3, b"2.5"], replies[-1]
    assert c.call("GET", "p") == b"2.5" and c.call("GET", "q") == b"abc"


def test_exec_loads_values_on_ssd_first(start_server, tmp_path):
    """With the SSD tier, EXEC loads the queued commands' values that are on SSD only before
    it takes its locks: GET, APPEND and GETRANGE of demoted keys inside a transaction."""
    from test_ssd_tier import demoted, pattern, tier
    keys = ["t:%d" % i for i in range(4)]
    srv, r = demoted(start_server, tmp_path / "ssd", keys)
    assert tier(r, "t:0") == "ssd"
    pipe = r.pipeline(transaction=True)
    pipe.get("t:0").append("t:1", b"+").getrange("t:2", 0, 9).strlen("t:3").set("t:9", "x")
    got = pipe.execute()
    assert got[0] == pattern("t:0", 0)
    assert got[1] == len(pattern("t:1", 1)) + 1
    assert got[2] == pattern("t:2", 2)[:10]
    assert got[3] == len(pattern("t:3", 3)) and got[4] is True
    assert r.get("t:1") == pattern("t:1", 1) + b"+"


def test_cluster_mode_one_slot_per_transaction(redis_srv):
    """In cluster mode every key of a transaction shares one slot: a command with a key of
    another slot is -CROSSSLOT when queued and EXEC answers -EXECABORT; compared with a
    one-node redis-server cluster serving every slot."""
    from cluster_util import StaticCluster
    ours = StaticCluster(1).start()
    theirs = launch_redis(cluster_enabled="yes")
    try:
        ref = theirs.raw()
        ref.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        deadline = time.monotonic() + 10
        while b"cluster_state:ok" not in ref.call("CLUSTER", "INFO"):
            assert time.monotonic() < deadline, "redis cluster not ok"
            time.sleep(0.05)
        p = Pair(ours.nodes[0].raw(), ref)
        p.seq(("MULTI",), ("SET", "{u}a", "1"), ("INCR", "{u}b"), ("MGET", "{u}a", "{u}b"),
              ("EXEC",))
        p.seq(("MULTI",), ("SET", "{u}a", "1"), ("SET", "other", "2"), ("GET", "{u}a"),
              ("EXEC",), ("EXISTS", "other"))
        p.seq(("MULTI",), ("MSET", "x", "1", "y", "2"), ("EXEC",))
        p.seq(("MULTI",), ("PING",), ("GET", "x"), ("EXEC",))
    finally:
        ours.stop()
        stop_servers(theirs)


def test_slowlog_logs_the_commands_not_exec(pair):
    """EXEC is skip_slowlog; the commands it runs are logged each (as Redis's call())."""
    p = pair()
    p.seq(("CONFIG", "SET", "slowlog-log-slower-than", "0"), ("SLOWLOG", "RESET"),
          ("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("EXEC",),
          ("CONFIG", "SET", "slowlog-log-slower-than", "10000"))
    names = []
    for conn in (p.ours, p.theirs):
        entries = conn.call("SLOWLOG", "GET", "10")
        names.append([e[3][0].upper() for e in entries])
    assert names[0] == names[1], names
    for name in ("MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"):
        p.call("COMMAND", "INFO", name)
