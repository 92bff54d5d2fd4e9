"""Short runs of stratakv-bench (bench/kvbench/) against a real server, checking the bench's
own accounting rather than the server's speed:

  - every chunk the bench reports as loaded (a hit) was checked byte by byte against what it
    stored (--verify full): counts.verified_full == counts.hits, no mismatch, no error;
  - a repeated conversation finds its chunks again: hits > 0 (most of them, without eviction);
  - a corrupted or truncated value makes the bench fail: mismatches > 0 and exit status 1;
  - the modeled time to first token (bench/kvbench/ttft.h) adds up: per run, its mean is the
    prefix-load mean plus the prefilled tokens over the prefill rate; on a trace whose requests
    share nothing every prompt token (the trace's input_length) is prefilled and the TTFT
    percentiles are the prompts' over the rate; replayed again, nothing is prefilled.

usage: kvbench_check.py MODE BENCH
  MODE   resp | fast | trace | redis | mismatch   (fast: --protocol fast, the SDK, and
         --protocol fast-raw; mismatch: corruptions caught over resp and over fast)
  BENCH  the stratakv-bench binary
environment: STRATAKV_SERVER (the server binary), REDIS_SERVER (redis mode; default
redis-server on PATH: the test is skipped, status 77, when there is none).
"""

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
WORK = tempfile.mkdtemp(prefix="kvbench-check-")
SOCK = os.path.join(WORK, "s.sock")
SHARED_TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "traces",
                            "synthetic_trace.jsonl")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A server process on a free port (and a Unix socket for stratakv), stopped on exit."""

    def __init__(self, binary, redis=False):
        self.port = free_port()
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--maxmemory", "256mb"]
        if redis:
            args += ["--save", "", "--appendonly", "no", "--maxmemory-policy", "allkeys-lru"]
        else:
            args += ["--unixsocket", SOCK, "--memory.capacity", "256mb"]
        self.log = open(os.path.join(WORK, "server.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=WORK)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail("server exited at start: %s" % open(self.log.name).read()[-2000:])
            try:
                if self.call("PING") == b"+PONG":
                    return
            except OSError:
                pass
            time.sleep(0.05)
        fail("server did not answer PING")

    def call(self, *args):
        """One command over a fresh connection; the reply's first line, or a bulk's bytes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(encode(*args))
            f = s.makefile("rb")
            line = f.readline().rstrip(b"\r\n")
            if line.startswith(b"$") and int(line[1:]) >= 0:
                data = f.read(int(line[1:]) + 2)
                return data[:-2]
            if line.startswith(b"*"):
                return [f.readline().rstrip(b"\r\n") for _ in range(2 * int(line[1:]))][1::2]
            return line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def bench(binary, server, name, *extra, expect_rc=0):
    """Runs the bench, returns its JSON report."""
    out = os.path.join(WORK, name + ".json")
    args = [binary, "--port", str(server.port), "--json", out, "--progress", "lines",
            "--progress-secs", "1", "--key-prefix", "check/" + name] + list(extra)
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    print("$ " + " ".join(args) + "\n" + r.stdout)
    if r.returncode != expect_rc:
        fail("%s: exit status %d, expected %d" % (name, r.returncode, expect_rc))
    with open(out) as f:
        return json.load(f)


def check_clean(report, name, min_hit_ratio):
    c = report["counts"]
    if not report["ok"]:
        fail("%s: report not ok: %s %s" % (name, report["first_error"], report["first_mismatch"]))
    if c["errors"] or c["mismatches"]:
        fail("%s: errors %d, mismatches %d" % (name, c["errors"], c["mismatches"]))
    if c["hits"] == 0:
        fail("%s: no hits on a repeated workload" % name)
    if c["verified_full"] != c["hits"]:
        fail("%s: %d chunks loaded but %d checked byte by byte" % (name, c["hits"], c["verified_full"]))
    if c["bytes_loaded"] != c["hits"] * report["config"]["value_bytes"]:
        fail("%s: bytes_loaded %d != hits x value size" % (name, c["bytes_loaded"]))
    if c["hits"] + c["stored"] != c["chunks"]:
        fail("%s: chunks neither loaded nor stored: %s" % (name, c))
    if report["hit_ratio"]["chunks"] < min_hit_ratio:
        fail("%s: hit ratio %.3f < %.3f" % (name, report["hit_ratio"]["chunks"], min_hit_ratio))
    if report["latency"]["prefix_load"]["count"] != c["requests"]:
        fail("%s: %d prefix-load times for %d requests" % (name, report["latency"]["prefix_load"]["count"],
                                                          c["requests"]))
    check_ttft(report, name)
    if len(report["timeline"]) < 2 or report["timeline"][-1]["hits"] != c["hits"]:
        fail("%s: the timeline does not end at the totals" % name)
    print("ok: %s: %d requests, %d of %d chunks hit (%.1f%%), all %d checked byte by byte"
          % (name, c["requests"], c["hits"], c["chunks"], 100 * report["hit_ratio"]["chunks"],
             c["verified_full"]))


