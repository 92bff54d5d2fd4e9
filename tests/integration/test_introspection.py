"""LATENCY and MONITOR (server/latency.h, server/monitor.h), compared with redis-server (Redis
7.0) in the same run: LATENCY's replies with the monitor off and after a spike (DEBUG SLEEP past
latency-monitor-threshold), DOCTOR's and GRAPH's texts (digits aside); MONITOR's lines for the
same commands on both servers (plain, quoted, in MULTI/EXEC, from a script, AUTH and HELLO
redacted, admin and refused commands left out), its +OK, RESET and QUIT, CLIENT LIST's O flag,
redis-py's monitor(); then stratakv's own: a monitor that never reads does not slow the
others, and client-output-buffer-limit closes it."""

import re
import socket
import time

import pytest

from harness import TARGET, launch_redis, redis_binary, stop_servers
from resp_util import RawConn, Simple, Verbatim

pytestmark = pytest.mark.skipif(TARGET == "redis",
                                reason="compares stratakv with redis-server side by side")

OK = Simple("OK")


@pytest.fixture(scope="module")
def redis_srv():
    """redis-server with DEBUG enabled (DEBUG SLEEP makes the latency spikes)."""
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    srv = launch_redis(enable_debug_command="yes")
    yield srv
    stop_servers(srv)


def both(raw, redis_srv):
    return raw(), raw(redis_srv)


def set_threshold(conns, ms):
    for c in conns:
        assert c.call("CONFIG", "SET", "latency-monitor-threshold", str(ms)) == OK


def digits_out(v):
    """`v` with every run of digits as N (timestamps and measured milliseconds differ)."""
    if isinstance(v, Verbatim):
        v = v.data
    if isinstance(v, bytes):
        v = v.decode()
    return re.sub(r"\d+", "N", v)


# ---- LATENCY ----------------------------------------------------------------

def test_latency_replies_when_off(same, raw, redis_srv):
    same("CONFIG", "GET", "latency-monitor-threshold")
    for c in both(raw, redis_srv):
        c.call("LATENCY", "RESET")
    for args in (["LATENCY", "LATEST"], ["LATENCY", "HISTORY", "command"],
                 ["LATENCY", "RESET"], ["LATENCY", "RESET", "command", "x"],
                 ["LATENCY", "GRAPH", "command"], ["LATENCY", "DOCTOR"],
                 ["LATENCY", "HISTORY"], ["LATENCY", "LATEST", "x"], ["LATENCY", "NOSUCH"],
                 ["LATENCY"], ["CONFIG", "SET", "latency-monitor-threshold", "-1"],
                 ["CONFIG", "SET", "latency-monitor-threshold", "x"]):
        same(*args)
    same.pair(resp3=True)("LATENCY", "DOCTOR")  # a verbatim string in RESP3


def without_histogram(lines):
    """LATENCY HELP's lines less HISTOGRAM's entry (Redis 7.0 has it; stratakv does not serve it,
    docs/commands.md): its heading line and the indented lines under it."""
    out, skipping = [], False
    for line in lines:
        if not line.startswith(" "):
            skipping = line.startswith("HISTOGRAM")
        if not skipping:
            out.append(line)
    return out


def test_latency_help(raw, redis_srv):
    ours, theirs = both(raw, redis_srv)
    assert ours.call("LATENCY", "HELP") == without_histogram(theirs.call("LATENCY", "HELP"))


def test_latency_spike_recorded_as_redis_does(raw, redis_srv):
    conns = both(raw, redis_srv)
    try:
        for c in conns:
            c.call("LATENCY", "RESET")
        set_threshold(conns, 100)
        before = int(time.time())
        for c in conns:
            assert c.call("DEBUG", "SLEEP", "0.25") == OK
            assert c.call("GET", "k") is None  # fast and quick: no sample
        latest = [c.call("LATENCY", "LATEST") for c in conns]
        for got in latest:
            assert len(got) == 1, got
            event, when, ms, worst = got[0]
            assert event == b"command"
            assert before <= when <= time.time() + 1
            assert 250 <= ms < 2000 and worst == ms
        history = [c.call("LATENCY", "HISTORY", "command") for c in conns]
        assert [len(h) for h in history] == [1, 1]
        assert [c.call("LATENCY", "HISTORY", "COMMAND") for c in conns] == [[], []]
        doctor = [digits_out(c.call("LATENCY", "DOCTOR")) for c in conns]
        assert doctor[0] == doctor[1]
        assert doctor[0].startswith("Dave, I have observed latency spikes")
        graph = [digits_out(c.call("LATENCY", "GRAPH", "command")) for c in conns]
        assert graph[0] == graph[1]
        assert [c.call("LATENCY", "RESET", "COMMAND", "nosuch") for c in conns] == [1, 1]
        assert [c.call("LATENCY", "LATEST") for c in conns] == [[], []]
    finally:
        set_threshold(conns, 0)
        for c in conns:
            c.call("LATENCY", "RESET")


