"""Limits that protect the server, side by side with redis-server (Redis 7.0) in the same run:
maxclients and the open-files limit it needs (adjustOpenFilesLimit), tcp-keepalive
(anetKeepAlive)."""

import re
import subprocess
import time

import pytest

from harness import launch_redis, launch_server, redis_binary, stop_servers
from resp_util import ConnectionClosed, RawConn, Simple

needs_redis = pytest.mark.skipif(redis_binary() is None, reason="no redis-server to compare with")

MAX_CLIENTS_TEXT = b"-ERR max number of clients reached\r\n"

# A log line of either server: "pid:M 01 Dec 2026 21:30:18.032 # message".
LOG_LINE = re.compile(r"^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ [.\-*#] (.*)$")


@pytest.fixture
def pair():
    """pair(**config) -> (stratakv, redis-server), both with that config; stopped at teardown."""
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    started = []

    def start(**config):
        ours = launch_server(**config)
        started.append(ours)
        theirs = launch_redis(**config)
        started.append(theirs)
        return ours, theirs

    yield start
    stop_servers(*started)


def log_messages(srv):
    out = []
    for line in srv.log_path.read_text(errors="replace").splitlines():
        m = LOG_LINE.match(line)
        if m:
            out.append(m.group(1))
    return out


def connected_clients(conn):
    info = conn.call("INFO", "clients").decode()
    return int(re.search(r"connected_clients:(\d+)", info).group(1))


def config_value(conn, name):
    reply = conn.call("CONFIG", "GET", name)
    return reply[1]


def open_files_limit(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no open files line")


def try_clients(srv, n):
    """Opens n connections one after another, each sending PING. Returns (accepted, rejected):
    the open connections that answered PONG, and the replies of those closed at once."""
    accepted, rejected = [], []
    for _ in range(n):
        c = RawConn(srv.host, srv.port, timeout=5)
        c.send(b"PING\r\n")
        try:
            reply = c.read_raw_reply()
        except ConnectionClosed:
            reply = bytes(c.buf)
        if reply == b"+PONG\r\n":
            accepted.append(c)
        else:
            data, closed = c.read_until_closed(timeout=5)
            rejected.append((reply + data, closed))
            c.close()
    return accepted, rejected


def test_maxclients_50_with_60_connections(pair):
    for srv in pair(maxclients=50):
        first = srv.raw()
        # The harness's readiness connection may hold a slot for a moment.
        deadline = time.monotonic() + 5
        while connected_clients(first) != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert connected_clients(first) == 1, srv.name
        accepted, rejected = try_clients(srv, 59)
        try:
            assert len(accepted) == 49, srv.name
            assert rejected == [(MAX_CLIENTS_TEXT, True)] * 10, srv.name
            assert connected_clients(first) == 50, srv.name
            # Those accepted still work; one leaving makes room for one more.
            for c in accepted:
                assert c.call("PING") == Simple("PONG")
            accepted.pop().close()
            deadline = time.monotonic() + 5
            while connected_clients(first) != 49 and time.monotonic() < deadline:
                time.sleep(0.02)
            more, refused = try_clients(srv, 2)
            assert len(more) == 1 and refused == [(MAX_CLIENTS_TEXT, True)], srv.name
            accepted += more
        finally:
            for c in accepted:
                c.close()
            first.close()


def test_open_files_limit_raised_for_maxclients(pair):
    """A soft limit below maxclients + 32 under a high hard limit: raised, with Redis's notice."""
    ours, theirs = pair(maxclients=1000, _nofile=(256, 4096))
    for srv in (ours, theirs):
        assert open_files_limit(srv.proc.pid) == (1032, 1032 if srv is theirs else 4096)
        assert config_value(srv.raw(), "maxclients") == b"1000"
        assert ("Increased maximum number of open files to 1032 (it was originally set to 256)."
                in log_messages(srv)), srv.name
    assert "open files limit=1032 maxclients=1000 reserved=32" in log_messages(ours)


def test_default_maxclients_gets_its_files(start_server):
    srv = start_server()
    soft, _ = open_files_limit(srv.proc.pid)
    assert soft >= 10000 + 32
    assert config_value(srv.raw(), "maxclients") == b"10000"
    assert "open files limit=%d maxclients=10000 reserved=32" % soft in log_messages(srv)


def test_maxclients_lowered_to_fit_a_hard_limit(pair):
    """The hard limit is too low: maxclients becomes limit - 32, with Redis's warnings; CONFIG
    SET of more than fits fails as Redis's does and changes nothing."""
    ours, theirs = pair(maxclients=1000, _nofile=(100, 100))
    warnings = [
        "You requested maxclients of 1000 requiring at least 1032 max file descriptors.",
        "Server can't set maximum open files to 1032 because of OS error: Operation not "
        "permitted.",
        "Current maximum open files is 100. maxclients has been reduced to 68 to compensate for "
        "low ulimit. If you need higher maxclients increase 'ulimit -n'.",
    ]
    replies = {}
    for srv in (ours, theirs):
        msgs = log_messages(srv)
        start = msgs.index(warnings[0])
        assert msgs[start:start + 3] == warnings, srv.name
        c = srv.raw()
        got = [config_value(c, "maxclients")]
        for value in ("1000", "60", "68", "69"):
            got.append(c.call_raw("CONFIG", "SET", "maxclients", value))
            got.append(config_value(c, "maxclients"))
        replies[srv.name] = got
        assert open_files_limit(srv.proc.pid) == (100, 100)
    mine, ref = replies[ours.name], replies[theirs.name]
    assert mine == ref
    assert mine[0] == b"68"
    assert mine[1] == (b"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The "
                       b"operating system is not able to handle the specified number of clients, "
                       b"try with 68\r\n")
    assert mine[2] == b"68"
    assert "Failed applying new configuration. Possibly related to new maxclients setting. " \
           "Restoring previous settings." in log_messages(ours)


@needs_redis
def test_too_few_files_to_start(tmp_path):
    """Not even the 32 reserved descriptors: Redis's message, exit 1."""
    from harness import server_binary
    import resource

    texts = []
    for binary in (server_binary("stratakv"), redis_binary()):
        proc = subprocess.run(
            [binary, "--port", "0", "--bind", "127.0.0.1", "--maxclients", "50"],
            capture_output=True, timeout=10, cwd=str(tmp_path),
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)))
        assert proc.returncode == 1, binary
        out = (proc.stdout + proc.stderr).decode(errors="replace").splitlines()
        texts.append([LOG_LINE.match(l).group(1) for l in out if LOG_LINE.match(l)
                      and "ulimit" in l])
    assert texts[0] == texts[1] == [
        "Your current 'ulimit -n' of 32 is not enough for the server to start. Please increase "
        "your open file limit to at least 82. Exiting."]


