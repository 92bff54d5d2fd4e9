"""pytest fixtures and hooks for the stratakv integration tests.

See harness.py for the environment variables (STRATAKV_TARGET, STRATAKV_SERVER, ...)
and the command line used to start servers.

Fixtures:
  server        module-scoped default server (FLUSHALL before each test via `r`).
  r             redis-py client (bytes replies) on `server`; flushes first.
  raw           factory: raw(srv=None, resp3=False) -> RawConn (closed at teardown).
  start_server  factory: start_server(**config) -> a fresh server with extra
                config (in names "_" becomes "-" and "__" a dot:
                memory__capacity="64mb"), stopped at teardown.
  target        "stratakv" or "redis".
  redis_srv     module-scoped redis-server (Redis 7.0) beside the target, for tests that compare
                the two in one run; skips when there is none.
  same          same(*args) -> stratakv's raw reply to `args`, asserted byte-equal to
                redis-server's (both flushed first); same.pair(resp3) for other protocols.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import (  # noqa: E402
    TARGET, _RUNNING, _STOPPED_IN_TEST, launch_redis, launch_server, redis_binary, server_binary,
    stop_servers,
)


# ---- pytest hooks -----------------------------------------------------------

def pytest_report_header(config):
    return "stratakv integration: target=%s binary=%s" % (TARGET, server_binary())


def pytest_runtest_setup(item):
    _STOPPED_IN_TEST.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        seen = set()
        for srv in list(_RUNNING) + list(_STOPPED_IN_TEST):
            if id(srv) in seen:
                continue
            seen.add(id(srv))
            state = "running" if srv.alive() else "exited rc=%s" % (srv.proc.returncode if srv.proc else None)
            rep.sections.append(("server log %s (%s)" % (srv.name, state), srv.log_tail()))


def pytest_sessionfinish(session, exitstatus):
    for srv in list(_RUNNING):
        srv.stop()
    if exitstatus == 0:
        if harness._TMP_ROOT is not None:
            shutil.rmtree(harness._TMP_ROOT, ignore_errors=True)


# ---- fixtures ---------------------------------------------------------------

@pytest.fixture(scope="session")
def target():
    return TARGET


@pytest.fixture(scope="module")
def server():
    srv = launch_server()
    yield srv
    stop_servers(srv)


def _check_alive_after(srv):
    if not srv.alive():
        pytest.fail("server %s died during the test (rc=%s)" % (srv.name, srv.proc.returncode), pytrace=False)


@pytest.fixture
def r(server):
    server.ensure_running()
    client = server.client()
    client.flushall()
    yield client
    client.close()
    _check_alive_after(server)


@pytest.fixture
def raw(server):
    """Factory for raw connections: raw(srv=None, resp3=False, timeout=10)."""
    conns = []
    server.ensure_running()

    def make(srv=None, resp3=False, timeout=10.0, auth=True):
        c = (srv or server).raw(timeout=timeout, auth=auth)
        conns.append(c)
        if resp3:
            c.hello3()
        return c

    yield make
    for c in conns:
        c.close()


@pytest.fixture
def start_server():
    started = []

    def start(**config):
        srv = launch_server(**config)
        started.append(srv)
        return srv

    yield start
    stop_servers(*started)


@pytest.fixture(scope="module")
def redis_srv():
    if redis_binary() is None:
        pytest.skip("no redis-server to compare with")
    srv = launch_redis()
    yield srv
    stop_servers(srv)


@pytest.fixture
def same(r, raw, redis_srv):
    """same(*args): stratakv's raw reply, asserted byte-equal to redis-server's. Both servers
    are flushed first. same.pair(resp3=True) gives another comparator on a fresh pair of
    connections in that protocol."""
    redis_srv.raw().call("FLUSHALL")

    def make(resp3=False):
        ours, theirs = raw(resp3=resp3), raw(redis_srv, resp3=resp3)

        def call(*args):
            mine, ref = ours.call_raw(*args), theirs.call_raw(*args)
            assert mine == ref, "%r: stratakv %r, redis %r" % (args, mine, ref)
            return mine

        return call

    call = make()
    call.pair = make
    return call


@pytest.fixture
def etcd():
    """A real etcd on free loopback ports with a temporary data directory (etcd_util.Etcd);
    the test is skipped where etcd is not installed."""
    from etcd_util import Etcd, etcd_binary
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    with Etcd() as e:
        yield e


@pytest.fixture
def tmpfs():
    """tmpfs(size, prefix) -> the path of a new tmpfs of `size` ("64m"): a small filesystem to
    fill (a full disk). Skips the test where mounting is not permitted (needs root). Unmounted
    at teardown: request this fixture before start_server, so that its servers stop first."""
    mounted = []

    def mount(size, prefix="stratakv-fs-"):
        path = tempfile.mkdtemp(prefix=prefix)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", path],
                          capture_output=True).returncode != 0:
            os.rmdir(path)
            pytest.skip("cannot mount a %s tmpfs here (needs root): the test needs a small "
                        "filesystem" % size)
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", path], capture_output=True)
        os.rmdir(path)
