"""TLS on tls-port (docs/tls.md): redis-cli --tls and redis-py (ssl=True) with small and 32 MiB
values, client certificates per tls-auth-clients, a plain-text client on the TLS port, files that
cannot load (the server refuses to start, with Redis's lines), CONFIG SET of the files, TLS only
(port 0), Pub/Sub over TLS. The certificates are made by the test (tls_util.py)."""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
import redis

from harness import TARGET, free_port, launch_server, server_binary, stop_servers, tmp_root
from tls_util import PASSPHRASE, make_tls_files

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")

REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
MiB = 1 << 20


@pytest.fixture(scope="module")
def certs():
    return make_tls_files(tmp_root() / "tls-files")


@pytest.fixture
def tls_server(certs):
    srv = launch_server(tls_port=free_port(), **certs.server_config())
    srv.tls_port = int(srv.config["tls-port"])
    yield srv
    stop_servers(srv)


def tls_client(srv, certs, cert=True, rogue=False, **kw):
    """A redis-py client of srv's TLS port; with the test CA's client certificate unless
    `cert` is false (none) or `rogue` (one of another CA)."""
    kw.setdefault("socket_timeout", 20)
    kw.setdefault("socket_connect_timeout", 5)
    if rogue:
        kw.update(ssl_certfile=certs.rogue_crt, ssl_keyfile=certs.rogue_key)
    elif cert:
        kw.update(ssl_certfile=certs.client_crt, ssl_keyfile=certs.client_key)
    return redis.Redis(host="127.0.0.1", port=srv.tls_port, ssl=True, ssl_ca_certs=certs.ca, **kw)


def refused(client):
    """Whether the server drops this client in the handshake (TLS 1.3: at the first read)."""
    try:
        client.ping()
        return False
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ssl.SSLError, OSError):
        return True
    finally:
        client.close()


def cli(srv, certs, *args, input=None, cert=True):
    tls = ["--tls", "--cacert", certs.ca]
    if cert:
        tls += ["--cert", certs.client_crt, "--key", certs.client_key]
    p = subprocess.run([REDIS_CLI, "-h", "127.0.0.1", "-p", str(srv.tls_port), *tls, *args],
                       input=input, capture_output=True, timeout=120)
    return p


@pytest.mark.skipif(not shutil.which("redis-cli"), reason="no redis-cli (redis-tools)")
def test_redis_cli_small_and_32mib(tls_server, certs):
    p = cli(tls_server, certs, "SET", "greeting", "hello over tls")
    assert p.stdout == b"OK\n", p.stderr
    assert cli(tls_server, certs, "GET", "greeting").stdout == b"hello over tls\n"
    # 32 MiB of random bytes (-x: the last argument from stdin), read back byte-exact (raw
    # output when stdout is not a terminal: the bytes and a newline).
    data = os.urandom(32 * MiB)
    p = cli(tls_server, certs, "-x", "SET", "big", input=data)
    assert p.stdout == b"OK\n", p.stderr
    p = cli(tls_server, certs, "GET", "big")
    assert len(p.stdout) == len(data) + 1 and p.stdout[:-1] == data
    # The plain port serves the same keys.
    assert tls_server.client().get("big") == data
    # Without a certificate (tls-auth-clients yes by default): refused.
    p = cli(tls_server, certs, "PING", cert=False)
    assert b"PONG" not in p.stdout


def test_redis_py_ssl(tls_server, certs):
    c = tls_client(tls_server, certs)
    assert c.ping()
    assert c.set("k", "v")
    assert c.get("k") == b"v"
    data = os.urandom(32 * MiB)
    assert c.set("big", data)
    assert c.get("big") == data
    assert c.strlen("big") == len(data)
    # Pipelines: many small requests in one TLS write each way, and several large values.
    pipe = c.pipeline(transaction=False)
    for i in range(1000):
        pipe.set("small:%d" % i, "x" * 100)
    for i in range(1000):
        pipe.get("small:%d" % i)
    out = pipe.execute()
    assert out[:1000] == [True] * 1000 and out[1000:] == [b"x" * 100] * 1000
    chunks = [os.urandom(8 * MiB) for _ in range(4)]
    pipe = c.pipeline(transaction=False)
    for i, chunk in enumerate(chunks):
        pipe.set("chunk:%d" % i, chunk)
    for i in range(len(chunks)):
        pipe.get("chunk:%d" % i)
    out = pipe.execute()
    assert out[4:] == chunks
    # The keys are the plain port's, too; INFO and CONFIG GET know the TLS port.
    plain = tls_server.client()
    assert plain.get("k") == b"v"
    info = c.info("server")
    if TARGET == "stratakv":
        assert info["tls_port"] == tls_server.tls_port
        assert info["tcp_port"] == tls_server.port
    conf = c.config_get("tls-*")
    assert conf["tls-port"] == str(tls_server.tls_port)
    assert conf["tls-cert-file"] == certs.server_crt
    assert conf["tls-auth-clients"] == "yes"
    assert conf["tls-prefer-server-ciphers"] == "no"
    c.close()


