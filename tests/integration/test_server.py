"""Server commands: INFO, CONFIG, COMMAND, TIME, SLOWLOG, DBSIZE, error texts."""

import re
import time

import pytest

from resp_util import OK, Err, Simple

ERR_NOT_INT = Err("ERR value is not an integer or out of range")


@pytest.fixture
def c(r, raw):
    return raw()


def info_text(c, *sections):
    reply = c.call("INFO", *sections)
    assert isinstance(reply, bytes), reply
    return reply.decode()


def config_get(c, pattern):
    reply = c.call("CONFIG", "GET", pattern)
    assert isinstance(reply, list) and len(reply) % 2 == 0, reply
    return dict(zip(reply[0::2], reply[1::2]))


# ---------------------------------------------------------------- INFO

def test_info_server_section(server, r, c):
    info = r.info("server")
    assert re.match(r"^\d+\.\d+\.\d+$", str(info["redis_version"])), info["redis_version"]
    assert int(str(info["redis_version"]).split(".")[0]) >= 7
    assert info["tcp_port"] == server.port
    assert info["process_id"] == server.proc.pid
    assert isinstance(info["uptime_in_seconds"], int) and info["uptime_in_seconds"] >= 0
    text = info_text(c, "server")
    assert text.startswith("# Server\r\n")
    assert "\r\nredis_version:" in text
    assert "# Clients" not in text
    # every non-empty line is a header or key:value, lines end with CRLF
    for line in text.split("\r\n"):
        assert line == "" or line.startswith("# ") or ":" in line, line
    assert "\n" not in text.replace("\r\n", "")


def test_info_clients_counts_connections(start_server):
    srv = start_server()
    client = srv.client()
    try:
        # The readiness probe's connection (harness.py) may still be closing on the server's
        # side: wait for it to go.
        deadline = time.monotonic() + 3
        while client.info("clients")["connected_clients"] != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        base = client.info("clients")["connected_clients"]
        assert base == 1
        assert client.info("clients")["maxclients"] > 0
        conns = [srv.raw() for _ in range(3)]
        for x in conns:
            assert x.call("PING") == Simple("PONG")
        assert client.info("clients")["connected_clients"] == base + 3
        for x in conns:
            x.close()
        deadline = time.monotonic() + 3
        while client.info("clients")["connected_clients"] != base and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.info("clients")["connected_clients"] == base
    finally:
        client.close()


def test_info_memory(r, c):
    info = r.info("memory")
    assert isinstance(info["used_memory"], int) and info["used_memory"] > 0
    assert re.match(r"^\d+(\.\d+)?[BKMGTP]$", str(info["used_memory_human"])), info["used_memory_human"]
    assert isinstance(info["maxmemory"], int)
    assert "maxmemory_policy" in info
    text = info_text(c, "memory")
    assert text.startswith("# Memory\r\n")


def test_used_memory_tracks_values(r):
    before = r.info("memory")["used_memory"]
    value = b"m" * (1 << 20)
    for i in range(16):
        r.set("mem:%d" % i, value)
    during = r.info("memory")["used_memory"]
    assert during - before >= 15 * (1 << 20), (before, during)
    r.flushall()
    deadline = time.monotonic() + 3
    after = r.info("memory")["used_memory"]
    while after > during - 8 * (1 << 20) and time.monotonic() < deadline:
        time.sleep(0.05)
        after = r.info("memory")["used_memory"]
    assert after <= during - 8 * (1 << 20), (before, during, after)


def test_info_stats_and_resetstat(r, c):
    before = r.info("stats")["total_commands_processed"]
    for _ in range(10):
        assert c.call("PING") == Simple("PONG")
    after = r.info("stats")["total_commands_processed"]
    assert after - before >= 11
    r.set("hit", 1)
    assert c.call("CONFIG", "RESETSTAT") == OK
    stats = r.info("stats")
    assert stats["total_commands_processed"] <= 2
    assert stats["keyspace_hits"] == 0 and stats["keyspace_misses"] == 0
    for _ in range(3):
        assert c.call("GET", "hit") == b"1"
    for _ in range(2):
        assert c.call("GET", "miss") is None
    stats = r.info("stats")
    assert stats["keyspace_hits"] == 3
    assert stats["keyspace_misses"] == 2


def test_info_keyspace(r, c):
    assert r.info("keyspace") == {}
    assert info_text(c, "keyspace").startswith("# Keyspace\r\n")
    r.set("a", 1)
    r.set("b", 2, ex=100)
    r.set("c", 3)
    ks = r.info("keyspace")
    assert ks["db0"]["keys"] == 3
    assert ks["db0"]["expires"] == 1
    assert "avg_ttl" in ks["db0"]
    assert re.search(r"\r\ndb0:keys=3,expires=1,avg_ttl=\d+\r\n", info_text(c, "keyspace"))


