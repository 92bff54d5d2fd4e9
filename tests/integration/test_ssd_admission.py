"""The SSD tier's admission (tiering.ssd.admission reuse, the default; docs/ssd-tier.md,
"Admission"): when values leave memory faster than the disk's write budget, the tier writes the
values read since they were written before the others and evicts what it does not take, so no
store waits for the disk; a full disk admits nothing and memory evicts as without the tier, so
no store gets -OOM for it; the operator's log says when the tier falls behind, when the disk
fills, and when each ends."""

import os
import time

import pytest

import harness
from harness import tier, wait_until

pytestmark = pytest.mark.skipif(harness.TARGET == "redis", reason="stratakv's SSD tier")

KiB = 1 << 10
MiB = 1 << 20


def pattern(tag, i, size):
    unit = ("%s:%08d|" % (tag, i)).encode()
    return (unit * (size // len(unit) + 1))[:size]




def log_lines(srv, text):
    return [l for l in srv.log_path.read_text(errors="replace").splitlines() if text in l]


def fill(r, tag, n, size, read_every=0):
    """SETs n values (each must answer OK); reads every read_every-th right after its write.
    Returns the keys read."""
    read = []
    for i in range(n):
        key = "%s:%d" % (tag, i)
        assert r.set(key, pattern(tag, i, size)) is True
        if read_every and i % read_every == 0:
            assert r.get(key) == pattern(tag, i, size)
            read.append(key)
    return read


def test_past_the_write_budget_stores_never_wait_and_read_values_are_admitted(start_server,
                                                                            tmp_path):
    """A write budget of 16 MB/s (tiering.ssd.max_write_rate) under writers at memory speed: no
    store waits, the tier rejects (and memory evicts) most values, and among the values that
    leave memory those read once are admitted far more often than those never read."""
    srv = start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(tmp_path / "ssd"),
                       memory__capacity="64mb", maxmemory="16mb",
                       tiering__ssd__max_write_rate="16mb")
    r = srv.client()
    assert r.config_get("tiering.ssd.admission") == {"tiering.ssd.admission": "reuse"}
    size = 256 * KiB
    fill(r, "warm", 256, size)  # 64 MiB never read: the budget runs down to its last quarter
    read = set(fill(r, "m", 128, size, read_every=2))  # half of them read once
    fill(r, "flush", 128, size)  # pushes the measured keys out of memory
    info = r.info("tiering")
    assert info["ssd_admission"] == "reuse", info
    assert info["ssd_write_waits"] == 0, info  # no store waited for the disk
    assert info["ssd_rejected"] > 0 and info["ssd_rejected_bytes"] >= info["ssd_rejected"] * size
    assert info["ssd_admitted"] > 0, info
    assert info["unwritten_evictions"] == 0, info  # refused values are counted as rejected
    assert r.info("stats")["evicted_keys"] >= info["ssd_rejected"]
    wait_until("the queue", lambda: r.info("tiering")["pending_demotion_bytes"] == 0)

    kept = {"read": 0, "unread": 0}
    gone = {"read": 0, "unread": 0}
    for i in range(128):
        key = "m:%d" % i
        where = tier(r, key)
        kind = "read" if key in read else "unread"
        if where is None:
            gone[kind] += 1
        elif where != "memory":
            kept[kind] += 1
            assert r.get(key) == pattern("m", i, size), key  # byte-exact from SSD
    share = {k: kept[k] / max(1, kept[k] + gone[k]) for k in kept}
    assert kept["read"] >= 4, (kept, gone)
    assert share["read"] >= 2 * share["unread"], (kept, gone)

    # The operator's log: one line when the tier falls behind, one when it keeps up again.
    wait_until("the keeping-up line", lambda: log_lines(srv, "keeps up again"), timeout=20)
    assert len(log_lines(srv, "demotion falls behind")) == 1
    assert len(log_lines(srv, "keeps up again")) == 1
    assert r.info("tiering")["ssd_admission_state"] == "keeping_up"


def test_the_admission_mode_changes_at_run_time(start_server, tmp_path):
    """CONFIG SET tiering.ssd.admission wait: from then on every victim is written (none is
    rejected); back to reuse, the budget (1 MB/s here) rejects again."""
    srv = start_server(tiering__ssd__enabled="yes", tiering__ssd__path=str(tmp_path / "ssd"),
                       memory__capacity="64mb", maxmemory="16mb",
                       tiering__ssd__max_write_rate="1mb")
    r = srv.client()
    fill(r, "a", 128, 256 * KiB)
    assert r.info("tiering")["ssd_rejected"] > 0
    assert r.config_set("tiering.ssd.admission", "wait")
    time.sleep(0.3)  # the server's cron (every 100 ms) hands the mode to the tier
    assert r.info("tiering")["ssd_admission"] == "wait"
    # Counted once the mode is in force (the background evictor may still have been rejecting
    # the last of "a" when CONFIG SET came).
    rejected, admitted = (r.info("tiering")[k] for k in ("ssd_rejected", "ssd_admitted"))
    fill(r, "b", 64, 256 * KiB)
    info = r.info("tiering")
    assert info["ssd_rejected"] == rejected, info
    assert info["ssd_admitted"] >= admitted + 32, info  # the victims of 16 MiB, all written
    assert r.config_set("tiering.ssd.admission", "reuse")
    time.sleep(0.3)
    fill(r, "c", 128, 256 * KiB)
    assert r.info("tiering")["ssd_rejected"] > rejected


def fill_disk(path, leave):
    """Writes a file under `path` until the filesystem has about `leave` bytes free."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(path, "filler"), "wb") as f:
        chunk = b"\0" * MiB
        for _ in range(max(0, (free - leave) // MiB)):
            f.write(chunk)


def test_a_full_disk_admits_nothing_and_stores_never_get_oom(tmpfs, start_server):
    """    A 64 MB filesystem filled to 2 MB free under the tier, then 5x maxmemory of SETs: every
    SET answers OK (memory evicts as without the tier), INFO says the disk is full, the log says
    so once; after space comes back the tier admits again and the log says that too."""
    small_filesystem = tmpfs("64m", "stratakv-adm-")
    srv = start_server(tiering__ssd__enabled="yes",
                       tiering__ssd__path=small_filesystem + "/ssd",
                       memory__capacity="64mb", maxmemory="16mb",
                       tiering__ssd__write_buffer_size="1mb")
    r = srv.client()
    fill_disk(small_filesystem, 2 * MiB)
    fill(r, "x", 80, MiB)  # each SET must answer OK: no -OOM for the full disk
    info = r.info("tiering")
    assert info["ssd_write_errors"] > 0, info
    assert info["ssd_admission_state"] == "disk_full", info
    assert "space" in info["ssd_last_error"].lower(), info
    assert info["ssd_rejected"] > 0, info
    assert r.info("stats")["evicted_keys"] > 0
    assert r.dbsize() < 80
    assert len(log_lines(srv, "ssd tier: disk full, nothing is admitted")) == 1

    os.remove(os.path.join(small_filesystem, "filler"))
    # The writer retries after its backoff (1 s, doubling); writes give it victims to admit.
    i = 0

    def recovered():
        nonlocal i
        i += 1
        assert r.set("y:%d" % i, pattern("y", i, MiB)) is True
        return bool(log_lines(srv, "the disk has room again"))

    wait_until("the tier to admit again", recovered, timeout=20)
    wait_until("ssd_status ok", lambda: r.info("tiering")["ssd_status"] == "ok", timeout=5)
    assert len(log_lines(srv, "ssd tier: disk full")) == 1
    assert srv.alive()
