"""Fixtures for the Python SDK tests (the stratakv package over a real server).

The parent directory's conftest.py (server logs on failure) applies too; these fixtures start
their own server with a Unix socket:
  sdk_server   module-scoped server listening on TCP and on a Unix socket
  url          parametrized: the server's unix:// and redis:// URLs
  kv           a stratakv.Client on `url`
  kv_unix      a stratakv.Client on the Unix socket
  redis_py     a redis-py client on the server (flushed first)
"""

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402

import stratakv  # noqa: E402  (PYTHONPATH points at the build's python/ directory)


@pytest.fixture(scope="module")
def sdk_server():
    workdir = Path(tempfile.mkdtemp(prefix="stratakv-sdk-py-"))
    sock = workdir / "server.sock"
    srv = harness.launch_server(unixsocket=str(sock))
    srv.socket_path = str(sock)
    yield srv
    harness.stop_servers(srv)
    shutil.rmtree(workdir, ignore_errors=True)


def unix_url(srv, password=None):
    return "unix://%s%s" % (":%s@" % password if password else "", srv.socket_path)


def tcp_url(srv, password=None):
    return "redis://%s127.0.0.1:%d" % (":%s@" % password if password else "", srv.port)


@pytest.fixture(params=["unix", "tcp"])
def url(request, sdk_server):
    sdk_server.ensure_running()
    return unix_url(sdk_server) if request.param == "unix" else tcp_url(sdk_server)


@pytest.fixture
def redis_py(sdk_server):
    c = sdk_server.client()
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def kv(url, redis_py):
    return stratakv.Client(url)


@pytest.fixture
def kv_unix(sdk_server, redis_py):
    return stratakv.Client(unix_url(sdk_server))


def has_fast_path(redis_py):
    """True when the server has the KV.* commands (then unix:// must pick shm)."""
    import redis
    try:
        redis_py.execute_command("KV.PREFIX", "no-such-key")
        return True
    except redis.ResponseError:
        return False