def test_client_certificates_per_tls_auth_clients(tls_server, certs):
    admin = tls_server.client()
    # yes (the default): a certificate of the CA is required.
    assert tls_client(tls_server, certs).ping()
    assert refused(tls_client(tls_server, certs, cert=False))
    assert refused(tls_client(tls_server, certs, rogue=True))
    # optional: none is fine, a bad one is not.
    assert admin.config_set("tls-auth-clients", "optional")
    assert tls_client(tls_server, certs, cert=False).ping()
    assert tls_client(tls_server, certs).ping()
    assert refused(tls_client(tls_server, certs, rogue=True))
    # no: not asked for (a client's certificate is not even looked at).
    assert admin.config_set("tls-auth-clients", "no")
    assert tls_client(tls_server, certs, cert=False).ping()
    assert tls_client(tls_server, certs, rogue=True).ping()
    with pytest.raises(redis.exceptions.ResponseError):
        admin.config_set("tls-auth-clients", "maybe")
    assert admin.config_set("tls-auth-clients", "yes")
    assert refused(tls_client(tls_server, certs, cert=False))
    # A client connected before the change keeps working.
    assert admin.ping()


def test_plain_text_client_on_tls_port_is_dropped(tls_server, certs):
    c = tls_client(tls_server, certs)
    assert c.set("alive", "1")
    for payload in (b"*1\r\n$4\r\nPING\r\n", b"PING\r\n", os.urandom(4096),
                    b"\x16\x03\x01\x00\x05hello"):  # a handshake record cut short
        with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as s:
            s.sendall(payload)
            got = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except (ConnectionResetError, socket.timeout):
                pass
            assert b"PONG" not in got and not got.startswith(b"+") and not got.startswith(b"-")
    # Connected and closed at once, and connected and silent until closed.
    socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=5).close()
    silent = socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=5)
    time.sleep(0.1)
    silent.close()
    # Nothing else noticed.
    assert tls_server.alive()
    assert c.get("alive") == b"1"
    assert tls_client(tls_server, certs).get("alive") == b"1"
    assert tls_server.client().get("alive") == b"1"
    c.close()


def test_pubsub_over_tls(tls_server, certs):
    sub = tls_client(tls_server, certs)
    p = sub.pubsub()
    p.subscribe("news")
    msg = p.get_message(timeout=5)
    assert msg["type"] == "subscribe"
    pub = tls_server.client()
    for i in range(200):
        assert pub.publish("news", "m%d" % i) == 1
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 200 and time.monotonic() < deadline:
        m = p.get_message(timeout=1)
        if m and m["type"] == "message":
            got.append(m["data"])
    assert got == [b"m%d" % i for i in range(200)]
    # A message published while the subscriber's loop waits for the socket.
    time.sleep(0.2)
    assert pub.publish("news", "late") == 1
    m = p.get_message(timeout=5)
    assert m is not None and m["data"] == b"late"
    p.unsubscribe("news")
    p.close()
    assert sub.ping()
    sub.close()


def peer_cn(srv, certs):
    """The CN of the certificate the server shows a new TLS client."""
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.check_hostname = False
    ctx.load_cert_chain(certs.client_crt, certs.client_key)
    with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as s:
            s.sendall(b"PING\r\n")
            assert s.recv(100) == b"+PONG\r\n"
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            return subject["commonName"]


def test_config_set_tls_files(tls_server, certs):
    admin = tls_server.client()
    assert peer_cn(tls_server, certs) == "stratakv-server"
    # A file that does not load: refused, the old context stays.
    with pytest.raises(redis.exceptions.ResponseError) as e:
        admin.config_set("tls-cert-file", "/nonexistent/server.crt")
    assert "Unable to update TLS configuration" in str(e.value)
    assert admin.config_get("tls-cert-file")["tls-cert-file"] == certs.server_crt
    assert peer_cn(tls_server, certs) == "stratakv-server"
    # A new certificate and key in one CONFIG SET: new clients get them.
    old = tls_client(tls_server, certs)
    assert old.ping()
    admin.execute_command("CONFIG", "SET", "tls-cert-file", certs.server2_crt,
                          "tls-key-file", certs.server2_key)
    assert peer_cn(tls_server, certs) == "stratakv-server-2"
    assert old.ping()  # a client connected before keeps its session
    # A key that does not match the certificate: refused, the key rolls back.
    with pytest.raises(redis.exceptions.ResponseError):
        admin.config_set("tls-key-file", certs.server_key)
    assert admin.config_get("tls-key-file")["tls-key-file"] == certs.server2_key
    assert peer_cn(tls_server, certs) == "stratakv-server-2"
    old.close()


