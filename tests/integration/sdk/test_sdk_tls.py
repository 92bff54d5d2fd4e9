"""stratakv (Python, over the C++ SDK) on rediss:// URLs: TLS to a real server's tls-port
(docs/sdk.md "TLS"). Values of 1 B, 1 MiB and 32 MiB byte-exact, batches, the ssl_* settings
in the URL and as keyword arguments, a wrong CA, a server certificate for another host,
tls-auth-clients with and without a client certificate, AUTH over TLS, a peer that never
handshakes (the connect timeout) or never replies (the I/O timeout), a server gone (no
SIGPIPE). Certificates: tls_util.py."""

import os
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

import stratakv
from harness import free_port, launch_server, stop_servers, tmp_root
from tls_util import _signed, make_tls_files

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")

MiB = 1 << 20
PASSWORD = "tls-s3cret"


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.fixture(scope="module")
def certs():
    c = make_tls_files(tmp_root() / "sdk-tls-files")
    # A server certificate of the test CA for another host only (ssl_check_hostname).
    (c.dir / "other.cnf").write_text("subjectAltName=DNS:elsewhere.example\n"
                                     "extendedKeyUsage=serverAuth\n")
    _signed(c.dir, "other", "ca", "elsewhere", "other.cnf")
    c.other_crt, c.other_key = str(c.dir / "other.crt"), str(c.dir / "other.key")
    c.rogue_ca = str(c.dir / "rogue-ca.crt")
    return c


def start(certs, **config):
    srv = launch_server(tls_port=free_port(), **certs.server_config(**config))
    srv.tls_port = int(srv.config["tls-port"])
    return srv


@pytest.fixture(scope="module")
def server(certs):
    """TLS without client certificates (tls-auth-clients no)."""
    srv = start(certs, tls_auth_clients="no")
    yield srv
    stop_servers(srv)


def rediss(srv, certs=None, userinfo="", host="127.0.0.1", **query):
    if certs is not None:
        query.setdefault("ssl_ca_certs", certs.ca)
    q = "&".join("%s=%s" % (k, quote(str(v), safe="")) for k, v in query.items())
    return "rediss://%s%s:%d%s" % (userinfo, host, srv.tls_port, "?" + q if q else "")


def connection_error(fn):
    with pytest.raises(stratakv.Error) as e:
        fn()
    assert e.value.kind == "connection", str(e.value)
    return str(e.value)


@pytest.mark.parametrize("n", [1, MiB, 32 * MiB])
def test_round_trip(server, certs, n):
    kv = stratakv.Client(rediss(server, certs))
    assert kv.transport == "resp"
    v = pattern(n, n)
    assert kv.put("tls-%d" % n, v) is True
    assert kv.get("tls-%d" % n) == v
    target = bytearray(n + 2)
    assert kv.get_into("tls-%d" % n, target) == n
    assert bytes(target[:n]) == v and target[n:] == b"\0\0"
    # What went in through TLS is what the plain port serves.
    plain = server.client()
    assert plain.get("tls-%d" % n) == v
    plain.close()
    assert kv.get("tls-missing") is None


def test_batches(server, certs):
    kv = stratakv.Client(rediss(server, certs), max_connections=2)
    keys = ["tls-b%d" % i for i in range(200)]
    values = [pattern(1 + (i * 7919) % 70000, i) for i in range(len(keys))]
    values[5] = pattern(3 * MiB, 5)
    values[9] = [values[9][:10], values[9][10:]]  # pieces, gathered
    assert kv.batch_put(keys, values) == [True] * len(keys)
    flat = [v if isinstance(v, bytes) else b"".join(v) for v in values]
    targets = [bytearray(len(v)) for v in flat]
    assert kv.batch_get_into(keys, targets) == [len(v) for v in flat]
    assert [bytes(t) for t in targets] == flat
    assert kv.batch_exists(keys + ["tls-none"]) == [True] * len(keys) + [False]
    kv.batch_remove(keys)
    assert kv.batch_exists(keys[:3]) == [False] * 3


def test_settings_as_keyword_arguments(server, certs):
    kv = stratakv.Client(rediss(server), ssl_ca_certs=certs.ca, ssl_cert_reqs="required",
                         ssl_check_hostname=True)
    kv.put("kw", b"x")
    assert kv.get("kw") == b"x"
    with pytest.raises(ValueError):
        stratakv.Client(rediss(server), ssl_cert_reqs="sometimes")


def test_wrong_ca_is_a_clear_error(server, certs):
    msg = connection_error(lambda: stratakv.Client(rediss(server, certs, ssl_ca_certs=certs.rogue_ca)))
    assert "certificate verify failed" in msg, msg
    assert "TLS handshake with 127.0.0.1:%d failed" % server.tls_port in msg, msg
    # No CA given: the system's, which do not know the test CA either.
    msg = connection_error(lambda: stratakv.Client(rediss(server)))
    assert "certificate verify failed" in msg, msg
    # ssl_cert_reqs=none: encrypted, not verified.
    kv = stratakv.Client(rediss(server, ssl_cert_reqs="none"))
    kv.put("unverified", b"ok")
    assert kv.get("unverified") == b"ok"


def test_bad_files_are_usage_errors(server, certs, tmp_path):
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client(rediss(server, certs, ssl_ca_certs=str(tmp_path / "no-such.crt")))
    assert e.value.kind == "usage" and "ssl_ca_certs" in str(e.value), str(e.value)
    with pytest.raises(stratakv.Error) as e:
        stratakv.Client(rediss(server, certs, ssl_certfile=certs.client_crt, ssl_keyfile=certs.server_key))
    assert e.value.kind == "usage", str(e.value)