def test_info_all_everything_default(r, c):
    r.set("k", "v")
    for section in (None, "all", "everything", "ALL", "default"):
        info = r.info(section) if section else r.info()
        for field in ("redis_version", "tcp_port", "connected_clients", "used_memory",
                      "used_memory_human", "maxmemory", "total_commands_processed"):
            assert field in info, (section, field)
        assert info["db0"]["keys"] == 1, section
    text = info_text(c, "all")
    for header in ("# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"):
        assert header + "\r\n" in text, header


def test_info_multiple_and_unknown_sections(c):
    text = info_text(c, "server", "clients")
    assert "# Server\r\n" in text and "# Clients\r\n" in text
    assert "# Memory" not in text
    assert c.call_raw("INFO", "nosuchsection") == b"$0\r\n\r\n"


# ---------------------------------------------------------------- CONFIG

def test_config_get_star(server, c):
    cfg = config_get(c, "*")
    assert len(cfg) >= 10
    for key in (b"maxmemory", b"port", b"maxclients", b"timeout", b"proto-max-bulk-len",
                b"client-query-buffer-limit", b"requirepass", b"maxmemory-policy",
                b"save", b"appendonly"):
        assert key in cfg, key
    assert cfg[b"port"] == str(server.port).encode()
    assert cfg[b"requirepass"] == b""
    assert cfg[b"timeout"] == b"0"
    assert cfg[b"proto-max-bulk-len"] == b"536870912"
    assert cfg[b"client-query-buffer-limit"] == b"1073741824"
    assert cfg[b"appendonly"] == b"no"
    assert cfg[b"maxmemory"].isdigit()
    assert cfg[b"maxclients"].isdigit() and int(cfg[b"maxclients"]) > 0


def test_config_get_glob_and_multiple(c):
    cfg = config_get(c, "max*")
    assert b"maxclients" in cfg and b"maxmemory" in cfg
    assert all(k.startswith(b"max") for k in cfg)
    assert config_get(c, "maxclients").keys() == {b"maxclients"}
    # parameter names are case-insensitive (Redis 7.0 echoes the name as given)
    upper = config_get(c, "MAXCLIENTS")
    assert len(upper) == 1 and list(upper)[0].lower() == b"maxclients"
    assert list(upper.values()) == list(config_get(c, "maxclients").values())
    assert config_get(c, "nosuchparam") == {}
    assert c.call_raw("CONFIG", "GET", "nosuchparam") == b"*0\r\n"
    reply = c.call("CONFIG", "GET", "timeout", "port")
    assert len(reply) == 4
    assert set(dict(zip(reply[0::2], reply[1::2])).keys()) == {b"timeout", b"port"}
    assert c.call("CONFIG", "GET") == Err("ERR wrong number of arguments for 'config|get' command")


def test_config_set_then_get(c):
    orig = config_get(c, "*")
    try:
        assert c.call("CONFIG", "SET", "maxclients", "50") == OK
        assert config_get(c, "maxclients") == {b"maxclients": b"50"}
        assert c.call("CONFIG", "SET", "timeout", "30") == OK
        assert config_get(c, "timeout") == {b"timeout": b"30"}
        assert c.call("CONFIG", "SET", "maxclients", "60", "timeout", "40") == OK
        assert config_get(c, "maxclients")[b"maxclients"] == b"60"
        assert config_get(c, "timeout")[b"timeout"] == b"40"
        assert c.call("CONFIG", "SET", "maxmemory", "64mb") == OK
        assert config_get(c, "maxmemory") == {b"maxmemory": b"67108864"}
        assert c.call("CONFIG", "SET", "MAXCLIENTS", "70") == OK
        assert config_get(c, "maxclients")[b"maxclients"] == b"70"
    finally:
        assert c.call("CONFIG", "SET", "maxclients", orig[b"maxclients"]) == OK
        assert c.call("CONFIG", "SET", "timeout", orig[b"timeout"]) == OK
        assert c.call("CONFIG", "SET", "maxmemory", orig[b"maxmemory"]) == OK
    assert config_get(c, "maxclients")[b"maxclients"] == orig[b"maxclients"]


def test_config_set_errors(c):
    assert c.call("CONFIG", "SET", "nope", "1") == Err(
        "ERR Unknown option or number of arguments for CONFIG SET - 'nope'")
    assert c.call("CONFIG", "SET", "maxclients") == Err(
        "ERR wrong number of arguments for 'config|set' command")
    assert c.call("CONFIG", "SET", "maxclients", "abc") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
        "argument couldn't be parsed into an integer")
    assert c.call("CONFIG", "SET", "timeout", "-1") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - "
        "argument must be between 0 and 2147483647 inclusive")
    assert c.call("CONFIG", "NOSUCH") == Err("ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.")