def test_encrypted_key_with_passphrase(certs, start_server):
    srv = start_server(tls_port=free_port(),
                       **certs.server_config(tls_key_file=certs.server_key_enc,
                                             tls_key_file_pass=PASSPHRASE))
    srv.tls_port = int(srv.config["tls-port"])
    assert tls_client(srv, certs).ping()


def run_to_exit(args, timeout=10):
    """Runs the server binary with `args` until it exits; (returncode, output)."""
    p = subprocess.run([server_binary(), "--bind", "127.0.0.1", "--port", str(free_port()), *args],
                       capture_output=True, timeout=timeout, cwd=str(tmp_root()))
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


@pytest.mark.parametrize("case", ["cert", "key", "mismatch", "no-key", "no-ca", "protocols",
                                  "passphrase"])
def test_bad_tls_files_refuse_to_start(certs, case):
    cfg = {"tls-port": str(free_port()), "tls-cert-file": certs.server_crt,
           "tls-key-file": certs.server_key, "tls-ca-cert-file": certs.ca}
    if case == "cert":
        cfg["tls-cert-file"] = "/nonexistent/server.crt"
        want = "Failed to load certificate: /nonexistent/server.crt: "
    elif case == "key":
        cfg["tls-key-file"] = "/nonexistent/server.key"
        want = "Failed to load private key: /nonexistent/server.key: "
    elif case == "mismatch":
        cfg["tls-key-file"] = certs.client_key
        want = "Failed to load private key: " + certs.client_key + ": "
    elif case == "no-key":
        del cfg["tls-key-file"]
        want = "No tls-key-file configured!"
    elif case == "no-ca":
        del cfg["tls-ca-cert-file"]
        want = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified"
    elif case == "protocols":
        cfg["tls-protocols"] = "TLSv1.2 SSLv3"
        want = "Invalid tls-protocols specified"
    else:
        cfg["tls-key-file"] = certs.server_key_enc  # encrypted, and no tls-key-file-pass
        want = "Failed to load private key: " + certs.server_key_enc + ": "
    args = []
    for k, v in cfg.items():
        args += ["--" + k, v]
    if TARGET == "redis":
        args += ["--save", "", "--appendonly", "no"]
    rc, out = run_to_exit(args)
    assert rc != 0, out
    assert want in out, out
    assert "Failed to configure TLS. Check logs for more info." in out, out


def test_tls_only_with_port_zero(certs):
    tls_port = free_port()
    args = [server_binary(), "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(tls_port),
            "--tls-cert-file", certs.server_crt, "--tls-key-file", certs.server_key,
            "--tls-ca-cert-file", certs.ca]
    if TARGET == "redis":
        args += ["--save", "", "--appendonly", "no"]
    log = open(tmp_root() / "tls-only.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=str(tmp_root()))
    try:
        class Srv:
            pass
        srv = Srv()
        srv.tls_port = tls_port
        deadline = time.monotonic() + 10
        while True:
            try:
                c = tls_client(srv, certs)
                assert c.ping()
                break
            except redis.exceptions.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        info = c.info("server")
        assert info["tcp_port"] == tls_port  # Redis: the TLS port when plain TCP is off
        if TARGET == "stratakv":
            assert info["tls_port"] == tls_port
            assert c.config_get("port")["port"] == "0"
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()


def test_tls_protocols_and_versions(certs, start_server):
    srv = start_server(tls_port=free_port(), **certs.server_config(tls_protocols="TLSv1.3"))
    srv.tls_port = int(srv.config["tls-port"])

    def handshake(max_version):
        ctx = ssl.create_default_context(cafile=certs.ca)
        ctx.check_hostname = False
        ctx.load_cert_chain(certs.client_crt, certs.client_key)
        ctx.maximum_version = max_version
        with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                return s.version(), s.recv(100)

    assert handshake(ssl.TLSVersion.TLSv1_3) == ("TLSv1.3", b"+PONG\r\n")
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(ssl.TLSVersion.TLSv1_2)
    assert srv.client().config_get("tls-protocols")["tls-protocols"] == "TLSv1.3"