def check_ttft(report, name):
    """The modeled TTFT's accounting: one per request, its mean = prefix-load mean + prefill."""
    c, lat = report["counts"], report["latency"]
    rate = report["config"]["prefill_tokens_per_s"]
    if rate <= 0 or c["prompt_tokens"] < c["chunks"]:
        fail("%s: prefill rate %r, %d prompt tokens for %d chunks" % (name, rate, c["prompt_tokens"], c["chunks"]))
    if lat["ttft"]["count"] != c["requests"]:
        fail("%s: %d TTFTs for %d requests" % (name, lat["ttft"]["count"], c["requests"]))
    if c["prefill_tokens"] > c["prompt_tokens"]:
        fail("%s: %d tokens prefilled of %d" % (name, c["prefill_tokens"], c["prompt_tokens"]))
    if c["hits"] and c["prefill_tokens"] >= c["prompt_tokens"]:
        fail("%s: %d chunks hit but every prompt token prefilled" % (name, c["hits"]))
    want = lat["prefix_load"]["mean_ms"] + 1000.0 * c["prefill_tokens"] / c["requests"] / rate
    got = lat["ttft"]["mean_ms"]
    if abs(got - want) > 0.001 * want + 0.01:
        fail("%s: TTFT mean %.4f ms, expected %.4f (prefix load + prefill)" % (name, got, want))


def check_ttft_model(binary, server):
    """A trace whose requests share no block: every prompt token is prefilled, so the TTFT is
    the prompt over the rate (plus a sub-millisecond miss lookup); replayed, every token hits."""
    gen = os.path.join(WORK, "miss.jsonl")
    subprocess.run([binary, "--gen-trace", gen, "--gen-requests", "60", "--gen-rate", "1000",
                    "--gen-prefix-blocks", "0", "--gen-session-prob", "0"], check=True, timeout=60)
    lengths = sorted(json.loads(line)["input_length"] for line in open(gen))
    rate = 2000.0
    args = ["--trace", gen, "--bytes-per-token", "16", "--verify", "full", "--streams", "2",
            "--prefill-tokens-per-s", str(rate)]
    miss = bench(binary, server, "ttft", *args)
    c = miss["counts"]
    if c["hits"] or c["prompt_tokens"] != sum(lengths) or c["prefill_tokens"] != sum(lengths):
        fail("ttft miss run: %d hits, %d prompt and %d prefilled tokens, trace has %d"
             % (c["hits"], c["prompt_tokens"], c["prefill_tokens"], sum(lengths)))
    check_ttft(miss, "ttft-miss")
    for q in (0.5, 0.99):
        want = 1000.0 * lengths[math.ceil(q * len(lengths)) - 1] / rate  # the bench's rank rule
        got = miss["latency"]["ttft"]["p%d_ms" % int(q * 100)]
        if not want * 0.98 <= got <= want * 1.02 + 5:
            fail("ttft miss run: p%d %.1f ms, expected about %.1f (prompt / rate)" % (q * 100, got, want))
    hit = bench(binary, server, "ttft", *args)  # the same keys again: all cached
    c = hit["counts"]
    if c["prefill_tokens"] != 0 or c["hits"] != c["chunks"]:
        fail("ttft hit run: %d tokens prefilled, %d of %d chunks hit" % (c["prefill_tokens"], c["hits"], c["chunks"]))
    check_ttft(hit, "ttft-hit")
    if not hit["latency"]["ttft"]["p99_ms"] < 0.1 * miss["latency"]["ttft"]["p50_ms"]:
        fail("ttft: all-hit p99 %.2f ms not far below the all-miss p50 %.2f ms"
             % (hit["latency"]["ttft"]["p99_ms"], miss["latency"]["ttft"]["p50_ms"]))
    print("ok: modeled TTFT: all miss p50 %.1f / p99 %.1f ms (%d tokens at %.0f/s), all hit p50 %.3f / p99 %.3f ms"
          % (miss["latency"]["ttft"]["p50_ms"], miss["latency"]["ttft"]["p99_ms"], sum(lengths), rate,
             hit["latency"]["ttft"]["p50_ms"], hit["latency"]["ttft"]["p99_ms"]))


def expect_mismatch(binary, server, kind, *extra):
    report = bench(binary, server, "m", *CONVERSATION, "--repeat", "1", *extra, expect_rc=1)
    c = report["counts"]
    if report["ok"] or c["mismatches"] < 1 or kind not in report["first_mismatch"]:
        fail("%r not caught: %s, first mismatch %r" % (kind, c, report["first_mismatch"]))
    if c["verified_full"] != c["hits"]:
        fail("a hit was not checked: %s" % c)
    print("ok: caught: %s; exit status 1" % report["first_mismatch"])


