#!/usr/bin/env python3
"""Issue 44's checks on a device run (scripts/counters-check):

1. tinyllama's counters (kernel_stats.csv of a --profile-counters run, one
   counter step) against ncu's on the same kernels: per kernel name, the
   counter step's mean per launch beside ncu's median launch; within 5 %.
2. The memory-bound ops' measured DRAM bytes (summary.json, counters.ops)
   against the cost model's minimal bytes; within 10 %.

usage: counters_vs_ncu.py compare PROFILE_DIR [PROFILE_DIR ...] NCU_CSV
"""
import csv
import io
import json
import os
import statistics
import sys
from collections import defaultdict

OURS = {  # ncu metric -> kernel_stats.csv column, and whether it is per launch (bytes) or a %
    "dram__bytes_read.sum": ("DramReadBytes", True),
    "dram__bytes_write.sum": ("DramWriteBytes", True),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("OccupancyPct", False),
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": ("TensorActivePct", False),
}
MEMORY_BOUND = ("adamw", "rmsnorm", "swiglu", "loss")


def base_name(name):
    """'void ns::(anonymous namespace)::kern<float, 64>(float*, int)' -> 'kern': the
    function's own name, which both tools print alike (ncu shortens namespaces
    its own way: 'flash::<unnamed>::kern<...>')."""
    name = name.removeprefix("void ").replace("(anonymous namespace)", "anon").strip()
    depth, out = 0, []
    for ch in name:  # drop template arguments and the parameter list
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip()


def read_ours(profile_dir):
    rows = {}
    with open(os.path.join(profile_dir, "kernel_stats.csv")) as f:
        for r in csv.DictReader(f):
            if r.get("CounterLaunches"):
                rows[r["Name"]] = r
    return rows


def read_ncu(path):
    text = open(path).read()
    start = text.find('"ID"')
    values = defaultdict(lambda: defaultdict(list))
    for r in csv.DictReader(io.StringIO(text[start:])):
        try:
            v = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        values[r["Kernel Name"]][r["Metric Name"]].append(v)
    return values


def compare_ncu(ours, ncu):
    by_base = defaultdict(list)
    for name in ours:
        by_base[base_name(name)].append(name)
    print(f"{'kernel':<60} {'metric':<34} {'tinyllama':>14} {'ncu':>14} {'ratio':>6}")
    worst = 0.0
    compared = 0
    for ncu_name, metrics in sorted(ncu.items()):
        name = ncu_name if ncu_name in ours else None
        if name is None and len(by_base.get(base_name(ncu_name), [])) == 1:
            name = by_base[base_name(ncu_name)][0]
        if name is None:
            continue
        r = ours[name]
        launches = float(r["CounterLaunches"])
        for metric, (column, per_launch) in OURS.items():
            if metric not in metrics or not r.get(column):
                continue
            mine = float(r[column]) / (launches if per_launch else 1.0)
            theirs = statistics.median(metrics[metric])
            if theirs == 0 and mine == 0:
                continue
            ratio = mine / theirs if theirs else float("inf")
            # Byte counts under 1 MB per launch are noise either way (a few lines of L2).
            if not per_launch or theirs >= 1e6:
                worst = max(worst, abs(ratio - 1))
                compared += 1
            short = metric.split(".")[0]
            print(f"{name[:60]:<60} {short:<34} {mine:>14.6g} {theirs:>14.6g} {ratio:>6.3f}")
    if compared == 0:
        print(f"no kernel compared: none of ncu's {len(ncu)} kernels matched one of the "
              f"profile's {len(ours)} kernels with counters")
        return False
    print(f"worst |ratio - 1| over {compared} values (bytes >= 1 MB per launch, and every %): "
          f"{100 * worst:.1f} % ({'within' if worst <= 0.05 else 'OUTSIDE'} 5 %)")
    return worst <= 0.05


def compare_model(profile_dir):
    s = json.load(open(os.path.join(profile_dir, "summary.json")))
    c = s.get("counters", {})
    print(f"\n{profile_dir}: clocks {s.get('clocks', {}).get('sm_mhz_median')} MHz; counters: "
          f"{c.get('passes')} passes, counter step {c.get('counter_step_ms')} ms, matched "
          f"{c.get('matched')} {c.get('note', '')}")
    if not c.get("available"):
        print("  no counters:", c.get("note"))
        return
    print(f"  {'op':<34} {'DRAM MB':>10} {'model MB':>10} {'ratio':>6}")
    for o in c.get("ops", []):
        if not any(k in o["op"] for k in MEMORY_BOUND):
            continue
        ratio = o.get("dram_bytes_over_model")
        flag = "" if ratio is None or abs(ratio - 1) <= 0.10 else "  (> 10 %)"
        print(f"  {o['op']:<34} {o['counters']['dram_bytes'] / 1e6:>10.2f} "
              f"{o['model_bytes'] / 1e6:>10.2f} {ratio if ratio is None else round(ratio, 3)!s:>6}{flag}")


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "compare":
        sys.exit(__doc__)
    profiles, ncu_csv = sys.argv[2:-1], sys.argv[-1]
    ok = False
    if os.path.exists(ncu_csv) and os.path.exists(os.path.join(profiles[0], "kernel_stats.csv")):
        ok = compare_ncu(read_ours(profiles[0]), read_ncu(ncu_csv))
    else:
        print("no comparison with ncu: its CSV or the profile's kernel_stats.csv is missing")
    for p in profiles:
        if os.path.exists(os.path.join(p, "summary.json")):
            compare_model(p)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
