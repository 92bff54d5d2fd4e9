"""docs/commands.md against the servers (issue 15): every command and subcommand redis-server
(Redis 7.0) lists in COMMAND LIST appears in it, and so does every one stratakv serves; a row
that says "served" names a command stratakv has, and one that says "not served" one it has
not."""

import re
from pathlib import Path

import pytest

from harness import TARGET

pytestmark = pytest.mark.skipif(TARGET == "redis", reason="checks stratakv's documentation")

DOC = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
# A table row: | `NAME` | status ... |
ROW = re.compile(r"^\| `([A-Z0-9_.\- ]+)` \| ([^|]+) \|", re.M)


def doc_name(name):
    """COMMAND LIST's "client|kill" as the docs write it: `CLIENT KILL`."""
    return name.decode().upper().replace("|", " ")


def test_every_redis_and_stratakv_command_is_documented(raw, redis_srv):
    text = DOC.read_text()
    mentioned = set(re.findall(r"`([A-Z0-9_.\-]+(?: [A-Z0-9_.\-]+)?)`", text))
    theirs = {doc_name(n) for n in redis_srv.raw().call("COMMAND", "LIST")}
    ours = {doc_name(n) for n in raw().call("COMMAND", "LIST")}
    assert sorted(theirs - mentioned) == [], "Redis 7.0 commands missing from docs/commands.md"
    assert sorted(ours - mentioned) == [], "stratakv commands missing from docs/commands.md"


def test_statuses_match_the_server(raw):
    ours = {doc_name(n) for n in raw().call("COMMAND", "LIST")}
    rows = ROW.findall(DOC.read_text())
    assert len(rows) > 100
    for name, status in rows:
        status = status.strip().lower()
        if status.startswith("not served"):
            assert name not in ours, "%s is served, the docs say not" % name
        elif status.startswith("served"):
            assert name in ours, "%s is not served, the docs say it is" % name
        else:
            assert status.startswith("refused"), (name, status)
            assert name in ours, name  # registered, answering an error that says why
