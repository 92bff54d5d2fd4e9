"""Warm restarts (docs/ssd-tier.md, "Restart"): with the SSD tier on, a graceful stop (SIGTERM,
SHUTDOWN) writes the values held only in memory to SSD by default
(tiering.ssd.flush_on_shutdown yes), within tiering.ssd.flush_on_shutdown_timeout seconds, and
logs how many keys and bytes it kept and dropped. SHUTDOWN NOSAVE and a time limit of 0 drop
them, and the log says so."""

import re
import time

import pytest

import harness

pytestmark = pytest.mark.skipif(harness.TARGET == "redis", reason="stratakv's SSD tier")

KiB = 1 << 10
LINE = re.compile(rb"ssd tier: shutdown kept keys=(\d+) bytes=(\d+) dropped keys=(\d+) "
                  rb"bytes=(\d+) ssd_keys=(\d+) ms=(\d+)(.*)")


def value(i, size):
    unit = b"v:%08d|" % i
    return (unit * (size // len(unit) + 1))[:size]


def fill(r, n=20, size=256 * KiB, small=200):
    """n values of `size` and `small` 100-byte ones, all in memory (below maxmemory)."""
    for i in range(n):
        r.set("big:%d" % i, value(i, size))
    for i in range(small):
        r.set("small:%d" % i, value(i, 100))
    assert r.execute_command("TIER", "big:0") == b"memory"
    return n * size + small * 100, n + small


def check_all(r, n=20, size=256 * KiB, small=200):
    assert r.dbsize() == n + small
    for i in range(n):
        assert r.get("big:%d" % i) == value(i, size)
    for i in range(small):
        assert r.get("small:%d" % i) == value(i, 100)


def shutdown_line(srv):
    lines = [m for m in LINE.finditer(srv.log_path.read_bytes())]
    assert lines, srv.log_tail()
    m = lines[-1]
    return [int(m.group(i)) for i in range(1, 6)], m.group(7)


def start_again(srv):
    """After the process exited by itself (SHUTDOWN): the same config and SSD path."""
    assert srv.proc.wait(10) == 0
    return srv.start_again()


def tier_server(start_server, tmp_path, **config):
    # flush_on_shutdown is left at its default: yes.
    return start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(tmp_path / "ssd"),
                        memory__capacity="64mb", maxmemory="32mb", **config)


def test_sigterm_keeps_memory_values_by_default_and_logs_counts(start_server, tmp_path):
    srv = tier_server(start_server, tmp_path)
    r = srv.client()
    assert r.config_get("tiering.ssd.flush_on_shutdown") == {"tiering.ssd.flush_on_shutdown": "yes"}
    nbytes, nkeys = fill(r)
    t0 = time.monotonic()
    assert srv.stop() is None
    assert time.monotonic() - t0 < harness.STOP_TIMEOUT
    (kept_keys, kept_bytes, dropped_keys, dropped_bytes, ssd_keys), _ = shutdown_line(srv)
    assert (kept_keys, kept_bytes, dropped_keys, dropped_bytes) == (nkeys, nbytes, 0, 0)
    assert ssd_keys == nkeys
    srv.start()
    r = srv.client()
    assert r.execute_command("TIER", "big:3") == b"ssd"
    check_all(r)


def test_shutdown_command_keeps_them_and_nosave_drops_them(start_server, tmp_path):
    srv = tier_server(start_server, tmp_path)
    r = srv.client()
    nbytes, nkeys = fill(r)
    r.shutdown()
    r = start_again(srv)
    assert shutdown_line(srv)[0][:4] == [nkeys, nbytes, 0, 0]
    check_all(r)
    # Values written since the restart are only in memory; the rest are on SSD already.
    r.set("new", value(7, 64 * KiB))
    r.shutdown(nosave=True)
    r = start_again(srv)
    counts, why = shutdown_line(srv)
    assert counts[:4] == [0, 0, 1, 64 * KiB]
    assert b"SHUTDOWN NOSAVE" in why, why
    assert r.get("new") is None
    check_all(r)  # what was on SSD stays


def test_time_limit_zero_drops_memory_values_and_says_so(start_server, tmp_path):
    srv = tier_server(start_server, tmp_path, tiering__ssd__flush_on_shutdown_timeout="0")
    r = srv.client()
    nbytes, nkeys = fill(r)
    assert srv.stop() is None
    counts, why = shutdown_line(srv)
    assert counts[:4] == [0, 0, nkeys, nbytes]
    assert b"flush_on_shutdown_timeout is 0" in why, why
    srv.start()
    assert srv.client().dbsize() == 0


def test_flush_on_shutdown_no_and_save(start_server, tmp_path):
    srv = tier_server(start_server, tmp_path, tiering__ssd__flush_on_shutdown="no")
    r = srv.client()
    nbytes, nkeys = fill(r)
    r.shutdown(save=True)  # SAVE writes them whatever flush_on_shutdown says
    r = start_again(srv)
    assert shutdown_line(srv)[0][:4] == [nkeys, nbytes, 0, 0]
    check_all(r)
    r.set("new", b"x" * 100)
    assert srv.stop() is None
    counts, why = shutdown_line(srv)
    assert counts[:4] == [0, 0, 1, 100]
    assert b"flush_on_shutdown is no" in why, why
