"""A real etcd (/usr/bin/etcd, etcd 3.4) for integration tests: Python 3 standard library only.

    from etcd_util import Etcd, etcd_binary

    with Etcd() as etcd:                  # free loopback ports, a temporary data directory
        etcd.put("/stratakv/c/topology", text)
        value, mod_revision = etcd.get("/stratakv/c/topology")
        etcd.kill(); etcd.start()         # a crash and a restart: same ports, same data

As a pytest fixture (skip where etcd is not installed):

    @pytest.fixture
    def etcd():
        if etcd_binary() is None:
            pytest.skip("etcd is not installed")
        with Etcd() as e:
            yield e

start() waits until /health answers; kill() is SIGKILL (a crash), stop() SIGTERM; close()
kills and removes the data directory (also done at interpreter exit for any left running).
Short raft timings (heartbeat 50 ms, election 500 ms) make start-up take well under a second
and let 1 s leases be granted.

The kv helpers speak etcd's v3 JSON gateway (keys and values base64, 64-bit numbers as JSON
strings): get, get_prefix, put, cas (a txn comparing mod_revision; 0 = must not exist), delete,
lease_grant, lease_revoke, and call() for anything else. Keys and values are str or bytes;
values come back as bytes.

Self-test: python3 etcd_util.py (exits 77 when etcd is not installed).
"""

import atexit
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ETCD_DEFAULT = "/usr/bin/etcd"
_LIVE = set()  # started instances, killed at exit


def etcd_binary():
    """The etcd executable: $ETCD, else etcd on PATH, else /usr/bin/etcd; None if none."""
    for path in (os.environ.get("ETCD"), shutil.which("etcd"), ETCD_DEFAULT):
        if path and os.access(path, os.X_OK):
            return path
    return None


def free_port():
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def _prefix_end(prefix):
    end = bytearray(prefix.encode() if isinstance(prefix, str) else prefix)
    while end and end[-1] == 0xFF:
        end.pop()
    if not end:
        return b"\0"
    end[-1] += 1
    return bytes(end)


