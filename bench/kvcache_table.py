#!/usr/bin/python3
"""Markdown tables of stratakv-bench JSON reports, side by side: one table per workload, one
column per target, and each stratakv figure as a ratio of Redis's; then the goals of issue 6,
and the modeled time to first token against issue 17's goal (when the reports have it).

usage: kvcache_table.py RUN.json...   (labels "workload/target", as kvcache-compare.sh sets)
"""

import json
import sys
from collections import OrderedDict

TARGETS = ["redis", "stratakv-resp", "stratakv-fast"]


def get(d, path, default=None):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


# (label, JSON path or function, format, better: "higher"/"lower"/None)
ROWS = [
    ("hit ratio (chunks)", lambda r: 100 * r["hit_ratio"]["chunks"], "%.1f%%", "higher"),
    ("load GB/s (while loading)", "throughput.load_gbps", "%.2f", "higher"),
    ("store GB/s (while storing)", "throughput.store_gbps", "%.2f", "higher"),
    ("prefix load per request p50 ms", "latency.prefix_load.p50_ms", "%.2f", "lower"),
    ("prefix load per request p99 ms", "latency.prefix_load.p99_ms", "%.2f", "lower"),
    ("lookup p99 ms", "latency.lookup.p99_ms", "%.2f", "lower"),
    ("modeled TTFT p50 ms", "latency.ttft.p50_ms", "%.1f", "lower"),
    ("modeled TTFT p99 ms", "latency.ttft.p99_ms", "%.1f", "lower"),
    ("modeled TTFT mean ms", "latency.ttft.mean_ms", "%.1f", "lower"),
    ("prompt tokens prefilled", lambda r: ttft_prefilled(r), "%.1f%%", "lower"),
    ("load batch p50 / p99 ms", None, None, None),
    ("store batch p50 / p99 ms", None, None, None),
    ("requests/s", "throughput.requests_per_s", "%.1f", "higher"),
    ("GB loaded / stored", None, None, None),
    ("run time s", "elapsed_s", "%.1f", "lower"),
    ("evicted keys (server)", lambda r: int(get(r, "server.evicted_keys", "0") or 0), "%d", None),
    ("server used_memory / RSS at end, MiB", None, None, None),
    ("checks", None, None, None),
]


def ttft_prefilled(run):
    """Percent of the prompt tokens prefilled (not served from the cache), or None."""
    c = run["counts"]
    if "prefill_tokens" not in c or not c.get("prompt_tokens"):
        return None
    return 100.0 * c["prefill_tokens"] / c["prompt_tokens"]


def value(run, row):
    label, src, fmt, _ = row
    if run is None:
        return None, ""
    if label.startswith("load batch"):
        return None, "%.1f / %.1f" % (get(run, "latency.load.p50_ms", 0), get(run, "latency.load.p99_ms", 0))
    if label.startswith("store batch"):
        return None, "%.1f / %.1f" % (get(run, "latency.store.p50_ms", 0), get(run, "latency.store.p99_ms", 0))
    if label.startswith("server used_memory"):
        um, rss = get(run, "server.used_memory", ""), get(run, "server.used_memory_rss", "")
        if not (um.isdigit() and rss.isdigit()):
            return None, "n/a"
        return None, "%.0f / %.0f" % (int(um) / 2**20, int(rss) / 2**20)
    if label.startswith("GB loaded"):
        c = run["counts"]
        return None, "%.1f / %.1f" % (c["bytes_loaded"] / 1e9, c["bytes_stored"] / 1e9)
    if label == "checks":
        c = run["counts"]
        n = c["verified_full"] + c["verified_sampled"]
        state = "ok" if run["ok"] else "**FAIL**"
        return None, "%s: %d/%d hits checked, %d mismatches, %d errors" % (state, n, c["hits"], c["mismatches"],
                                                                            c["errors"])
    v = src(run) if callable(src) else get(run, src)
    if v is None:
        return None, "n/a"
    return float(v), fmt % v