def test_hostname_check(certs):
    srv = launch_server(tls_port=free_port(), tls_cert_file=certs.other_crt,
                        tls_key_file=certs.other_key, tls_ca_cert_file=certs.ca,
                        tls_auth_clients="no")
    srv.tls_port = int(srv.config["tls-port"])
    try:
        # The default (redis-py's): the CA is checked, the name is not.
        stratakv.Client(rediss(srv, certs)).put("k", b"v")
        msg = connection_error(lambda: stratakv.Client(rediss(srv, certs, ssl_check_hostname="true")))
        assert "certificate verify failed" in msg and "mismatch" in msg, msg
    finally:
        stop_servers(srv)


def test_client_certificates(certs):
    srv = start(certs)  # tls-auth-clients yes (the default)
    try:
        kv = stratakv.Client(rediss(srv, certs, ssl_certfile=certs.client_crt,
                                    ssl_keyfile=certs.client_key))
        kv.put("mtls", pattern(MiB, 3))
        assert kv.get("mtls") == pattern(MiB, 3)
        kv2 = stratakv.Client(rediss(srv, certs), ssl_certfile=certs.client_crt,
                              ssl_keyfile=certs.client_key)
        assert kv2.get("mtls") == pattern(MiB, 3)

        # Without one the server refuses: in TLS 1.3 the client learns it at its first read.
        def without():
            c = stratakv.Client(rediss(srv, certs))
            c.get("mtls")
        msg = connection_error(without)
        assert "certificate required" in msg or "handshake" in msg, msg
        # A certificate of another CA: refused too.
        msg = connection_error(lambda: stratakv.Client(
            rediss(srv, certs, ssl_certfile=certs.rogue_crt, ssl_keyfile=certs.rogue_key)).get("x"))
        assert "TLS" in msg, msg
    finally:
        stop_servers(srv)


def test_auth_over_tls(certs):
    srv = start(certs, tls_auth_clients="no", requirepass=PASSWORD)
    try:
        kv = stratakv.Client(rediss(srv, certs, userinfo=":%s@" % PASSWORD))
        kv.put("secret", b"value")
        assert kv.get("secret") == b"value"
        kv = stratakv.Client(rediss(srv, certs), password=PASSWORD)
        assert kv.get("secret") == b"value"
        with pytest.raises(stratakv.Error) as e:
            stratakv.Client(rediss(srv, certs, userinfo=":wrong@")).get("secret")
        assert e.value.kind == "server", str(e.value)
        with pytest.raises(stratakv.Error, match="NOAUTH"):
            stratakv.Client(rediss(srv, certs)).get("secret")
    finally:
        stop_servers(srv)


def test_fast_paths_are_not_used_over_tls(server, certs):
    assert stratakv.Client(rediss(server, certs), transport="resp").transport == "resp"
    for transport in ("shm", "verbs"):
        with pytest.raises(stratakv.Error) as e:
            stratakv.Client(rediss(server, certs), transport=transport)
        assert e.value.kind == "usage", str(e.value)


def test_a_peer_that_never_handshakes_times_out():
    with socket.socket() as listener:  # accepts TCP (the backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(stratakv.Error) as e:
            stratakv.Client("rediss://127.0.0.1:%d" % port, connect_timeout_ms=300)
        assert e.value.kind == "connection" and "timed out" in str(e.value), str(e.value)
        assert time.monotonic() - t0 < 5


def test_a_server_that_never_replies_times_out(certs):
    # A TLS peer (Python's ssl) that completes the handshake, then reads and never answers:
    # io_timeout_ms bounds the wait for the reply, as on TCP.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.server_crt, certs.server_key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve():
        conn, _ = listener.accept()
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.settimeout(0.1)
            while not stop.is_set():
                try:
                    if not tls.recv(65536):
                        break
                except (socket.timeout, ssl.SSLError, OSError):
                    continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        kv = stratakv.Client("rediss://127.0.0.1:%d?ssl_ca_certs=%s" % (listener.getsockname()[1], certs.ca),
                             io_timeout_ms=300, max_connections=1)
        t0 = time.monotonic()
        msg = connection_error(lambda: kv.get("k"))
        assert "read timed out" in msg, msg
        assert time.monotonic() - t0 < 5
    finally:
        stop.set()
        t.join(5)
        listener.close()


def test_server_gone_no_sigpipe(certs):
    # SIGPIPE's default action (Python itself ignores it): a write to a closed TLS connection
    # must come back as an error, not kill the process.
    srv = start(certs, tls_auth_clients="no")
    script = textwrap.dedent("""
        import os, signal, sys, time
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        import stratakv
        kv = stratakv.Client(sys.argv[1], max_connections=1)
        kv.put("k", b"v")
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(5):
            try:
                kv.put("big", os.urandom(8 << 20))
            except stratakv.Error as e:
                print("error", e.kind, e, flush=True)
                break
            time.sleep(0.1)
    """)
    p = subprocess.Popen([sys.executable, "-c", script, rediss(srv, certs)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        assert p.stdout.readline() == b"ready\n"
        srv.proc.kill()
        srv.proc.wait()
        out, err = p.communicate(b"go\n", timeout=60)
        assert p.returncode == 0, (p.returncode, out, err)
        assert out.startswith(b"error connection"), out
    finally:
        if p.poll() is None:
            p.kill()
        srv.stop()


def test_url_errors(server, certs):
    for bad in ("rediss://127.0.0.1:1?ssl_bogus=1", "redis://127.0.0.1:1?ssl_ca_certs=x",
                "rediss://127.0.0.1:1?ssl_cert_reqs=maybe",
                "rediss+cluster://127.0.0.1:1?ssl_bogus=1"):
        with pytest.raises(stratakv.Error) as e:
            stratakv.Client(bad)
        assert e.value.kind == "usage", (bad, str(e.value))