class EtcdError(Exception):
    """etcd answered a gateway call with an error (code: the gRPC status code)."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code


class Etcd:
    """One single-member etcd cluster on 127.0.0.1. See the module docstring."""

    def __init__(self, binary=None, extra_args=(), start_timeout=20.0):
        self.binary = binary or etcd_binary()
        if self.binary is None:
            raise RuntimeError("etcd is not installed (set ETCD or install etcd-server)")
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.dir = tempfile.mkdtemp(prefix="stratakv-etcd-")
        self.client_port = free_port()
        self.peer_port = free_port()
        while self.peer_port == self.client_port:
            self.peer_port = free_port()
        self.proc = None

    @property
    def endpoint(self):
        """The client URL, "http://127.0.0.1:<port>" (what --cluster.etcd-endpoints takes)."""
        return "http://127.0.0.1:%d" % self.client_port

    @property
    def log_path(self):
        return os.path.join(self.dir, "etcd.log")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        """Starts etcd (again) and waits until /health says true. Returns self."""
        if self.running():
            return self
        client = self.endpoint
        peer = "http://127.0.0.1:%d" % self.peer_port
        args = [self.binary, "--name=n0", "--data-dir=" + os.path.join(self.dir, "data"),
                "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
                "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
                "--initial-cluster=n0=" + peer, "--heartbeat-interval=50",
                "--election-timeout=500", "--logger=zap", "--log-outputs=stderr"] + self.extra_args
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        _LIVE.add(self)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("etcd exited with %s:\n%s" % (self.proc.returncode, self.log_tail()))
            if self.healthy():
                return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError("etcd did not become healthy in %.0f s:\n%s" % (self.start_timeout, self.log_tail()))

    def healthy(self):
        try:
            with urllib.request.urlopen(self.endpoint + "/health", timeout=1) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False

    def kill(self):
        """SIGKILL (a crash) and reap. Keys, revisions and leases survive a start()."""
        self._end(signal.SIGKILL)

    def stop(self):
        """SIGTERM (a clean stop) and reap."""
        self._end(signal.SIGTERM)

    def _end(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _LIVE.discard(self)

    def close(self):
        """Kills etcd and removes its directory."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def log_tail(self, size=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-size:].decode(errors="replace")
        except OSError:
            return ""

    # ---- the v3 JSON gateway --------------------------------------------------------------

    def call(self, path, body, timeout=5.0):
        """POSTs `body` (a dict) to `path` ("/v3/kv/range") and returns the reply as a dict.
        Raises EtcdError for an error reply."""
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                reply = json.load(r)
        except urllib.error.HTTPError as e:
            reply = json.loads(e.read() or b"{}")
            raise EtcdError(reply.get("message") or reply.get("error") or str(e), reply.get("code", 0))
        if isinstance(reply.get("error"), (str, dict)) and reply["error"]:
            raise EtcdError(str(reply["error"]), reply.get("code", 0))
        return reply

    def get(self, key):
        """(value bytes, mod_revision) of `key`, or None when absent."""
        kvs = self.call("/v3/kv/range", {"key": _b64(key)}).get("kvs", [])
        if not kvs:
            return None
        return base64.b64decode(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])

    def get_prefix(self, prefix):
        """{key str: value bytes} of every key starting with `prefix`."""
        reply = self.call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))})
        return {base64.b64decode(kv["key"]).decode(errors="replace"): base64.b64decode(kv.get("value", ""))
                for kv in reply.get("kvs", [])}

    def put(self, key, value, lease=0):
        """Sets `key`; returns the new store revision."""
        body = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int(self.call("/v3/kv/put", body)["header"]["revision"])

    def cas(self, key, mod_revision, value):
        """Sets `key` only if its mod_revision is `mod_revision` (0: only if absent). True if set."""
        body = {"compare": [{"key": _b64(key), "target": "MOD", "result": "EQUAL",
                             "mod_revision": str(mod_revision)}],
                "success": [{"request_put": {"key": _b64(key), "value": _b64(value)}}]}
        return bool(self.call("/v3/kv/txn", body).get("succeeded", False))

    def delete(self, key):
        """Deletes `key`; True when it existed."""
        return int(self.call("/v3/kv/deleterange", {"key": _b64(key)}).get("deleted", 0)) > 0

    def lease_grant(self, ttl):
        return int(self.call("/v3/lease/grant", {"TTL": str(ttl)})["ID"])

    def lease_revoke(self, lease):
        self.call("/v3/lease/revoke", {"ID": str(lease)})


@atexit.register
def _kill_left_running():
    for e in list(_LIVE):
        e.kill()


def _self_test():
    if etcd_binary() is None:
        print("etcd is not installed: skipped")
        return 77
    with Etcd() as etcd:
        assert etcd.get("/t/a") is None
        rev = etcd.put("/t/a", "one")
        assert etcd.get("/t/a") == (b"one", rev)
        assert not etcd.cas("/t/a", rev + 1, "wrong")
        assert etcd.cas("/t/a", rev, b"\x00two")
        assert etcd.cas("/t/new", 0, "created") and not etcd.cas("/t/new", 0, "again")
        assert etcd.get_prefix("/t/") == {"/t/a": b"\x00two", "/t/new": b"created"}
        lease = etcd.lease_grant(5)
        etcd.put("/t/leased", "x", lease=lease)
        etcd.lease_revoke(lease)
        assert etcd.get("/t/leased") is None
        assert etcd.delete("/t/a") and not etcd.delete("/t/a")
        try:
            etcd.put("/t/x", "x", lease=12345)
            raise AssertionError("a put under an unknown lease succeeded")
        except EtcdError as e:
            assert e.code == 5, e.code
        etcd.kill()
        assert not etcd.healthy()
        etcd.start()  # same data after a restart
        assert etcd.get("/t/new")[0] == b"created"
        data_dir = etcd.dir
    assert not os.path.exists(data_dir)
    print("etcd_util self-test passed")
    return 0


if __name__ == "__main__":
    sys.exit(_self_test())
