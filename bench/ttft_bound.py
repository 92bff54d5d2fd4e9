#!/usr/bin/python3
"""The modeled time to first token of a Mooncake trace under an unbounded cache: the floor that
no cache can beat on it (stratakv-bench's model, bench/kvbench/ttft.h, with zero load time).

A request's block j is cached when an earlier request had the same first j+1 hash ids (the
bench chains the keys that way); its prefill is input_length minus the blocks of its cached
prefix. Prints the prefill p50/p99 in tokens and in ms at the rate, the share of prompt tokens
prefilled, and the same with no cache at all.

usage: ttft_bound.py TRACE [--requests N] [--block-tokens 512] [--prefill-tokens-per-s 10000]
"""

import argparse
import json
import math


def quantile(sorted_vals, q):
    """The bench's rank rule: the smallest value with at least ceil(q * n) values at or below."""
    return sorted_vals[max(1, math.ceil(q * len(sorted_vals))) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--requests", type=int, default=0, help="first N requests (0 = all)")
    ap.add_argument("--block-tokens", type=int, default=512)
    ap.add_argument("--prefill-tokens-per-s", type=float, default=10000)
    a = ap.parse_args()
    seen, prefill, prompt = set(), [], []
    with open(a.trace) as f:
        for n, line in enumerate(f):
            if a.requests and n >= a.requests:
                break
            r = json.loads(line)
            ids = r["hash_ids"]
            tokens = r.get("input_length") or len(ids) * a.block_tokens
            k = 0
            while k < len(ids) and tuple(ids[:k + 1]) in seen:
                k += 1
            seen.update(tuple(ids[:j + 1]) for j in range(len(ids)))
            prefill.append(max(0, tokens - k * a.block_tokens))
            prompt.append(tokens)
    ms = 1000.0 / a.prefill_tokens_per_s
    for name, vals in (("unbounded cache", prefill), ("no cache", prompt)):
        s = sorted(vals)
        print("%-16s prefill p50 %6d tokens (%7.1f ms), p99 %6d tokens (%7.1f ms); %.1f%% of prompt tokens"
              % (name, quantile(s, 0.5), quantile(s, 0.5) * ms, quantile(s, 0.99), quantile(s, 0.99) * ms,
                 100.0 * sum(vals) / sum(prompt)))


if __name__ == "__main__":
    main()
