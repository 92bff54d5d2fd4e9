"""Server harness for the stratakv integration tests (used by conftest.py and the tests).

A real server process is started and driven by real clients (redis-py 4.3.4,
raw sockets, redis-cli, redis-benchmark).

Environment:
  STRATAKV_TARGET      "stratakv" (default) or "redis" (validates the suite
                       against the real redis-server, Redis 7.0).
  STRATAKV_SERVER      path of the stratakv binary; default
                       <repo>/build/release/bin/stratakv-server.
  STRATAKV_EXTRA_ARGS  extra command-line arguments appended for stratakv
                       (shell syntax), e.g. a config file.
  REDIS_SERVER         path of redis-server for the "redis" target
                       (default: redis-server on PATH).

Server(_nofile=(soft, hard)) (also launch_server/launch_redis/start_server) starts the process
with that RLIMIT_NOFILE.

Both servers are started as
  <server> --port P --bind 127.0.0.1 [--key value ...]
with Redis config names (keyword arguments: "_" becomes "-", "__" becomes ".", so
memory__capacity="64mb" is --memory.capacity 64mb). For redis-server we also pass --save "" and
--appendonly no (no persistence) and --databases 1 (stratakv has a single
database, so SELECT 1 must fail on both).

A test that compares stratakv with Redis in the same run starts one of each:
launch_server() for the target, launch_redis() for redis-server whatever the target
(redis_binary() is None when none is installed: skip such a test then).

The fixtures built on this live in conftest.py.
"""

import os
import random
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import redis  # noqa: E402

from resp_util import RawConn, Simple  # noqa: E402

REPO_ROOT = HERE.parents[1]
TARGET = os.environ.get("STRATAKV_TARGET", "stratakv").strip().lower() or "stratakv"
if TARGET not in ("stratakv", "redis"):
    raise RuntimeError("STRATAKV_TARGET must be 'stratakv' or 'redis', not %r" % TARGET)

DEFAULT_STRATAKV = REPO_ROOT / "build" / "release" / "bin" / "stratakv-server"
STARTUP_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
LOG_TAIL_LINES = 200

_TMP_ROOT = None  # created on the first server start (server logs live here)


def tmp_root():
    global _TMP_ROOT
    if _TMP_ROOT is None:
        _TMP_ROOT = Path(tempfile.mkdtemp(prefix="stratakv-it-"))
    return _TMP_ROOT

# Servers currently running, and servers stopped during the current test: their
# logs are attached to the report of a failing test.
_RUNNING = []
_STOPPED_IN_TEST = []


def redis_binary():
    """redis-server (REDIS_SERVER, else on PATH, else /usr/bin); None when there is none."""
    for path in (os.environ.get("REDIS_SERVER"), shutil.which("redis-server"),
                 "/usr/bin/redis-server"):
        if path and os.access(path, os.X_OK):
            return path
    return None


def server_binary(kind=None):
    """The binary of `kind` ("stratakv" or "redis"; default: the target)."""
    if (kind or TARGET) == "redis":
        return redis_binary() or "/usr/bin/redis-server"
    return os.environ.get("STRATAKV_SERVER") or str(DEFAULT_STRATAKV)


def check_binary(kind=None):
    binary = server_binary(kind)
    if not os.access(binary, os.X_OK):
        pytest.exit(
            "%s server binary not found or not executable: %s "
            "(build it, or set STRATAKV_SERVER, or STRATAKV_TARGET=redis)"
            % (kind or TARGET, binary),
            returncode=3,
        )