CONVERSATION = ["--value-size", "16k", "--users", "6", "--rounds", "3", "--system-tokens", "512",
                "--user-tokens", "300", "--output-tokens", "100", "--streams", "3", "--verify", "full",
                "--repeat", "2"]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    mode, binary = sys.argv[1], sys.argv[2]
    stratakv = os.environ.get("STRATAKV_SERVER", "")
    if mode == "redis":
        redis = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
        if not redis:
            print("skipped: no redis-server")
            return SKIP
        server = Server(redis, redis=True)
    else:
        if not os.access(stratakv, os.X_OK):
            fail("STRATAKV_SERVER is not an executable: %r" % stratakv)
        server = Server(stratakv)
    try:
        if mode in ("resp", "redis"):
            # Without eviction the second pass hits every chunk: more than half of all.
            check_clean(bench(binary, server, mode, *CONVERSATION), mode, 0.5)
            # Batches of 2 slots: loads and stores span several batches.
            check_clean(bench(binary, server, mode + "-batch2", *CONVERSATION, "--batch", "2"),
                        mode + "-batch2", 0.5)
        elif mode == "fast":
            args = ["--protocol", "fast", "--unix", SOCK]
            check_clean(bench(binary, server, "fast", *CONVERSATION, *args), "fast", 0.5)
            check_clean(bench(binary, server, "fast-batch2", *CONVERSATION, *args, "--batch", "2",
                              "--no-pin"), "fast-batch2", 0.5)
            # The direct wire-protocol backend (no SDK) reads what the SDK stored, and its own.
            raw = ["--protocol", "fast-raw", "--unix", SOCK]
            check_clean(bench(binary, server, "fast", *CONVERSATION, *raw), "fast-raw-after-fast", 0.99)
            check_clean(bench(binary, server, "fast-raw", *CONVERSATION, *raw, "--batch", "2"),
                        "fast-raw-batch2", 0.5)
            # What the fast path stored, RESP reads back byte-exact (one keyspace), and back.
            check_clean(bench(binary, server, "fast", *CONVERSATION, "--repeat", "1"), "resp-after-fast",
                        0.99)
        elif mode == "trace":
            gen = os.path.join(WORK, "gen.jsonl")
            subprocess.run([binary, "--gen-trace", gen, "--gen-requests", "150", "--gen-rate", "300"],
                           check=True, timeout=60)
            trace = ["--trace", gen, "--bytes-per-token", "16", "--verify", "full", "--streams", "3"]
            # Timestamps honoured (150 requests at 300/s: about half a second), twice over.
            check_clean(bench(binary, server, "trace-resp", *trace, "--speedup", "1", "--repeat", "2"),
                        "trace-resp", 0.5)
            check_clean(bench(binary, server, "trace-fast", *trace, "--protocol", "fast", "--unix", SOCK,
                              "--repeat", "2", "--no-unpin"), "trace-fast", 0.5)
            check_ttft_model(binary, server)
            if os.path.exists(SHARED_TRACE):
                check_clean(bench(binary, server, "mooncake", "--trace", SHARED_TRACE, "--requests", "300",
                                  "--bytes-per-token", "8", "--verify", "full", "--protocol", "fast",
                                  "--unix", SOCK), "mooncake", 0.01)
        elif mode == "mismatch":
            check_clean(bench(binary, server, "m", *CONVERSATION, "--repeat", "1"), "m-store", 0.0)
            keys = sorted(k for k in server.call("KEYS", "check/m@*") if k)
            if len(keys) < 2:
                fail("expected the bench's keys on the server, found %r" % keys)
            # A wrong byte in the middle of one value, then a value cut short: each is caught
            # (exit status 1), and the run that rejects a chunk stores it again.
            value = bytearray(server.call("GET", keys[0]))
            value[len(value) // 2 + 3] ^= 0x01
            server.call("SET", keys[0], bytes(value))
            expect_mismatch(binary, server, "wrong byte at offset")
            server.call("SET", keys[1], server.call("GET", keys[1])[:-8])
            expect_mismatch(binary, server, "length")
            check_clean(bench(binary, server, "m", *CONVERSATION, "--repeat", "1"), "m-repaired", 0.99)
            # The same over the SDK (--protocol fast): a wrong byte, a short value, and a long
            # one (the SDK reports the server's window error; the bench counts a wrong length).
            fast = ["--protocol", "fast", "--unix", SOCK]
            value = bytearray(server.call("GET", keys[0]))
            value[len(value) // 3] ^= 0x80
            server.call("SET", keys[0], bytes(value))
            expect_mismatch(binary, server, "wrong byte at offset", *fast)
            server.call("SET", keys[1], server.call("GET", keys[1])[:-8])
            expect_mismatch(binary, server, "length", *fast)
            server.call("SET", keys[1], server.call("GET", keys[1]) + b"12345678")
            expect_mismatch(binary, server, "length", *fast)
            check_clean(bench(binary, server, "m", *CONVERSATION, "--repeat", "1", *fast), "m-repaired-fast",
                        0.99)
        else:
            fail("unknown mode " + mode)
    finally:
        server.stop()
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
