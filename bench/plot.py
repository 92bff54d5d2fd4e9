#!/usr/bin/python3
"""Charts of stratakv-bench JSON reports (Debian's python3-matplotlib), as PNG files:

  <prefix>-throughput.png      load and store GB/s by value size, one line per target
  <prefix>-latency.png         per-request prefix-load time p50 and p99 by value size
  <prefix>-hitratio-<w>.png    hit ratio over the run under memory pressure, per workload w:
                               in a sliding window against time, and cumulative against
                               requests served (targets run at different speeds)

Runs are grouped by their label "workload/target" (kvcache-compare.sh sets it); the by-size
charts use the workloads whose runs differ only in value size (conv-1m, conv-8m, ...).

usage: plot.py [--out-dir DIR] [--prefix NAME] RUN.json...
"""

import argparse
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["redis", "stratakv-resp", "stratakv-fast"]
STYLE = {"redis": ("#c0392b", "o"), "stratakv-resp": ("#2471a3", "s"), "stratakv-fast": ("#1e8449", "^")}


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        workload, _, target = r.get("label", "").partition("/")
        r["_workload"] = workload or os.path.splitext(os.path.basename(p))[0]
        r["_target"] = target or r["config"]["protocol"]
        runs.append(r)
    return runs


def targets_of(runs):
    seen = {r["_target"] for r in runs}
    return [t for t in ORDER if t in seen] + sorted(seen - set(ORDER))


def style(target):
    return STYLE.get(target, (None, "d"))


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    if n >= 1024 and n % 1024 == 0:
        return "%d KiB" % (n >> 10)
    return "%d B" % n


def by_size(runs):
    """target -> sorted [(value_bytes, run)] for the conversation workloads."""
    out = defaultdict(list)
    for r in runs:
        if r["config"]["mode"] == "conversation":
            out[r["_target"]].append((r["config"]["value_bytes"], r))
    for t in out:
        out[t].sort(key=lambda x: x[0])
    return out


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(s) for s in sizes])
    ax.set_xlabel("value size (one 256-token chunk)")
    ax.grid(True, which="major", alpha=0.3)


def plot_throughput(runs, path, subtitle):
    series = by_size(runs)
    if not series:
        return False
    sizes = sorted({s for v in series.values() for s, _ in v})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in ((axes[0], "load_gbps", "prefix load (hit chunks)"),
                           (axes[1], "store_gbps", "store (missing chunks)")):
        for t in targets_of(runs):
            if t not in series:
                continue
            color, marker = style(t)
            xs = [s for s, _ in series[t]]
            ys = [r["throughput"][key] for _, r in series[t]]
            ax.plot(xs, ys, marker=marker, color=color, label=t)
        size_axis(ax, sizes)
        ax.set_ylabel("GB/s while loading" if key == "load_gbps" else "GB/s while storing")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle("KV-cache workload throughput by value size" + subtitle)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_latency(runs, path, subtitle):
    series = by_size(runs)
    if not series:
        return False
    sizes = sorted({s for v in series.values() for s, _ in v})
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for t in targets_of(runs):
        if t not in series:
            continue
        color, marker = style(t)
        xs = [s for s, _ in series[t]]
        ax.plot(xs, [r["latency"]["prefix_load"]["p99_ms"] for _, r in series[t]], marker=marker, color=color,
                label=t + " p99")
        ax.plot(xs, [r["latency"]["prefix_load"]["p50_ms"] for _, r in series[t]], marker=marker, color=color,
                linestyle="--", alpha=0.7, label=t + " p50")
    size_axis(ax, sizes)
    ax.set_yscale("log")
    ax.set_ylabel("prefix-load time per request, ms (log)")
    ax.set_title("Prefix-load time (lookup + loading every hit chunk)" + subtitle, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def interval_ratio(timeline):
    """(t, hit ratio of the chunks asked in a sliding window) for windows with requests; the
    window spans about 1/40 of the run (at least one sampling interval), to smooth the noise."""
    k = max(1, len(timeline) // 40)
    pts = []
    for i in range(k, len(timeline)):
        a, b = timeline[i - k], timeline[i]
        chunks = b["chunks"] - a["chunks"]
        if chunks > 0:
            pts.append((b["t"], 100.0 * (b["hits"] - a["hits"]) / chunks))
    return pts


def plot_hitratio(runs, workload, path, subtitle):
    group = [r for r in runs if r["_workload"] == workload and r.get("timeline")]
    if not group:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for t in targets_of(group):
        for r in (r for r in group if r["_target"] == t):
            color, _ = style(t)
            pts = interval_ratio(r["timeline"])
            if pts:
                axes[0].plot([p[0] for p in pts], [p[1] for p in pts], color=color, label=t, linewidth=1.2)
            tl = [s for s in r["timeline"] if s["chunks"] > 0]
            axes[1].plot([s["requests"] for s in tl], [100.0 * s["hits"] / s["chunks"] for s in tl], color=color,
                         label="%s (final %.1f%%)" % (t, 100 * r["hit_ratio"]["chunks"]))
    axes[0].set_xlabel("seconds since start")
    axes[0].set_ylabel("hit ratio in a sliding window, % of chunks")
    axes[0].set_title("over time")
    axes[1].set_xlabel("requests served")
    axes[1].set_ylabel("cumulative hit ratio, % of chunks")
    axes[1].set_title("over the requests")
    for ax in axes:
        ax.set_ylim(0, 100)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    r0 = group[0]
    mem = r0.get("server", {}).get("maxmemory", "")
    mem = " maxmemory %.0f MiB," % (int(mem) / 2**20) if mem.isdigit() and int(mem) else ""
    fig.suptitle("Hit ratio under memory pressure: %s,%s %s values%s" % (
        workload, mem, size_label(r0["config"]["value_bytes"]), subtitle))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--prefix", default="kvcache")
    ap.add_argument("--subtitle", default="", help="appended to every title, e.g. a date")
    ap.add_argument("--hitratio-workloads", default="",
                    help="comma-separated workloads to chart the hit ratio of (default: every one)")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    runs = load(a.runs)
    os.makedirs(a.out_dir, exist_ok=True)
    sub = (" (" + a.subtitle + ")") if a.subtitle else ""
    written = []
    p = os.path.join(a.out_dir, a.prefix + "-throughput.png")
    if plot_throughput(runs, p, sub):
        written.append(p)
    p = os.path.join(a.out_dir, a.prefix + "-latency.png")
    if plot_latency(runs, p, sub):
        written.append(p)
    workloads = [w for w in a.hitratio_workloads.split(",") if w] or sorted({r["_workload"] for r in runs})
    for w in workloads:
        p = os.path.join(a.out_dir, "%s-hitratio-%s.png" % (a.prefix, w))
        if plot_hitratio(runs, w, p, sub):
            written.append(p)
    for p in written:
        print(p)
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