def free_port(highest=65535):
    """A loopback TCP port free now, at most `highest` (the kernel's ephemeral range runs to
    60999; a cluster-enabled redis-server refuses ports above 55535, its bus being port+10000)."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port <= highest:
            return port
    raise RuntimeError("no free loopback port at or below %d" % highest)


def config_name(key):
    """A keyword argument's config name: "__" is a dot, "_" a dash
    (memory__capacity -> memory.capacity, maxmemory_policy -> maxmemory-policy)."""
    return key.replace("__", ".").replace("_", "-")


def _config_args(config):
    args = []
    for key, value in config.items():
        key = config_name(key)
        if value is None:
            continue
        args += ["--" + key, str(value)]
    return args


class Server:
    """One server process (stratakv or redis-server)."""

    _counter = 0

    def __init__(self, _kind=None, _nofile=None, **config):
        """`_kind`: "stratakv" or "redis" (default: the target). `_nofile`: (soft, hard), the
        server process's RLIMIT_NOFILE (default: inherited)."""
        self.kind = _kind or TARGET
        self.nofile = _nofile
        check_binary(self.kind)
        Server._counter += 1
        self.name = "%s-%d" % (self.kind, Server._counter)
        self.config = dict((config_name(k), v) for k, v in config.items())
        self.password = self.config.get("requirepass") or None
        self.unixsocket = self.config.get("unixsocket")
        self.host = "127.0.0.1"
        self.port = None
        self.proc = None
        self.workdir = tmp_root() / self.name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "server.log"
        self._log = None

    # ---- lifecycle -----------------------------------------------------
    def command_line(self, port):
        binary = server_binary(self.kind)
        args = [binary, "--port", str(port), "--bind", "127.0.0.1"]
        if self.kind == "redis":
            args += ["--save", "", "--appendonly", "no", "--databases", "1"]
        if self.kind == "stratakv" and "memory.capacity" not in self.config:
            # An explicit small region per test server: the default is 80% of the machine.
            args += ["--memory.capacity", "1gb"]
        args += _config_args(self.config)
        if self.kind == "stratakv" and os.environ.get("STRATAKV_EXTRA_ARGS"):
            args += shlex.split(os.environ["STRATAKV_EXTRA_ARGS"])
        return args

    def start(self):
        last_error = None
        for _attempt in range(3):
            # A fixed `port` (a cluster's nodes are named by address in its topology), else a
            # free one, another on each attempt.
            port = int(self.config["port"]) if "port" in self.config else free_port(
                55535 if self.kind == "redis" and self.config.get("cluster-enabled") == "yes"
                else 65535)
            cmd = self.command_line(port)
            self._log = open(self.log_path, "ab")
            self._log.write(("\n==== start: %s\n" % " ".join(shlex.quote(a) for a in cmd)).encode())
            self._log.flush()
            nofile = self.nofile
            self.proc = subprocess.Popen(
                cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=str(self.workdir),
                preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile))
                if nofile else None,
            )
            self.port = port
            try:
                self._wait_ready()
                _RUNNING.append(self)
                return self
            except Exception as e:  # port race or startup failure: retry on another port
                last_error = e
                self._kill()
        raise RuntimeError("server failed to start: %s\n%s" % (last_error, self.log_tail()))

    def _wait_ready(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with code %s during startup" % self.proc.returncode)
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0) as s:
                    s.settimeout(1.0)
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    data = s.recv(100)
                    if data.startswith(b"+PONG") or data.startswith(b"-NOAUTH"):
                        # a server that failed to bind exits at once; make sure the one
                        # answering is ours and not another process on a recycled port
                        time.sleep(0.05)
                        if self.proc.poll() is not None:
                            raise RuntimeError("server exited with code %s right after startup"
                                               % self.proc.returncode)
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("server did not answer PING within %.0fs" % STARTUP_TIMEOUT)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pause(self, timeout=5.0):
        """SIGSTOP, then waits until every thread of the process is stopped (state T in
        /proc/PID/task/*/stat). kill() only starts a group stop: a thread running meanwhile
        could still serve a request sent right after it."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        task_dir = "/proc/%d/task" % self.proc.pid
        while True:
            states = []
            for tid in os.listdir(task_dir):
                try:
                    with open("%s/%s/stat" % (task_dir, tid)) as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except FileNotFoundError:  # a thread that just ended
                    pass
            if states and all(s in ("T", "t") for s in states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("%s did not stop within %.0fs of SIGSTOP: %s" % (self, timeout, states))
            time.sleep(0.001)

    def resume(self):
        """SIGCONT: the paused process goes on."""
        self.proc.send_signal(signal.SIGCONT)

    def _kill(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT. Returns a problem description or None."""
        problem = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(STOP_TIMEOUT)
                if rc != 0:
                    problem = "exited with code %s after SIGTERM (expected a clean exit 0)" % rc
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
                problem = "did not exit within %.0fs of SIGTERM; killed with SIGKILL" % STOP_TIMEOUT
        if self._log is not None:
            self._log.close()
            self._log = None
        return problem

    def stop(self):
        """Stop the server; returns a description of an unclean shutdown, or None."""
        was_running = self.alive()
        problem = self._kill()
        if self in _RUNNING:
            _RUNNING.remove(self)
            _STOPPED_IN_TEST.append(self)
        return problem if was_running else None

    def start_again(self):
        """After the process exited (killed, or by itself): starts it again with the same
        config (the same SSD path, port and so on); returns a redis-py client."""
        if self in _RUNNING:
            _RUNNING.remove(self)
        if self._log is not None:
            self._log.close()
            self._log = None
        self.start()
        return self.client()

    def ensure_running(self):
        if not self.alive():
            self.start_again()

    def log_tail(self, lines=LOG_TAIL_LINES):
        try:
            text = self.log_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        tail = text.splitlines()[-lines:]
        return "log file: %s\n%s" % (self.log_path, "\n".join(tail))

    # ---- clients -------------------------------------------------------
    def client(self, **kw):
        kw.setdefault("socket_timeout", 20)
        kw.setdefault("socket_connect_timeout", 5)
        if self.password and "password" not in kw:
            kw["password"] = self.password
        return redis.Redis(host=self.host, port=self.port, **kw)

    def raw(self, timeout=10.0, auth=True):
        c = RawConn(self.host, self.port, timeout=timeout)
        if auth and self.password:
            reply = c.call("AUTH", self.password)
            assert reply == Simple("OK"), reply
        return c

    def __repr__(self):
        return "<Server %s port=%s>" % (self.name, self.port)


