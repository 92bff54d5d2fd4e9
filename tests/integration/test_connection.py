"""Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT *."""

import pytest
import redis

from harness import TARGET, launch_server, server_binary, stop_servers
from resp_util import OK, Err, Simple, RawConn

PASSWORD = "s3cret-pw"

HELLO_KEYS = ["server", "version", "proto", "id", "mode", "role", "modules"]

ERR_NOAUTH = Err("NOAUTH Authentication required.")
ERR_WRONGPASS = Err("WRONGPASS invalid username-password pair or user is disabled.")
ERR_AUTH_NOPASS = Err(
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
ERR_HELLO_NOAUTH = Err(
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
    "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
    "the RESP protocol version at the same time"
)
ERR_BAD_NAME = Err("ERR Client names cannot contain spaces, newlines or special characters.")


@pytest.fixture(scope="module")
def auth_server():
    srv = launch_server(requirepass=PASSWORD)
    yield srv
    stop_servers(srv)


def parse_client_line(line):
    """Parse one CLIENT LIST/INFO line into a dict of field -> value."""
    fields = {}
    for part in line.strip().split(" "):
        k, _, v = part.partition("=")
        fields[k] = v
    return fields


def client_list(conn):
    reply = conn.call("CLIENT", "LIST")
    assert isinstance(reply, bytes), reply
    text = reply.decode()
    assert text.endswith("\n")
    return [parse_client_line(l) for l in text.split("\n") if l]


# ---------------------------------------------------------------- PING / ECHO

def test_ping_without_argument(r, raw):
    assert r.ping() is True
    c = raw()
    assert c.call_raw("PING") == b"+PONG\r\n"
    assert c.call_raw("ping") == b"+PONG\r\n"


def test_ping_with_argument_is_a_bulk_echo(raw):
    c = raw()
    assert c.call_raw("PING", "hello world") == b"$11\r\nhello world\r\n"
    assert c.call_raw("PING", "") == b"$0\r\n\r\n"
    assert c.call("PING", "a", "b") == Err("ERR wrong number of arguments for 'ping' command")


def test_echo_binary_safe(r, raw):
    payload = bytes(range(256)) + b"\r\n\x00end"
    assert r.echo(payload) == payload
    c = raw()
    assert c.call_raw("ECHO", "hi") == b"$2\r\nhi\r\n"
    assert c.call("ECHO") == Err("ERR wrong number of arguments for 'echo' command")
    assert c.call("ECHO", "a", "b") == Err("ERR wrong number of arguments for 'echo' command")


def test_commands_are_case_insensitive(raw):
    c = raw()
    assert c.call("SeT", "ci-key", "v") == OK
    assert c.call("gEt", "ci-key") == b"v"
    assert c.call("DEL", "ci-key") == 1


# ---------------------------------------------------------------- HELLO

def _check_hello_fields(d, proto, client_id):
    assert set(d.keys()) == {k.encode() for k in HELLO_KEYS}, d
    assert isinstance(d[b"server"], bytes) and d[b"server"]
    assert isinstance(d[b"version"], bytes) and d[b"version"]
    assert d[b"proto"] == proto
    assert d[b"id"] == client_id
    assert d[b"mode"] == b"standalone"
    assert d[b"role"] == b"master"
    assert d[b"modules"] == []


def test_hello2_reply_is_a_flat_array_of_pairs(raw):
    c = raw()
    my_id = c.call("CLIENT", "ID")
    c.send_cmd("HELLO", "2")
    reply, rawbytes = c.read_reply_with_raw()
    assert rawbytes.startswith(b"*14\r\n")
    assert isinstance(reply, list) and len(reply) == 14
    keys = [reply[i] for i in range(0, 14, 2)]
    assert keys == [k.encode() for k in HELLO_KEYS]
    d = dict(zip(reply[0::2], reply[1::2]))
    _check_hello_fields(d, 2, my_id)
    # still RESP2 afterwards
    assert c.call_raw("GET", "hello-missing") == b"$-1\r\n"


def test_hello_without_arguments_reports_current_protocol(raw):
    c = raw()
    reply = c.call("HELLO")
    assert isinstance(reply, list) and len(reply) == 14
    d = dict(zip(reply[0::2], reply[1::2]))
    assert d[b"proto"] == 2


def test_hello3_reply_is_a_map_and_switches_protocol(raw):
    c = raw()
    my_id = c.call("CLIENT", "ID")
    c.send_cmd("HELLO", "3")
    reply, rawbytes = c.read_reply_with_raw()
    assert rawbytes.startswith(b"%7\r\n"), rawbytes
    assert isinstance(reply, dict)
    assert list(reply.keys()) == [k.encode() for k in HELLO_KEYS]
    _check_hello_fields(reply, 3, my_id)
    # RESP3 null for a missing key
    assert c.call_raw("GET", "hello-missing") == b"_\r\n"
    # HELLO without a version in RESP3 is still a map with proto 3
    again = c.call("HELLO")
    assert isinstance(again, dict) and again[b"proto"] == 3
    # and back to RESP2
    back = c.call("HELLO", "2")
    assert isinstance(back, list) and dict(zip(back[0::2], back[1::2]))[b"proto"] == 2
    assert c.call_raw("GET", "hello-missing") == b"$-1\r\n"


def test_hello_errors(raw):
    c = raw()
    assert c.call("HELLO", "4") == Err("NOPROTO unsupported protocol version")
    assert c.call("HELLO", "1") == Err("NOPROTO unsupported protocol version")
    assert c.call("HELLO", "abc") == Err("ERR Protocol version is not an integer or out of range")
    assert c.call("HELLO", "3", "FOO") == Err("ERR Syntax error in HELLO option 'FOO'")
    assert c.call("HELLO", "3", "AUTH", "default") == Err("ERR Syntax error in HELLO option 'AUTH'")
    assert c.call("HELLO", "3", "SETNAME") == Err("ERR Syntax error in HELLO option 'SETNAME'")
    # a failed HELLO does not switch the protocol
    assert c.call_raw("GET", "hello-missing") == b"$-1\r\n"


def test_hello_setname(raw):
    c = raw()
    reply = c.call("HELLO", "3", "SETNAME", "hello-client")
    assert isinstance(reply, dict) and reply[b"proto"] == 3
    assert c.call("CLIENT", "GETNAME") == b"hello-client"
    assert c.call("HELLO", "2", "SETNAME", "bad name") == ERR_BAD_NAME
    assert c.call("CLIENT", "GETNAME") == b"hello-client"


# ---------------------------------------------------------------- AUTH

def test_auth_without_password_configured(raw):
    c = raw()
    assert c.call("AUTH", "whatever") == ERR_AUTH_NOPASS
    # the default user has "nopass": AUTH default <anything> succeeds
    assert c.call("AUTH", "default", "whatever") == OK
    assert c.call("AUTH", "someone-else", "whatever") == ERR_WRONGPASS
    assert c.call("AUTH") == Err("ERR wrong number of arguments for 'auth' command")
    assert c.call("AUTH", "a", "b", "c") == Err("ERR syntax error")


def test_noauth_before_authentication(auth_server):
    c = auth_server.raw(auth=False)
    try:
        for cmd in (("PING",), ("GET", "k"), ("SET", "k", "v"), ("SELECT", "0"),
                    ("ECHO", "x"), ("CLIENT", "ID"), ("DBSIZE",), ("INFO",)):
            assert c.call(*cmd) == ERR_NOAUTH, cmd
        assert c.call("HELLO", "3") == ERR_HELLO_NOAUTH
        assert c.call("HELLO", "2") == ERR_HELLO_NOAUTH
        # still usable: the connection is not closed by NOAUTH
        assert c.call("AUTH", PASSWORD) == OK
        assert c.call("PING") == Simple("PONG")
    finally:
        c.close()


def test_auth_wrong_password(auth_server):
    c = auth_server.raw(auth=False)
    try:
        assert c.call("AUTH", "wrong") == ERR_WRONGPASS
        assert c.call("AUTH", "default", "wrong") == ERR_WRONGPASS
        assert c.call("AUTH", "nosuchuser", PASSWORD) == ERR_WRONGPASS
        assert c.call("GET", "k") == ERR_NOAUTH
    finally:
        c.close()


def test_auth_password_and_default_user_forms(auth_server):
    c1 = auth_server.raw(auth=False)
    c2 = auth_server.raw(auth=False)
    try:
        assert c1.call("AUTH", PASSWORD) == OK
        assert c1.call("SET", "auth-k", "v1") == OK
        assert c2.call("AUTH", "default", PASSWORD) == OK
        assert c2.call("GET", "auth-k") == b"v1"
        # a later wrong AUTH does not log the connection out
        assert c2.call("AUTH", "wrong") == ERR_WRONGPASS
        assert c2.call("GET", "auth-k") == b"v1"
        assert c1.call("DEL", "auth-k") == 1
    finally:
        c1.close()
        c2.close()


def test_hello_with_auth_and_setname(auth_server):
    c = auth_server.raw(auth=False)
    try:
        assert c.call("HELLO", "3", "AUTH", "default", "wrong") == ERR_WRONGPASS
        assert c.call("PING") == ERR_NOAUTH
        reply = c.call("HELLO", "3", "AUTH", "default", PASSWORD, "SETNAME", "authed")
        assert isinstance(reply, dict)
        assert reply[b"proto"] == 3
        assert c.call("CLIENT", "GETNAME") == b"authed"
        assert c.call_raw("GET", "nokey") == b"_\r\n"
    finally:
        c.close()
    c = auth_server.raw(auth=False)
    try:
        reply = c.call("HELLO", "2", "AUTH", "default", PASSWORD)
        assert isinstance(reply, list) and dict(zip(reply[0::2], reply[1::2]))[b"proto"] == 2
        assert c.call("PING") == Simple("PONG")
    finally:
        c.close()


def test_redis_py_with_password(auth_server):
    client = auth_server.client()
    try:
        assert client.set("py-auth", "1") is True
        assert client.get("py-auth") == b"1"
        client.delete("py-auth")
    finally:
        client.close()
    bad = auth_server.client(password="nope")
    with pytest.raises(redis.ResponseError, match="^WRONGPASS invalid username-password pair"):
        bad.ping()
    bad.close()
    none = auth_server.client(password=None)
    with pytest.raises(redis.AuthenticationError, match="^Authentication required.$"):
        none.get("x")
    none.close()


def test_reset_drops_authentication(auth_server):
    c = auth_server.raw(auth=False)
    try:
        assert c.call("AUTH", PASSWORD) == OK
        assert c.call("RESET") == Simple("RESET")
        assert c.call("GET", "k") == ERR_NOAUTH
    finally:
        c.close()


# ---------------------------------------------------------------- SELECT / QUIT / RESET

def test_select(raw):
    c = raw()
    assert c.call("SELECT", "0") == OK
    assert c.call("SELECT", "1") == Err("ERR DB index is out of range")
    assert c.call("SELECT", "-1") == Err("ERR DB index is out of range")
    assert c.call("SELECT", "abc") == Err("ERR value is not an integer or out of range")
    assert c.call("SELECT") == Err("ERR wrong number of arguments for 'select' command")


def test_quit_replies_ok_then_closes(raw):
    c = raw()
    c.send_cmd("QUIT")
    data, closed = c.read_until_closed(timeout=5)
    assert data == b"+OK\r\n"
    assert closed


def test_quit_in_pipeline_drops_later_commands(r, raw):
    c = raw()
    c.send(b"*3\r\n$3\r\nSET\r\n$2\r\nq1\r\n$1\r\n1\r\n*1\r\n$4\r\nQUIT\r\n"
           b"*3\r\n$3\r\nSET\r\n$2\r\nq2\r\n$1\r\n2\r\n")
    data, closed = c.read_until_closed(timeout=5)
    assert data == b"+OK\r\n+OK\r\n"
    assert closed
    assert r.get("q1") == b"1"
    assert r.exists("q2") == 0


def test_reset_restores_connection_state(raw):
    c = raw()
    c.hello3()
    assert c.call("CLIENT", "SETNAME", "before-reset") == OK
    my_id = c.call("CLIENT", "ID")
    assert c.call_raw("RESET") == b"+RESET\r\n"
    assert c.call("CLIENT", "GETNAME") is None
    assert c.call_raw("GET", "reset-missing") == b"$-1\r\n"  # back to RESP2
    assert c.call("CLIENT", "ID") == my_id  # same connection


# ---------------------------------------------------------------- CLIENT

def test_client_id_unique_and_increasing(raw):
    a, b = raw(), raw()
    ida = a.call("CLIENT", "ID")
    idb = b.call("CLIENT", "ID")
    assert isinstance(ida, int) and isinstance(idb, int)
    assert ida > 0 and idb > ida
    assert a.call("CLIENT", "ID") == ida
    assert a.call("CLIENT", "ID", "x") == Err("ERR wrong number of arguments for 'client|id' command")


def test_client_setname_getname(raw):
    c = raw()
    assert c.call_raw("CLIENT", "GETNAME") == b"$-1\r\n"
    assert c.call("CLIENT", "SETNAME", "worker-1") == OK
    assert c.call("CLIENT", "GETNAME") == b"worker-1"
    assert c.call("CLIENT", "SETNAME", "has space") == ERR_BAD_NAME
    assert c.call("CLIENT", "SETNAME", "new\nline") == ERR_BAD_NAME
    assert c.call("CLIENT", "GETNAME") == b"worker-1"
    assert c.call("CLIENT", "SETNAME", "") == OK  # empty name clears it
    assert c.call("CLIENT", "GETNAME") is None
    assert c.call("CLIENT", "NOSUCHSUB") == Err("ERR unknown subcommand 'NOSUCHSUB'. Try CLIENT HELP.")


def test_client_list_shows_all_connections(raw):
    a, b = raw(), raw()
    assert a.call("CLIENT", "SETNAME", "conn-a") == OK
    assert b.call("CLIENT", "SETNAME", "conn-b") == OK
    ida, idb = a.call("CLIENT", "ID"), b.call("CLIENT", "ID")
    assert b.call("GET", "some-key") is None
    entries = client_list(a)
    by_id = {int(e["id"]): e for e in entries}
    assert ida in by_id and idb in by_id
    required = ["id", "addr", "laddr", "name", "age", "idle", "flags", "db", "cmd", "user", "resp"]
    for e in (by_id[ida], by_id[idb]):
        for f in required:
            assert f in e, (f, e)
        assert e["db"] == "0"
        assert e["resp"] == "2"
    assert by_id[ida]["name"] == "conn-a"
    assert by_id[idb]["name"] == "conn-b"
    host, port = b.sock.getsockname()
    assert by_id[idb]["addr"] == "%s:%d" % (host, port)
    shost, sport = b.sock.getpeername()
    assert by_id[idb]["laddr"] == "%s:%d" % (shost, sport)
    assert by_id[idb]["cmd"] == "get"
    assert by_id[ida]["cmd"] == "client|list"
    # filter by id
    only = a.call("CLIENT", "LIST", "ID", str(idb)).decode()
    lines = [l for l in only.split("\n") if l]
    assert len(lines) == 1 and parse_client_line(lines[0])["id"] == str(idb)
    # ids that are integers but no client's match nothing, as in Redis; only a non-integer errs
    assert a.call("CLIENT", "LIST", "ID", "0").decode() == ""
    assert a.call("CLIENT", "LIST", "ID", "-5", "999999999").decode() == ""
    both = a.call("CLIENT", "LIST", "ID", "0", str(idb)).decode()
    assert [parse_client_line(l)["id"] for l in both.split("\n") if l] == [str(idb)]
    assert a.call("CLIENT", "LIST", "ID", str(idb), "x") == Err("ERR Invalid client ID")
    # redis-py parses it too
    b.close()


def test_client_list_via_redis_py(r):
    r.client_setname("pyclient")
    me = [c for c in r.client_list() if c.get("name") == "pyclient"]
    assert len(me) == 1
    assert int(me[0]["id"]) == r.client_id()


def test_client_info(raw):
    c = raw()
    assert c.call("CLIENT", "SETNAME", "info-me") == OK
    info = c.call("CLIENT", "INFO")
    assert isinstance(info, bytes)
    text = info.decode()
    assert text.endswith("\n") and text.count("\n") == 1
    f = parse_client_line(text)
    assert int(f["id"]) == c.call("CLIENT", "ID")
    assert f["name"] == "info-me"
    assert f["cmd"] == "client|info"
    host, port = c.sock.getsockname()
    assert f["addr"] == "%s:%d" % (host, port)
    assert f["resp"] == "2"
    c.hello3()
    v = c.call("CLIENT", "INFO")
    # RESP3: a verbatim string of format txt
    assert v.fmt == "txt"
    assert parse_client_line(v.data.decode())["resp"] == "3"


def _redis_lacks_setinfo():
    if TARGET != "redis":
        return False
    import subprocess
    out = subprocess.run([server_binary(), "--version"], capture_output=True, text=True).stdout
    ver = out.split("v=")[1].split()[0]
    return tuple(int(x) for x in ver.split(".")[:2]) < (7, 2)


@pytest.mark.skipif(_redis_lacks_setinfo(),
                    reason="CLIENT SETINFO exists since Redis 7.2; the validating redis-server is 7.0 "
                           "(it answers \"ERR unknown subcommand 'SETINFO'. Try CLIENT HELP.\")")
def test_client_setinfo(raw):
    # Redis 7.2 semantics (redis-py >= 5 and other clients send this on every connection)
    c = raw()
    assert c.call("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == OK
    assert c.call("CLIENT", "SETINFO", "LIB-VER", "1.0") == OK
    info = parse_client_line(c.call("CLIENT", "INFO").decode())
    assert info["lib-name"] == "redis-py"
    assert info["lib-ver"] == "1.0"
    e = c.call("CLIENT", "SETINFO", "lib-name", "redis py")
    assert isinstance(e, Err) and e.startswith("ERR ") and "cannot contain spaces" in e
    e = c.call("CLIENT", "SETINFO", "badger", "hamster")
    assert isinstance(e, Err) and "Unrecognized option" in e
    e = c.call("CLIENT", "SETINFO", "lib-name")
    assert e == Err("ERR wrong number of arguments for 'client|setinfo' command")


def test_client_kill_by_id(raw):
    a, victim = raw(), raw()
    vid = victim.call("CLIENT", "ID")
    assert a.call("CLIENT", "KILL", "ID", str(vid)) == 1
    data, closed = victim.read_until_closed(timeout=5)
    assert closed and data == b""
    ids = {int(e["id"]) for e in client_list(a)}
    assert vid not in ids
    assert a.call("CLIENT", "KILL", "ID", "999999999") == 0
    assert a.call("CLIENT", "KILL", "ID", "abc") == Err("ERR client-id should be greater than 0")
    assert a.call("CLIENT", "KILL", "FOO", "x") == Err("ERR syntax error")


def test_client_kill_by_addr(raw):
    a, victim = raw(), raw()
    # A connection is a client once the server has accepted it: a round trip makes sure, since
    # accepting runs on another thread than the killer's commands.
    assert victim.call("PING") == Simple("PONG")
    host, port = victim.sock.getsockname()
    addr = "%s:%d" % (host, port)
    assert a.call("CLIENT", "KILL", "ADDR", addr) == 1
    data, closed = victim.read_until_closed(timeout=5)
    assert closed
    assert a.call("CLIENT", "KILL", "ADDR", addr) == 0
    # old form: CLIENT KILL ip:port
    victim2 = raw()
    assert victim2.call("PING") == Simple("PONG")
    host, port = victim2.sock.getsockname()
    assert a.call("CLIENT", "KILL", "%s:%d" % (host, port)) == OK
    data, closed = victim2.read_until_closed(timeout=5)
    assert closed
    assert a.call("CLIENT", "KILL", "%s:%d" % (host, port)) == Err("ERR No such client")
    # the killer is unaffected
    assert a.call("PING") == Simple("PONG")


def test_client_no_evict(raw):
    c = raw()
    assert c.call("CLIENT", "NO-EVICT", "on") == OK
    assert c.call("CLIENT", "NO-EVICT", "off") == OK
    assert c.call("CLIENT", "NO-EVICT", "ON") == OK
    assert c.call("CLIENT", "NO-EVICT", "maybe") == Err("ERR syntax error")
    assert c.call("CLIENT", "NO-EVICT") == Err("ERR wrong number of arguments for 'client|no-evict' command")


# ---------------------------------------------------------------- unix socket

def test_unix_socket(start_server, tmp_path):
    path = str(tmp_path / "stratakv.sock")
    srv = start_server(unixsocket=path)
    client = redis.Redis(unix_socket_path=path, socket_timeout=10)
    try:
        assert client.ping() is True
        assert client.set("unix-k", b"via-unix") is True
    finally:
        client.close()
    tcp = srv.client()
    assert tcp.get("unix-k") == b"via-unix"
    tcp.close()
    c = RawConn(unix_path=path)
    try:
        assert c.call_raw("GET", "unix-k") == b"$8\r\nvia-unix\r\n"
    finally:
        c.close()
