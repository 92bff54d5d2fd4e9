"""The SSD store's on-disk format (docs/ssd-tier.md, "On-disk format"): a store written by the
stratakv of before format 2 (the committed fixture tests/fixtures/ssd-v1, see its README.md) is
converted when the server opens it, every key reads back byte-exact with its TTL, and the
converted store reopens as it is."""

import shutil
import sys
import time

import pytest

import harness

pytestmark = pytest.mark.skipif(harness.TARGET == "redis", reason="stratakv's SSD tier")

FIXTURES = harness.REPO_ROOT / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES))
import make_ssd_v1  # noqa: E402  (reads the fixture's keys.txt)


def starts(srv):
    """The server's log, one string per start."""
    return srv.log_path.read_text(errors="replace").split("==== start:")[1:]


def check_keys(r, keys):
    now = int(time.time() * 1000)
    live = 0
    for key, deadline, value, spec in keys:
        if deadline and deadline <= now:
            assert r.get(key) is None, key
            assert r.exists(key) == 0, key
            continue
        live += 1
        assert r.get(key) == value, (key, spec)
        pttl = r.pttl(key)
        if deadline == 0:
            assert pttl == -1, (key, pttl)
        else:
            assert 0 < pttl <= deadline - now + 1000, (key, pttl, deadline)
    assert r.dbsize() == live
    return live


def test_format1_store_is_converted_and_reopens(start_server, tmp_path):
    keys = make_ssd_v1.read_keys()
    assert len(keys) == 16
    path = tmp_path / "db"
    shutil.copytree(FIXTURES / "ssd-v1" / "db", path)
    srv = start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(path),
                       tiering__ssd__recover="yes", memory__capacity="16mb")
    log = starts(srv)[-1]
    assert "converted format 1 to format 2: records=16 " in log, log
    assert "ssd tier: recovered keys=15 " in log, log
    r = srv.client()
    # Recovered on SSD only, the expired one gone.
    assert r.execute_command("TIER", b"large:3") == b"ssd"
    assert r.execute_command("TIER", b"bin\x00\xff\r\n\x01key") == b"ssd"
    assert check_keys(r, keys) == 15

    # The converted store reopens without converting: every key again, and a new one.
    r.set("after", b"written in format 2")
    assert srv.stop() is None
    srv.start()
    log = starts(srv)[-1]
    assert "ssd store" not in log and "format 1" not in log, log
    assert "ssd tier disabled" not in log, log
    r = srv.client()
    r.delete("after")  # not on SSD (no flush_on_shutdown): gone with the restart anyway
    assert check_keys(r, keys) == 15
    assert srv.stop() is None

    # Once more with flush_on_shutdown: what memory held goes to SSD and comes back.
    srv.config["tiering.ssd.flush-on-shutdown"] = "yes"
    srv.start()
    r = srv.client()
    r.set("after", b"written in format 2")
    assert srv.stop() is None
    srv.start()
    r = srv.client()
    assert r.get("after") == b"written in format 2"
    r.delete("after")
    assert check_keys(r, keys) == 15