def launch_server(**config):
    return Server(**config).start()


def launch_redis(**config):
    """A redis-server (Redis 7.0) beside the target, for tests that compare the two."""
    return Server(_kind="redis", **config).start()


def stop_servers(*servers):
    """Stop servers; fail the current test if one died earlier or did not shut down cleanly."""
    problems = []
    for srv in servers:
        if srv.proc is not None and srv.proc.poll() is not None and srv in _RUNNING:
            problems.append("server %s died (rc=%s)" % (srv.name, srv.proc.returncode))
        problem = srv.stop()
        if problem:
            problems.append("server %s %s" % (srv.name, problem))
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


def wait_until(what, fn, timeout=60.0):
    """Polls `fn` every 20 ms until it returns something true, and returns that; fails the test
    naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


def tier(r, key):
    """Where `key`'s value lives (stratakv's TIER command): "memory", "ssd", or None."""
    t = r.execute_command("TIER", key)
    return t.decode() if t is not None else None


def cluster_sh_base_port(nodes):
    """A base port for scripts/cluster.sh: the nodes' ports base..base+nodes-1 and etcd's
    base+1000/base+1001 all look free, below the ephemeral range (32768 and up) that outgoing
    connections take ports from. Fails the test when none is found."""
    for _ in range(100):
        base = random.randrange(20000, 31000)
        ports = [base + i for i in range(nodes)] + [base + 1000, base + 1001]
        free = True
        for p in ports:
            with socket.socket() as s:
                free = free and s.connect_ex(("127.0.0.1", p)) != 0
        if free:
            return base
    raise AssertionError("no free port range for cluster.sh")
