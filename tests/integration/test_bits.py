"""Bit commands (server/commands/cmd_bits.cc): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
BITFIELD, BITFIELD_RO, every reply and error byte for byte against a redis-server started in
the same run."""

import random

import pytest

from harness import TARGET

pytestmark = pytest.mark.skipif(TARGET == "redis",
                                reason="compares stratakv with redis-server side by side")


def test_setbit_getbit(same):
    for off, v in ((7, 1), (0, 1), (7, 0), (100, 1), (100, 1), (3, 0)):
        same("SETBIT", "b", str(off), str(v))
    for off in (0, 1, 7, 99, 100, 101, 1000, 2**32):
        same("GETBIT", "b", str(off))
    same("GET", "b")
    same("STRLEN", "b")
    same("GETBIT", "missing", "5")
    same("SETBIT", "s", "0", "0")  # a new key of one zero byte
    same("GET", "s")
    same("SET", "str", "foobar")
    same("SETBIT", "str", "7", "1")
    same("GET", "str")
    for bad in (("SETBIT", "b", "-1", "1"), ("SETBIT", "b", "x", "1"), ("SETBIT", "b", "1", "2"),
                ("SETBIT", "b", "1", "-1"), ("SETBIT", "b", "1", "x"), ("SETBIT", "b", "x", "x"),
                ("SETBIT", "b", str(4 * 2**30 * 8), "1"), ("SETBIT", "b", str(2**63), "1"),
                ("GETBIT", "b", "-1"), ("GETBIT", "b", "x"), ("GETBIT", "b", str(2**32 * 8)),
                ("SETBIT", "b", "1"), ("GETBIT", "b")):
        same(*bad)


def test_setbit_respects_proto_max_bulk_len(same):
    same("CONFIG", "SET", "proto-max-bulk-len", str(1 << 20))
    try:
        same("SETBIT", "big", str((1 << 23) - 1), "1")
        same("STRLEN", "big")
        same("SETBIT", "big", str(1 << 23), "1")
        same("BITFIELD", "big", "SET", "u8", str(1 << 23), "1")
    finally:
        same("CONFIG", "SET", "proto-max-bulk-len", str(512 << 20))


def test_bitcount(same):
    same("SET", "k", "foobar")
    for args in ((), ("0", "0"), ("1", "1"), ("0", "-1"), ("-2", "-1"), ("5", "30"), ("3", "1"),
                 ("0", "0", "BYTE"), ("1", "5", "BIT"), ("5", "30", "bit"), ("-7", "-1", "BIT"),
                 ("0", "47", "BIT"), ("9", "8", "BIT"), ("-100", "100", "BIT"),
                 ("0", "x"), ("x", "0"), ("0",), ("0", "1", "BAD"), ("0", "1", "BIT", "x")):
        same("BITCOUNT", "k", *args)
    for args in ((), ("0", "1"), ("0", "x"), ("0",)):
        same("BITCOUNT", "missing", *args)
    same("BITCOUNT")


def test_bitpos(same):
    same("SET", "k", b"\xff\xf0\x00")
    same("SET", "ones", b"\xff\xff\xff")
    same("SET", "zeros", b"\x00\x00")
    same("SET", "empty", "")
    for key in ("k", "ones", "zeros", "missing", "empty"):
        for bit in ("0", "1"):
            for rng in ((), ("0",), ("1",), ("-1",), ("0", "0"), ("0", "-1"), ("2", "1"),
                        ("1", "2"), ("3", "100"), ("0", "11", "BIT"), ("7", "15", "BIT"),
                        ("12", "-1", "BIT"), ("5", "5", "BIT"), ("0", "-1", "BYTE"),
                        ("-3", "-2", "bit")):
                same("BITPOS", key, bit, *rng)
    for bad in (("BITPOS", "k", "2"), ("BITPOS", "k", "x"), ("BITPOS", "k", "1", "x"),
                ("BITPOS", "k", "1", "0", "x"), ("BITPOS", "k", "1", "0", "1", "BAD"),
                ("BITPOS", "k", "1", "0", "1", "BIT", "x"), ("BITPOS", "k"),
                ("BITPOS", "missing", "2"), ("BITPOS", "missing", "1", "x")):
        same(*bad)


def test_bitop(same):
    same("SET", "a", b"\x0f\xf0\xaa")
    same("SET", "b", b"\xff\x00")
    same("SET", "c", b"\x01")
    for op in ("AND", "OR", "XOR", "and"):
        same("BITOP", op, "dst", "a", "b", "c")
        same("GET", "dst")
        same("BITOP", op, "dst", "a", "missing")
        same("GET", "dst")
    same("BITOP", "NOT", "dst", "a")
    same("GET", "dst")
    same("BITOP", "NOT", "dst", "missing")
    same("EXISTS", "dst")
    same("SET", "dst", "x")
    same("BITOP", "AND", "dst", "missing", "missing2")
    same("EXISTS", "dst")
    same("BITOP", "OR", "a", "a", "b")  # destination among the sources
    same("GET", "a")
    for bad in (("BITOP", "NOT", "dst", "a", "b"), ("BITOP", "NAND", "dst", "a"),
                ("BITOP", "AND", "dst"), ("BITOP", "NOT", "dst")):
        same(*bad)