def ratio(a, b):
    if a is None or b is None or b == 0:
        return ""
    return "%.2fx" % (a / b)


def main(paths):
    runs = OrderedDict()  # workload -> target -> report
    for p in paths:
        try:
            with open(p) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print("(%s: %s)" % (p, e))
            continue
        workload, _, target = r.get("label", "").partition("/")
        runs.setdefault(workload or p, {})[target or r["config"]["protocol"]] = r
    goals = []
    for workload, by in runs.items():
        targets = [t for t in TARGETS if t in by] + [t for t in by if t not in TARGETS]
        any_run = next(iter(by.values()))
        cfg = any_run["config"]
        size = cfg["value_bytes"]
        desc = "%s, %s per value, %d requests" % (workload, human(size), any_run["counts"]["requests"])
        print("#### %s\n" % desc)
        head = ["metric"] + targets
        ratios = [t for t in targets if t != "redis" and "redis" in by]
        head += ["%s / redis" % t for t in ratios]
        print("| " + " | ".join(head) + " |")
        print("|---|" + "--:|" * (len(head) - 1))
        for row in ROWS:
            vals = [value(by[t], row) for t in targets]
            cells = [row[0]] + [v[1] for v in vals]
            base = value(by["redis"], row)[0] if "redis" in by else None
            cells += [ratio(value(by[t], row)[0], base) for t in ratios]
            print("| " + " | ".join(cells) + " |")
        print()
        if "redis" in by:
            goals.append((workload, by))
    if goals:
        print("#### Goals of issue 6 (measured, not asserted)\n")
        print("| workload | hit ratio vs redis | RESP load vs redis (goal >= 1.5x) | fast load vs redis (goal >= 4x) "
              "| p99 prefix load vs redis (goal <= 0.5x): resp, fast |")
        print("|---|---|--:|--:|---|")
        for workload, by in goals:
            r = by["redis"]
            hr = "%.1f%% vs %.1f%%" % (100 * get(by.get("stratakv-resp", by.get("stratakv-fast", r)), "hit_ratio.chunks"),
                                      100 * r["hit_ratio"]["chunks"])
            def rl(t, path):
                return ratio(get(by[t], path), get(r, path)) if t in by else "n/a"
            print("| %s | %s | %s | %s | %s, %s |" % (
                workload, hr, rl("stratakv-resp", "throughput.load_gbps"), rl("stratakv-fast", "throughput.load_gbps"),
                rl("stratakv-resp", "latency.prefix_load.p99_ms"), rl("stratakv-fast", "latency.prefix_load.p99_ms")))
        print()
    ttft = [(w, by) for w, by in goals if get(by["redis"], "latency.ttft.count")]
    if ttft:
        rate = get(ttft[0][1]["redis"], "config.prefill_tokens_per_s", 0)
        print("#### Modeled time to first token, goal of issue 17: p50 and p99 <= 0.5x redis "
              "(prefill %.0f tokens/s; measured, not asserted)\n" % rate)
        print("| workload | target | TTFT p50 ms | TTFT p99 ms | p50 vs redis | p99 vs redis |")
        print("|---|---|--:|--:|--:|--:|")
        for workload, by in ttft:
            r = by["redis"]
            for t in [t for t in TARGETS if t in by] + [t for t in by if t not in TARGETS]:
                p50, p99 = get(by[t], "latency.ttft.p50_ms", 0), get(by[t], "latency.ttft.p99_ms", 0)
                print("| %s | %s | %.1f | %.1f | %s | %s |" % (
                    workload, t, p50, p99, ratio(p50, get(r, "latency.ttft.p50_ms")) if t != "redis" else "",
                    ratio(p99, get(r, "latency.ttft.p99_ms")) if t != "redis" else ""))
        print()


def human(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    if n >= 1024 and n % 1024 == 0:
        return "%d KiB" % (n >> 10)
    return "%d B" % n


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
