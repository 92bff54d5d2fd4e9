"""bench_util.py: what the Python benchmarks of bench/ share (imported from the script's own
folder): a free loopback port, a size argument with a unit, and a server process started and
waited for.
"""

import socket
import subprocess
import time

import redis


def free_port():
    """A loopback TCP port free at the time of the call (another process may take it after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def size_arg(text):
    """Bytes from a size such as "32m", "1g", "512k" or "4096" (units of 1024; a trailing "b"
    is allowed: "256mb")."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.lower().rstrip("b")
    return int(t[:-1]) * units[t[-1]] if t[-1] in units else int(t)


def start_server(cmd, port, timeout=5.0):
    """Starts `cmd --port PORT --bind 127.0.0.1` (stratakv-server or redis-server, output
    discarded) and waits until it answers PING. Returns (process, redis.Redis client with a
    600 s socket timeout). Raises RuntimeError if it does not answer within `timeout` s."""
    proc = subprocess.Popen(cmd + ["--port", str(port), "--bind", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port, socket_timeout=600)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r.ping()
            return proc, r
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start: %s" % cmd)