def test_config_save_is_checked_as_redis_does(same):
    """save: "" or pairs of <seconds >= 1> <changes >= 0> (Redis 7.0's setConfigSaveOption),
    read back with one space between words. stratakv writes no RDB: it only keeps the text."""
    try:
        for value in ("3600 1 300 100", "  60   10 ", "1 0", "", "abc", "3600", "0 1",
                      "10 -1", "10 5x", "3600 1 300", "60 10\t20 5", "60 10 ", "60  10",
                      "+60 007", "60 \t10", " ", "60 1 "):
            same("CONFIG", "SET", "save", value)
            same("CONFIG", "GET", "save")
    finally:
        same("CONFIG", "SET", "save", "")


# ---------------------------------------------------------------- COMMAND

def test_command_count_and_list(r, c):
    count = c.call("COMMAND", "COUNT")
    assert isinstance(count, int) and count > 50
    names = c.call("COMMAND", "LIST")
    assert isinstance(names, list)
    assert len(set(names)) == len(names)
    # COMMAND LIST also lists subcommands as "parent|sub"; COMMAND COUNT counts top-level ones
    top = [n for n in names if b"|" not in n]
    assert len(top) == count
    for n in names:
        if b"|" in n:
            assert n.split(b"|")[0] in top, n
    for n in (b"get", b"set", b"del", b"ping", b"info", b"config", b"command", b"scan",
              b"expire", b"hello", b"client", b"mget", b"mset", b"incrbyfloat"):
        assert n in names, n
    assert all(n == n.lower() for n in names)
    everything = c.call("COMMAND")
    assert isinstance(everything, list) and len(everything) == count
    # redis-py parses the full COMMAND reply
    table = r.command()
    assert table["get"]["arity"] == 2
    assert table["set"]["arity"] == -3


def test_command_info(c):
    reply = c.call("COMMAND", "INFO", "get", "set", "nosuchcommand")
    assert isinstance(reply, list) and len(reply) == 3
    get, set_, missing = reply
    assert missing is None
    for entry in (get, set_):
        assert isinstance(entry, list) and len(entry) == 10, entry
        assert all(isinstance(f, Simple) for f in entry[2]), entry[2]
    assert get[0] == b"get" and get[1] == 2
    assert set_[0] == b"set" and set_[1] == -3
    assert Simple("readonly") in get[2]
    assert Simple("write") in set_[2]
    assert Simple("write") not in get[2]
    assert get[3:6] == [1, 1, 1]
    assert set_[3:6] == [1, 1, 1]
    mset, ping = c.call("COMMAND", "INFO", "mset", "PING")
    assert mset[0] == b"mset" and mset[1] == -3 and mset[3:6] == [1, -1, 2]
    assert ping[0] == b"ping" and ping[1] == -1 and ping[3:6] == [0, 0, 0]


def test_command_docs(c):
    reply = c.call("COMMAND", "DOCS", "get")
    assert isinstance(reply, list) and len(reply) == 2
    assert reply[0] == b"get"
    doc = reply[1]
    assert isinstance(doc, list) and len(doc) % 2 == 0
    d = dict(zip(doc[0::2], doc[1::2]))
    assert isinstance(d[b"summary"], bytes) and d[b"summary"]
    assert d[b"group"] == b"string"
    assert b"since" in d
    assert c.call("COMMAND", "DOCS", "nosuchcommand") == []
    r3 = c.call("HELLO", "3")
    assert isinstance(r3, dict)
    m = c.call("COMMAND", "DOCS", "get")
    assert isinstance(m, dict) and list(m.keys()) == [b"get"]
    assert isinstance(m[b"get"], dict) and m[b"get"][b"group"] == b"string"


def test_command_getkeys(c):
    assert c.call("COMMAND", "GETKEYS", "set", "a", "b") == [b"a"]
    assert c.call("COMMAND", "GETKEYS", "mset", "a", "b", "c", "d") == [b"a", b"c"]
    assert c.call("COMMAND", "GETKEYS", "mget", "x", "y", "z") == [b"x", b"y", b"z"]
    assert c.call("COMMAND", "GETKEYS", "nosuchcmd", "a") == Err("ERR Invalid command specified")
    assert c.call("COMMAND", "GETKEYS", "get") == Err(
        "ERR wrong number of arguments for 'command|getkeys' command")
    assert c.call("COMMAND", "NOSUCH") == Err("ERR unknown subcommand 'NOSUCH'. Try COMMAND HELP.")


