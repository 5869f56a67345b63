#!/usr/bin/env python3
"""Issue 44's checks on a device run (scripts/counters-check):

1. tinyllama's counters (counter_launches.csv of a --profile-counters run)
   against ncu's on the same kernels, launch by launch (ncu ran the same
   plan, eager, in a process of its own): per kernel and metric the median
   ratio over its launches; within 5 %. Each of our columns is judged
   against the ncu run that measures the same thing:
   - a profile with a DRAM pass (a dram_read_replayed_bytes column): its
     DRAM reads and writes (the step as it runs, no replay) against ncu's
     run without the cache flush (--warm), byte for byte the same L2
     state; its replayed reads (each kernel's inputs from DRAM) against
     ncu's flushed run;
   - a profile without one: the reads against the flushed run, the writes
     shown, not judged (CUPTI's replay adds the write-back of its memory
     restore; docs/PROFILING.md);
   - occupancy and the tensor pipe against the run without the flush where
     one is given, since CUPTI's replay flushes nothing and a cold start
     stretches a short kernel's timeline (a split-K GEMM's tensor pipe: 68 %
     flushed against 83 % in CUPTI, 89.97 % unflushed against 88.69).
2. Every op's measured DRAM bytes (summary.json, counters.ops) beside the
   cost model's minimal bytes: the replayed reads (every input from DRAM,
   as the model counts) op by op, the memory-bound ones within 10 %; the
   writes shown op by op and judged over the step, since L2 holds what a
   kernel writes past its end and writes it back during later kernels.

usage: counters_vs_ncu.py compare PROFILE_DIR [PROFILE_DIR ...] NCU_CSV[,NCU_CSV ...]
                            [--warm NCU_CSV[,NCU_CSV ...]]
(the i-th ncu CSV is compared with the i-th profile; --warm: the runs
without the cache flush)
"""
import csv
import io
import json
import os
import statistics
import sys
from collections import defaultdict

OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
TENSOR = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
BYTES_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")


def comparisons(dram_pass, have_warm):
    """(our column, ncu metric, ncu run: 'flushed' or 'warm', judged)."""
    rest = "warm" if have_warm else "flushed"
    shape = [("occupancy_pct", OCCUPANCY, rest, True), ("tensor_active_pct", TENSOR, rest, True)]
    if dram_pass:
        in_step = [("dram_read_bytes", "dram__bytes_read.sum", "warm", True),
                   ("dram_write_bytes", "dram__bytes_write.sum", "warm", True)]
        return ([("dram_read_replayed_bytes", "dram__bytes_read.sum", "flushed", True)] +
                (in_step if have_warm else []) + shape)
    return [("dram_read_bytes", "dram__bytes_read.sum", "flushed", True),
            ("dram_write_bytes", "dram__bytes_write.sum", "flushed", False)] + shape


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
    """The counter step's launches, in launch order (counter_launches.csv)."""
    with open(os.path.join(profile_dir, "counter_launches.csv")) as f:
        return list(csv.DictReader(f))


def read_ncu(path):
    """ncu's launches in launch order: [(kernel name, {metric: value})]."""
    text = open(path).read()
    start = text.find('"ID"')
    launches = {}
    for r in csv.DictReader(io.StringIO(text[start:])):
        try:
            v = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        launches.setdefault(int(r["ID"]), (r["Kernel Name"], {}))[1][r["Metric Name"]] = v
    return [launches[i] for i in sorted(launches)]


def pairs_by_launch(ours, ncu):
    """Our counter step's launches against ncu's last as many (its run's last
    step: the first step's GEMM autotuning trials come before it), one for
    one in launch order, where both name the same kernel. A launch whose
    kernel differs (the two processes' GEMM autotuning chose another
    algorithm there) is not compared."""
    if len(ncu) < len(ours):
        return [], len(ours)
    pairs = []
    for row, (name, metrics) in zip(ours, ncu[-len(ours):]):
        if base_name(row["Kernel"]) == base_name(name):
            pairs.append((row, metrics))
    return pairs, len(ours) - len(pairs)


def significant(metric, mine, theirs):
    """Byte counts under 1 MB a launch and percentages under 5 are noise
    either way (a few lines of L2; a pipe all but idle in a kernel that
    issues no tensor work): shown, not judged."""
    floor = 1e6 if metric in BYTES_METRICS else 5.0
    return max(mine, theirs) >= floor


def metric_ratios(pairs, warm_pairs, compared):
    """(kernel, our column, judged) -> [(mine, ncu's)], each from its ncu run."""
    ratios = defaultdict(list)
    runs = {"flushed": pairs, "warm": warm_pairs or []}
    for column, metric, run, judged in compared:
        for row, metrics in runs[run]:
            if metric in metrics and row.get(column):
                ratios[(row["Kernel"], column, metric, judged)].append(
                    (float(row[column]), metrics[metric]))
    return ratios


