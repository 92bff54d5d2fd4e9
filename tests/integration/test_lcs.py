"""LCS (server/commands/cmd_lcs.cc): every reply byte for byte against a redis-server started
in the same run, RESP2 and RESP3."""

import random

import pytest

from harness import TARGET

pytestmark = pytest.mark.skipif(TARGET == "redis",
                                reason="compares stratakv with redis-server side by side")


@pytest.mark.parametrize("resp3", [False, True])
def test_lcs(same, resp3):
    same = same.pair(resp3)

    rnd = random.Random(15)
    pairs = [("ohmytext", "mynewtext"), ("", "abc"), ("abc", "abc"), ("abc", "xyz"),
             ("aaaa", "aa"), ("abcabcabc", "cbacbacba")]

    def word():
        return "".join(rnd.choice("abc") for _ in range(rnd.randint(0, 40)))

    pairs += [(word(), word()) for _ in range(20)]
    options = [(), ("LEN",), ("IDX",), ("IDX", "WITHMATCHLEN"), ("IDX", "MINMATCHLEN", "2"),
               ("IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"), ("idx", "minmatchlen", "-1")]
    for x, y in pairs:
        same("SET", "a", x)
        same("SET", "b", y)
        for opt in options:
            same("LCS", "a", "b", *opt)
    same("LCS", "a", "missing")
    same("LCS", "missing", "missing2", "IDX")
    for bad in (("LEN", "IDX"), ("BAD",), ("MINMATCHLEN",), ("MINMATCHLEN", "x"), ("IDX", "LEN")):
        same("LCS", "a", "b", *bad)
    same("LCS", "a")