# ---------------------------------------------------------------- TIME / DBSIZE

def test_time(c):
    before = time.time()
    reply = c.call("TIME")
    after = time.time()
    assert isinstance(reply, list) and len(reply) == 2
    sec, usec = reply
    assert isinstance(sec, bytes) and sec.isdigit()
    assert isinstance(usec, bytes) and usec.isdigit()
    t = int(sec) + int(usec) / 1e6
    assert before - 1 <= t <= after + 1
    assert 0 <= int(usec) < 1000000
    assert c.call("TIME", "x") == Err("ERR wrong number of arguments for 'time' command")


def test_dbsize(r, c):
    assert c.call("DBSIZE") == 0
    r.mset({"a": 1, "b": 2})
    assert c.call("DBSIZE") == 2
    assert c.call("DBSIZE", "x") == Err("ERR wrong number of arguments for 'dbsize' command")


# ---------------------------------------------------------------- SLOWLOG

def test_slowlog(c):
    orig = config_get(c, "slowlog-log-slower-than")[b"slowlog-log-slower-than"]
    assert c.call("CLIENT", "SETNAME", "slowpoke") == OK
    try:
        assert c.call("CONFIG", "SET", "slowlog-log-slower-than", "0") == OK
        assert c.call("SLOWLOG", "RESET") == OK
        assert c.call("SET", "slowkey", "slowvalue") == OK
        n = c.call("SLOWLOG", "LEN")
        assert isinstance(n, int) and n >= 1
        entries = c.call("SLOWLOG", "GET", "128")
        assert isinstance(entries, list) and len(entries) >= 1
        ours = [e for e in entries if e[3] == [b"SET", b"slowkey", b"slowvalue"]]
        assert len(ours) == 1, entries
        e = ours[0]
        assert len(e) == 6
        eid, ts, dur, args, addr, name = e
        assert isinstance(eid, int) and eid >= 0
        assert abs(ts - time.time()) < 10
        assert isinstance(dur, int) and dur >= 0
        host, port = c.sock.getsockname()
        assert addr == ("%s:%d" % (host, port)).encode()
        assert name == b"slowpoke"
        # newest first, ids increasing
        ids = [x[0] for x in entries]
        assert ids == sorted(ids, reverse=True)
        assert len(c.call("SLOWLOG", "GET", "1")) == 1
        assert c.call("SLOWLOG", "GET", "abc") == Err("ERR count should be greater than or equal to -1")
        assert c.call("SLOWLOG", "GET", "-2") == Err("ERR count should be greater than or equal to -1")
    finally:
        assert c.call("CONFIG", "SET", "slowlog-log-slower-than", orig) == OK
    assert c.call("SLOWLOG", "RESET") == OK
    assert c.call("SLOWLOG", "GET") == []
    assert c.call("SLOWLOG", "NOSUCH") == Err("ERR unknown subcommand 'NOSUCH'. Try SLOWLOG HELP.")


def test_debug_sleep_out_of_range_answers_at_once(target, start_server):
    """DEBUG SLEEP's seconds become microseconds: past int64 (1e13 s, inf) Redis's conversion
    overflows and it answers at once; stratakv answers the same, without undefined behaviour."""
    srv = start_server(**({"enable_debug_command": "yes"} if target == "redis" else {}))
    c = srv.raw()
    for secs in ("1e13", "1e300", "inf", "nan", "-1", "abc", "0.01"):
        t0 = time.monotonic()
        assert c.call("DEBUG", "SLEEP", secs) == OK, secs
        assert time.monotonic() - t0 < 1.0, secs
    assert c.call("PING") == Simple("PONG")
    c.close()


# ---------------------------------------------------------------- generic errors

def test_unknown_command_error_text(c):
    assert c.call("foo", "a", "b") == Err("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
    assert c.call("FOO") == Err("ERR unknown command 'FOO', with args beginning with: ")
    assert c.call_raw("nosuchcmd", "x") == b"-ERR unknown command 'nosuchcmd', with args beginning with: 'x' \r\n"
    # the connection stays usable
    assert c.call("PING") == Simple("PONG")


def test_wrong_arity_error_text(c):
    for cmd, name in ((("GET",), "get"), (("SET", "k"), "set"), (("GET", "a", "b"), "get"),
                      (("EXPIRE", "k"), "expire"), (("INCR",), "incr"), (("TTL",), "ttl"),
                      (("MGET",), "mget"), (("EXISTS",), "exists")):
        assert c.call(*cmd) == Err("ERR wrong number of arguments for '%s' command" % name), cmd
