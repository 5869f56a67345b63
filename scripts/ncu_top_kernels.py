#!/usr/bin/env python3
"""Sums an `ncu --metrics gpu__time_duration.sum --csv` log by kernel name and
prints the top kernels per training step: calls, GPU time, share.

Until the built-in profiler exists this is how docs/PERFORMANCE.md's
"where the time goes" tables are made.
"""
import argparse
import csv
import io
from collections import defaultdict


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv_log")
    p.add_argument("--steps", type=int, default=1, help="training steps the log covers")
    p.add_argument("--top", type=int, default=10)
    a = p.parse_args()
    text = open(a.csv_log).read()
    start = text.find('"ID"')  # ncu prints its own notes before the CSV header
    rows = csv.DictReader(io.StringIO(text[start:]))
    total_ns = defaultdict(float)
    calls = defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6}.get(r.get("Metric Unit", ""), 1.0)
        name = r["Kernel Name"][:90]
        total_ns[name] += float(r["Metric Value"].replace(",", "")) * scale
        calls[name] += 1
    grand = sum(total_ns.values()) or 1.0
    print(f"kernels per step: {sum(calls.values()) / a.steps:.0f}, unique: {len(calls)}, "
          f"GPU time per step: {grand / a.steps / 1e6:.3f} ms (kernels serialised by ncu)")
    print(f"{'kernel':<90} {'calls/step':>10} {'ms/step':>9} {'share':>6}")
    for name, ns in sorted(total_ns.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{name:<90} {calls[name] / a.steps:>10.0f} {ns / a.steps / 1e6:>9.3f} {100 * ns / grand:>5.1f}%")


if __name__ == "__main__":
    main()