def test_latency_off_records_nothing(raw):
    c = raw()
    c.call("LATENCY", "RESET")
    assert c.call("DEBUG", "SLEEP", "0.05") == OK
    assert c.call("LATENCY", "LATEST") == []


# ---- MONITOR ----------------------------------------------------------------

LINE = re.compile(r"^\d{10}\.\d{6} \[0 (127\.0\.0\.1:\d+|lua)\] (.*)$")


def monitor_lines(mon, n, timeout=5.0):
    """The next `n` monitor lines, as (origin, command text), origin's port as PORT."""
    out = []
    for _ in range(n):
        v = mon.read_reply(timeout=timeout)
        assert isinstance(v, Simple), v
        m = LINE.match(str(v))
        assert m, v
        out.append((re.sub(r":\d+$", ":PORT", m.group(1)), m.group(2)))
    return out


def nothing_more(conn, wait=0.3):
    time.sleep(wait)
    conn.sock.setblocking(False)
    try:
        data = conn.sock.recv(1 << 16)
    except BlockingIOError:
        data = b""
    finally:
        conn.sock.setblocking(True)
        conn.sock.settimeout(conn.timeout)
    assert data == b"" and not conn.buf, bytes(conn.buf) + data


# What a client runs while another monitors, and how many lines each request shows (Redis 7.0).
SCRIPT = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])"
SESSION = [
    (["SET", "k", "v"], 1),
    (["GET", "k"], 1),
    (["SET", "sp ace", b"q\"uote\\back\r\n\t\x07\x08\x01\xff\x7f end"], 1),
    (["SET", "n", "12345"], 1),
    (["PING"], 1),
    (["NOSUCH", "x"], 0),            # refused: never ran
    (["GET"], 0),                    # wrong arity: refused
    (["CONFIG", "GET", "maxmemory"], 0),  # admin: not shown
    (["DEBUG", "SLEEP", "0"], 0),    # admin
    (["AUTH", "secret"], 1),         # runs (and fails): redacted
    (["AUTH", "user", "secret"], 1),
    (["AUTH", "a", "b", "c"], 1),    # syntax error before the redaction
    (["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "me"], 1),
    (["HELLO", "9", "AUTH", "default", "pw"], 1),
    (["HELLO", "3", "AUTH", "default"], 1),  # a syntax error: nothing redacted
    (["MULTI"], 1),
    (["SET", "a", "1"], 0),          # queued
    (["INCR", "a"], 0),
    (["EXEC"], 3),                   # the queued commands as they run, then EXEC
    (["EVAL", SCRIPT, "1", "s", "val"], 3),  # EVAL first, then its script's commands
    (["EVALSHA", "f" * 40, "0"], 1),         # shown whatever becomes of it
    (["EVAL", "return 1", "x"], 1),
    (["MULTI"], 1),
    (["EVAL", "return redis.call('get', KEYS[1])", "1", "s"], 0),
    (["GET", "s"], 0),
    (["EXEC"], 4),                           # EVAL, its get, GET, EXEC
    (["SUBSCRIBE", "ch"], 1),
    (["UNSUBSCRIBE"], 1),
]


def run_session(client, mon):
    lines = []
    for args, shown in SESSION:
        client.call(*args)
        if shown:
            lines += monitor_lines(mon, shown)
    nothing_more(mon)
    return lines


def test_monitor_lines_as_redis(raw, redis_srv):
    got = []
    for srv in (None, redis_srv):
        mon, client = raw(srv), raw(srv)
        assert mon.call("MONITOR") == OK
        got.append(run_session(client, mon))
    ours, theirs = got
    assert ours == theirs
    texts = [t for _, t in ours]
    assert '"SET" "sp ace" "q\\"uote\\\\back\\r\\n\\t\\a\\b\\x01\\xff\\x7f end"' in texts
    assert '"AUTH" "(redacted)"' in texts
    assert ("lua", '"set" "s" "val"') in ours


def test_monitor_sees_own_commands_second_monitor_silent_reset_ends(raw, redis_srv):
    got = []
    for srv in (None, redis_srv):
        mon = raw(srv)
        assert mon.call("MONITOR") == OK
        mon.send_cmd("MONITOR")  # a monitor asking again gets no reply at all
        mon.send_cmd("PING")
        seq = [mon.read_reply()]
        seq += monitor_lines(mon, 1)
        assert mon.call("RESET") == Simple("RESET")
        other = raw(srv)
        other.call("SET", "after", "reset")
        nothing_more(mon)
        got.append(seq)
    assert got[0] == got[1]
    assert got[0][0] == Simple("PONG")


def test_monitor_in_multi_refused_and_client_list_flag(same, raw, redis_srv):
    same("MULTI")
    same("MONITOR")
    same("EXEC")
    for srv in (None, redis_srv):
        mon, c = raw(srv), raw(srv)
        mon.call("CLIENT", "SETNAME", "watcher")
        assert mon.call("MONITOR") == OK
        listing = c.call("CLIENT", "LIST").decode()
        line = [l for l in listing.splitlines() if " name=watcher " in l][0]
        assert " flags=O " in line, line
        mon.send_cmd("QUIT")
        data, closed = mon.read_until_closed()
        assert closed and data.startswith(b"+OK\r\n"), data


def test_monitor_quit_shown_to_other_monitors(raw, redis_srv):
    got = []
    for srv in (None, redis_srv):
        mon, c = raw(srv), raw(srv)
        assert mon.call("MONITOR") == OK
        c.send_cmd("QUIT")
        c.read_until_closed()
        raw(srv).call("PING", "last")
        lines = []
        while not lines or lines[-1][1] != '"PING" "last"':
            lines += monitor_lines(mon, 1)
        got.append(lines)
    assert got[0] == got[1]


def test_monitor_unix_socket_origin(start_server, tmp_path):
    ours = start_server(unixsocket=str(tmp_path / "ours.sock"))
    theirs = launch_redis(unixsocket=str(tmp_path / "theirs.sock"))
    try:
        got = []
        for srv in (ours, theirs):
            mon = srv.raw()
            assert mon.call("MONITOR") == OK
            c = RawConn(unix_path=srv.unixsocket)
            assert c.call("SET", "k", "v") == OK
            line = str(mon.read_reply())
            got.append(re.sub(r"^\d+\.\d{6} ", "", line).replace(srv.unixsocket, "PATH"))
            c.close()
            mon.close()
        assert got[0] == got[1] == '[0 unix:PATH] "SET" "k" "v"'
    finally:
        stop_servers(theirs)


def test_redis_py_monitor(server, r):
    with r.monitor() as m:
        other = server.client()
        other.set("k", "v")
        other.eval("return redis.call('get', KEYS[1])", 1, "k")
        other.ping()
        cmds = []
        while not cmds or cmds[-1]["command"] != "PING":
            cmds.append(m.next_command())
        other.close()
    assert cmds[0]["command"] == "SET k v" and cmds[0]["client_type"] == "tcp"
    assert cmds[0]["db"] == 0 and cmds[0]["client_address"] == "127.0.0.1"
    assert {"command": "get k", "client_type": "lua"}.items() <= [
        c for c in cmds if c["client_type"] == "lua"][0].items()


def test_stalled_monitor_does_not_slow_others(raw):
    mon = raw()
    mon.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    assert mon.call("MONITOR") == OK
    c = raw()
    value = "x" * 20000
    start = time.monotonic()
    for i in range(1500):  # about 30 MB of monitor lines the monitor never reads
        c.send_cmd("SET", "k%d" % (i % 10), value)
    for _ in range(1500):
        assert c.read_reply() == OK
    assert time.monotonic() - start < 20
    assert c.call("PING") == Simple("PONG")


def test_monitor_closed_past_output_limit(raw):
    admin = raw()
    assert admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0") == OK
    try:
        mon = raw()  # its kernel buffers hold a few MB; the rest waits in its mailbox
        assert mon.call("MONITOR") == OK
        c = raw()
        value = "y" * 50000
        for i in range(400):  # 20 MB of lines
            assert c.call("SET", "k", value) == OK
        _, closed = mon.read_until_closed(timeout=10)
        assert closed
        assert c.call("PING") == Simple("PONG")
        deadline = time.monotonic() + 3
        while b" flags=O " in c.call("CLIENT", "LIST") and time.monotonic() < deadline:
            time.sleep(0.05)  # the closed monitor leaves the registry as its loop ends
        assert b" flags=O " not in c.call("CLIENT", "LIST")
    finally:
        admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0")