def test_bitfield(same):
    ops = [
        ("SET", "i8", "0", "100"), ("GET", "i8", "0"), ("INCRBY", "i8", "0", "100"),
        ("GET", "u4", "0"), ("SET", "u4", "#2", "15"), ("GET", "u8", "#1"),
        ("OVERFLOW", "SAT", "INCRBY", "u2", "100", "1"), ("INCRBY", "u2", "100", "1"),
        ("INCRBY", "u2", "100", "-10"), ("OVERFLOW", "FAIL", "INCRBY", "u2", "100", "5"),
        ("INCRBY", "i5", "100", "-100"), ("OVERFLOW", "WRAP", "INCRBY", "i5", "100", "-100"),
        ("SET", "i64", "0", str(-2**63)), ("INCRBY", "i64", "0", "-1"),
        ("OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1"), ("INCRBY", "i64", "64", str(2**63 - 1)),
        ("INCRBY", "i64", "64", "1"), ("SET", "u63", "0", "-1"), ("GET", "u63", "0"),
        ("OVERFLOW", "wrap", "SET", "i8", "1000", "200"), ("GET", "i8", "1000"),
        ("SET", "u1", "7", "1"), ("GET", "i1", "7"), ("GET", "u63", "1"), ("GET", "i64", "3"),
    ]
    for op in ops:
        same("BITFIELD", "f", *op)
    same("GET", "f")
    same("BITFIELD", "f", "GET", "u8", "0", "SET", "u8", "0", "255", "GET", "u8", "0",
         "INCRBY", "u8", "0", "1", "GET", "i16", "#3")
    same("BITFIELD", "missing")
    same("BITFIELD", "missing", "GET", "u8", "0")
    same("EXISTS", "missing")
    same("BITFIELD", "new", "OVERFLOW", "FAIL", "SET", "u2", "8", "9")
    same("GET", "new")
    same("BITFIELD_RO", "f", "GET", "u8", "0", "GET", "i4", "#1")
    same("BITFIELD_RO", "missing", "GET", "u8", "0")
    for bad in (("GET", "u64", "0"), ("GET", "i65", "0"), ("GET", "u0", "0"), ("GET", "x8", "0"),
                ("GET", "u8", "-1"), ("GET", "u8", "x"), ("GET", "u8", "#x"), ("GET", "u8"),
                ("SET", "u8", "0"), ("SET", "u8", "0", "x"), ("INCRBY", "u8", "0", "x"),
                ("OVERFLOW", "BAD"), ("OVERFLOW",), ("FOO", "u8", "0"),
                ("GET", "u8", "0", "OVERFLOW", "BAD", "GET", "u8", "0"),
                ("GET", "u8", str(2**32 * 8))):
        same("BITFIELD", "f", *bad)
    for bad in (("SET", "u8", "0", "1"), ("INCRBY", "u8", "0", "1"), ("GET", "u8", "0", "SET"),
                ("OVERFLOW", "SAT"), ("GET", "u64", "0")):
        same("BITFIELD_RO", "f", *bad)
    same("BITFIELD")
    same("BITFIELD_RO")


def test_bitfield_random(same):
    """Random fields of every width and overflow mode against redis-server."""
    rnd = random.Random(15)
    for _ in range(300):
        sign = rnd.choice("iu")
        bits = rnd.randint(1, 64 if sign == "i" else 63)
        off = str(rnd.randint(0, 200))
        mode = rnd.choice(("WRAP", "SAT", "FAIL"))
        big = 2 ** (bits + 1)
        val = str(rnd.choice((rnd.randint(-big, big), rnd.randint(-2**63, 2**63 - 1), 0, -1, 1)))
        op = rnd.choice(("SET", "INCRBY"))
        same("BITFIELD", "rf", "OVERFLOW", mode, op, sign + str(bits), off, val,
             "GET", sign + str(bits), off)
    same("GET", "rf")


def test_command_info(same):
    # Left out: BITOP, to which Redis gives two key specs (destination, sources) where
    # stratakv's table has one range, as for RENAME; BITFIELD, whose key spec carries a "notes"
    # text stratakv's COMMAND INFO does not have.
    for name in ("SETBIT", "GETBIT", "BITCOUNT", "BITPOS", "BITFIELD_RO", "LCS",
                 "SUBSTR"):
        same("COMMAND", "INFO", name)