def compare_ncu(ours, ncu, warm=None):
    pairs, differ = pairs_by_launch(ours, ncu)
    warm_pairs = pairs_by_launch(ours, warm)[0] if warm is not None else None
    dram_pass = bool(ours) and bool(ours[0].get("dram_read_replayed_bytes"))
    compared = comparisons(dram_pass, warm_pairs is not None)
    ratios = metric_ratios(pairs, warm_pairs, compared)
    print(f"{len(pairs)} launches matched to ncu's, launch by launch "
          f"(of {len(ours)} in the counter step, {len(ncu)} under ncu; {differ} ran another "
          f"kernel there)")
    if warm_pairs is not None:
        print(f"from ncu's run without the cache flush ({len(warm_pairs)} launches matched): " +
              ", ".join(c for c, _, run, _ in compared if run == "warm"))
    print(f"{'kernel':<60} {'tinyllama column':<28} {'n':>4} {'tinyllama':>12} {'ncu':>12} "
          f"{'median':>6} {'worst':>6}")
    worst_median = 0.0
    judged = 0
    for (kernel, column, metric, is_judged), values in sorted(ratios.items()):
        kept = [(m, t) for m, t in values if significant(metric, m, t)]
        if not kept:
            continue
        rs = [m / t if t else float("inf") for m, t in kept]
        med = statistics.median(rs)
        worst = max(rs, key=lambda r: abs(r - 1))
        if is_judged:
            worst_median = max(worst_median, abs(med - 1))
            judged += 1
        print(f"{kernel[:60]:<60} {column[:28]:<28} {len(kept):>4} "
              f"{statistics.median(m for m, _ in kept):>12.6g} "
              f"{statistics.median(t for _, t in kept):>12.6g} {med:>6.3f} {worst:>6.3f}"
              f"{'' if is_judged else '  (shown, not judged)'}")
    if judged == 0:
        print(f"no kernel compared: none of ncu's {len(ncu)} launches matched one of the "
              f"counter step's {len(ours)}")
        return False
    ok = worst_median <= 0.05
    print(f"worst |median ratio - 1| over {judged} judged kernel-metric pairs: "
          f"{100 * worst_median:.1f} % "
          f"({'within' if ok else 'OUTSIDE'} 5 %)")
    return ok


def compare_model(profile_dir):
    s = json.load(open(os.path.join(profile_dir, "summary.json")))
    c = s.get("counters", {})
    print(f"\n{profile_dir}: clocks {s.get('clocks', {}).get('sm_mhz_median')} MHz; counters: "
          f"{c.get('passes')} passes, counter step {c.get('counter_step_ms')} ms, matched "
          f"{c.get('matched')} {c.get('note', '')}")
    if not c.get("available"):
        print("  no counters:", c.get("note"))
        return
    print(f"  {'op':<40} {'read MB':>9} {'model':>9} {'ratio':>6} {'write MB':>9} {'model':>9} "
          f"{'ratio':>6}  bound (model)")
    worst = 0.0
    rounded = lambda r: "-" if r is None else round(r, 3)
    for o in c.get("ops", []):
        ratio = o.get("reads_over_model")
        bound = (o.get("model") or {}).get("bound", "-")
        flag = ""
        if bound == "memory" and ratio is not None:
            worst = max(worst, abs(ratio - 1))
            flag = "" if abs(ratio - 1) <= 0.10 else "  (reads > 10 %)"
        print(f"  {o['op']:<40} {o['dram_read_replayed_bytes'] / 1e6:>9.2f} "
              f"{o['model_read_bytes'] / 1e6:>9.2f} {rounded(ratio)!s:>6} "
              f"{o['dram_write_bytes'] / 1e6:>9.2f} {o['model_write_bytes'] / 1e6:>9.2f} "
              f"{rounded(o.get('writes_over_model'))!s:>6}  {bound}{flag}")
    print(f"  memory-bound ops: worst |reads / model - 1| {100 * worst:.1f} %")
    w = c.get("step_writes")
    if w:
        ratio = w.get("ratio")
        print(f"  writes over the step: {w['dram_write_bytes'] / 1e6:.2f} MB against the model's "
              f"{w['model_write_bytes'] / 1e6:.2f} MB, {rounded(ratio)}"
              f"{'' if ratio is not None and abs(ratio - 1) <= 0.10 else '  (> 10 %)'}")


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "compare":
        sys.exit(__doc__)
    args = sys.argv[2:]
    warm_csvs = []
    if "--warm" in args:
        at = args.index("--warm")
        warm_csvs = args[at + 1].split(",")
        args = args[:at] + args[at + 2:]
    profiles, ncu_csvs = args[:-1], args[-1].split(",")
    ok = True
    for i, (profile, path) in enumerate(zip(profiles, ncu_csvs)):
        warm = warm_csvs[i] if i < len(warm_csvs) and os.path.exists(warm_csvs[i]) else None
        print(f"\n== {profile} against {path}" + (f" and {warm}" if warm else ""))
        if os.path.exists(path) and os.path.exists(os.path.join(profile, "counter_launches.csv")):
            ok = compare_ncu(read_ours(profile), read_ncu(path),
                             read_ncu(warm) if warm else None) and ok
        else:
            print("no comparison with ncu: its CSV or the profile's counter_launches.csv is missing")
            ok = False
    for p in profiles:
        if os.path.exists(os.path.join(p, "summary.json")):
            compare_model(p)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
