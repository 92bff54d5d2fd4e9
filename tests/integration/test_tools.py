"""The stock Redis tools work unchanged: redis-cli and redis-benchmark."""

import shutil
import subprocess

import pytest


REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
REDIS_BENCHMARK = shutil.which("redis-benchmark") or "/usr/bin/redis-benchmark"

pytestmark = pytest.mark.skipif(
    not (shutil.which("redis-cli") and shutil.which("redis-benchmark")),
    reason="redis-cli / redis-benchmark not installed (Debian package redis-tools)",
)


def run(args, input=None, timeout=120):
    p = subprocess.run(args, input=input, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def cli(server, *args, input=None):
    return run([REDIS_CLI, "-h", server.host, "-p", str(server.port)] + list(args), input=input)


def test_redis_cli_set_get(server, r):
    rc, out, err = cli(server, "set", "k", "v")
    assert rc == 0, err
    assert out == "OK\n"
    rc, out, err = cli(server, "get", "k")
    assert rc == 0, err
    assert out == "v\n"
    rc, out, err = cli(server, "get", "nokey")
    assert rc == 0 and out == "\n"
    rc, out, err = cli(server, "incr", "n")
    assert rc == 0 and out == "1\n"
    assert r.get("k") == b"v"


def test_redis_cli_errors_are_reported(server, r):
    rc, out, err = cli(server, "nosuchcommand", "x")
    assert "ERR unknown command 'nosuchcommand', with args beginning with: 'x'" in out + err


def test_redis_cli_scan_pattern(server, r):
    wanted = {"x%d" % i for i in range(50)} | {"xy", "x"}
    for k in wanted:
        r.set(k, 1)
    for k in ("y1", "ax", "yx"):
        r.set(k, 1)
    rc, out, err = cli(server, "--scan", "--pattern", "x*")
    assert rc == 0, err
    lines = out.splitlines()
    assert set(lines) == wanted
    assert len(lines) >= len(wanted)


def test_redis_cli_reads_commands_from_stdin(server, r):
    rc, out, err = cli(server, input=b"SET a 1\nINCR a\n")
    assert rc == 0, err
    assert out == "OK\n2\n"
    assert r.get("a") == b"2"


def test_redis_cli_pipe_mode(server, r):
    n = 1000
    chunks = []
    for i in range(n):
        k, v = b"pipe:%d" % i, b"%d" % i
        chunks.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    chunks.append(b"*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n")
    rc, out, err = cli(server, "--pipe", input=b"".join(chunks))
    assert rc == 0, out + err
    assert "errors: 0, replies: %d" % (n + 1) in out
    assert r.dbsize() == n + 1
    assert r.get("pipe:999") == b"999"
    assert r.get("counter") == b"1"


def test_redis_cli_with_password(start_server):
    srv = start_server(requirepass="cli-secret")
    rc, out, err = cli(srv, "-a", "cli-secret", "--no-auth-warning", "ping")
    assert rc == 0 and out == "PONG\n", err
    rc, out, err = cli(srv, "ping")
    assert "NOAUTH Authentication required." in out + err
    rc, out, err = cli(srv, "-a", "wrong", "--no-auth-warning", "ping")
    assert "WRONGPASS invalid username-password pair or user is disabled." in out + err


def test_redis_benchmark(server, r):
    rc, out, err = run([REDIS_BENCHMARK, "-h", server.host, "-p", str(server.port),
                        "-t", "set,get,incr,mset", "-n", "100000", "-P", "16", "-q"], timeout=300)
    assert rc == 0, out + err
    text = out + err
    # progress lines are separated by \r; look at every fragment
    fragments = [f.strip() for line in text.splitlines() for f in line.split("\r") if f.strip()]
    for f in fragments:
        assert "ERR" not in f and "rror" not in f, f
        assert "Could not fetch server CONFIG" not in f, f
    finals = [f for f in fragments if "requests per second" in f]
    for test in ("SET:", "GET:", "INCR:", "MSET (10 keys):"):
        assert any(f.startswith(test) for f in finals), (test, finals)
    # without -r every INCR hits the same key: the counter proves all 100000 ran
    assert r.get("counter:__rand_int__") == b"100000"
    assert r.get("key:__rand_int__") is not None