def keepalive_timers(port):
    """The keepalive timer (seconds left) of each server-side socket on `port`; None where
    SO_KEEPALIVE is off."""
    out = subprocess.run(["ss", "-tnoH", "state", "established", "( sport = :%d )" % port],
                         capture_output=True, text=True, check=True).stdout
    timers = []
    for line in out.splitlines():
        # ss prints the time left as "4min59sec", "5min" (whole minutes) or "59sec".
        m = re.search(r"timer:\(keepalive,(?:(\d+)min)?(?:(\d+)sec)?", line)
        ok = m is not None and (m.group(1) or m.group(2))
        timers.append(int(m.group(1) or 0) * 60 + int(m.group(2) or 0) if ok else None)
    return timers


@pytest.mark.parametrize("interval", [300, 100, 0])
def test_tcp_keepalive_first_probe_after_the_interval(pair, interval):
    """tcp-keepalive sets TCP_KEEPIDLE (what `ss -o` shows as the keepalive timer); 0 is off.
    TCP_KEEPINTVL and TCP_KEEPCNT are read back in tests/unit/os_tuning_test.cc."""
    if subprocess.run(["ss", "-V"], capture_output=True).returncode != 0:
        pytest.skip("no ss")
    got = {}
    for srv in pair(tcp_keepalive=interval):
        c = srv.raw()
        assert c.call("PING") == Simple("PONG")
        timers = keepalive_timers(srv.port)
        got[srv.kind] = timers
        c.close()
    for kind, timers in got.items():
        assert timers, kind
        for t in timers:
            if interval == 0:
                assert t is None, (kind, timers)
            else:
                assert t is not None and interval - 5 <= t <= interval, (kind, timers)
