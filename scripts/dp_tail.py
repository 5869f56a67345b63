#!/usr/bin/env python3
"""Where a data-parallel step's time goes after its last compute kernel of
the backward pass: reads a --profile trace.json (docs/PROFILING.md) and,
for each profiled step, prints the GPU work from the end of the last
backward-pass compute kernel to the step's end -- NCCL kernels (which
bucket's exchange or gather, by the op they were attributed to), the
optimizer's kernels and the gaps -- so that the step's exposed tail is
named, not guessed.

Usage: scripts/dp_tail.py TRACE.json [--steps N] [--top K]
"""
import argparse
import json
import sys


def kernels(trace):
    out = []
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        if e.get("cat") != "kernel":
            continue
        args = e.get("args") or {}
        start = args.get("true_start_us", e["ts"])
        dur = args.get("true_duration_us", e["dur"])
        out.append({"name": e["name"], "start": start, "end": start + dur, "op": args.get("op", ""),
                    "tid": e.get("tid"), "nccl": e["name"].lower().startswith("nccl")})
    return sorted(out, key=lambda k: k["start"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    trace = json.load(open(a.trace))
    ks = kernels(trace)
    if not ks:
        sys.exit("no kernels in " + a.trace)
    # A step on the GPU: from one "forward" kernel run to the next. The ops
    # name their phase in the attributed path (forward/..., backward/...).
    bounds, prev = [], None
    for k in ks:
        if k["op"].startswith("forward") and (prev is None or not prev["op"].startswith("forward")):
            bounds.append(k["start"])
        if k["op"]:
            prev = k
    bounds.append(max(k["end"] for k in ks))
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        step = [k for k in ks if lo <= k["start"] < hi]
        bwd = [k for k in step if k["op"].startswith("backward") and not k["nccl"]]
        if not bwd:
            continue
        end_bwd = max(k["end"] for k in bwd)
        last = max(k["end"] for k in step)
        tail = [k for k in step if k["end"] > end_bwd]
        print("step %d: %.2f ms; last backward compute kernel ends at %.2f ms, the step's last work at %.2f "
              "ms: tail %.2f ms" % (i + 1, (hi - lo) / 1e3, (end_bwd - lo) / 1e3, (last - lo) / 1e3,
                                   (last - end_bwd) / 1e3))
        for k in tail[:a.top]:
            print("   %8.2f-%8.2f ms  %-6s %-44s %s" % (
                (max(k["start"], end_bwd) - lo) / 1e3, (k["end"] - lo) / 1e3,
                "NCCL" if k["nccl"] else "", k["op"][:44], k["name"][:60]))
        if len(tail) > a.top:
            print("   ... %d more" % (len(tail) - a.top))


if __name__ == "__main__":
    main()
