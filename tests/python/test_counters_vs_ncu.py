#!/usr/bin/env python3
"""scripts/counters_vs_ncu.py on made-up files: launches matched to ncu's
launch by launch (the last step's, by the kernel's own name, however each
tool spells its namespaces and templates), the 5 % verdict both ways, the
DRAM bytes judged from ncu's flushed run and occupancy from its unflushed
one (--warm), a DRAM pass's in-step bytes from the unflushed run and its
replayed reads from the flushed one, and the memory-bound ops judged
against the cost model."""
import csv
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "counters_vs_ncu.py")
COLUMNS = ["Index", "Kernel", "Op", "dram_read_bytes", "dram_write_bytes", "occupancy_pct",
           "tensor_active_pct"]
# Two launches of one GEMM at two shapes, and a norm: what the counter step read.
# The GEMM's shapes differ: matched by name in order, a pairing off by one
# launch would compare 40 MB with 8 MB.
OURS = [("nvjet_gemm", "forward/layer0/qkv_gemm", 40e6, 10e6, 50.0, 80.0),
        ("void tinyllama::(anonymous namespace)::rmsnorm_kernel<float>(float*)",
         "forward/layer0/attn_norm", 20e6, 20e6, 90.0, 0.0),
        ("nvjet_gemm", "forward/layer0/out_gemm", 8e6, 2e6, 50.0, 70.0)]


def write_profile(d, dram_pass=False):
    """dram_pass: a profile whose DRAM pass read half of what the replayed
    passes read (the inputs half in L2), as ncu's unflushed run does below."""
    with open(os.path.join(d, "counter_launches.csv"), "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(COLUMNS + (["dram_read_replayed_bytes"] if dram_pass else []))
        for i, (name, op, read, write, occ, tensor) in enumerate(OURS):
            if dram_pass:
                w.writerow([i, name, op, read * 0.5, write, occ, tensor, read])
            else:
                w.writerow([i, name, op, read, write, occ, tensor])
    ops = [{"op": "forward/attn_norm", "dram_read_replayed_bytes": 20e6, "model_read_bytes": 19e6,
            "reads_over_model": 20 / 19, "dram_write_bytes": 20e6, "model_write_bytes": 19e6,
            "writes_over_model": 20 / 19, "model": {"bound": "memory"}},
           {"op": "forward/qkv_gemm", "dram_read_replayed_bytes": 40e6, "model_read_bytes": 16e6,
            "reads_over_model": 2.5, "dram_write_bytes": 10e6, "model_write_bytes": 4e6,
            "writes_over_model": 2.5, "model": {"bound": "compute"}}]
    step_writes = {"dram_write_bytes": 30e6, "model_write_bytes": 23e6, "ratio": 30 / 23}
    json.dump({"counters": {"available": True, "passes": 5, "ops": ops,
                            "step_writes": step_writes}},
              open(os.path.join(d, "summary.json"), "w"))


def write_ncu(path, scale, occupancy_scale=1.0):
    """Two steps: the first with an autotuning trial GEMM, the second as ours
    but for a GEMM algorithm of its own at the last launch (not comparable);
    DRAM reads times `scale`, occupancy times `occupancy_scale`."""
    launches = [("nvjet_gemm", 1e9, 1e9, 10.0, 10.0)]  # a trial: must not be matched
    steps = OURS * 2
    steps[-1] = ("nvjet_other_gemm", *steps[-1][1:])
    for name, _, read, write, occ, tensor in steps:
        name = name.replace("(anonymous namespace)", "<unnamed>").replace("tinyllama::", "")
        launches.append((name, read * scale, write, occ * occupancy_scale, tensor))
    lines = ['==PROF== Connected to process', '"ID","Kernel Name","Metric Name","Metric Value"']
    metrics = ["dram__bytes_read.sum", "dram__bytes_write.sum",
               "sm__warps_active.avg.pct_of_peak_sustained_active",
               "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]
    for i, (name, *values) in enumerate(launches):
        for m, v in zip(metrics, values):
            lines.append(f'"{i}","{name}","{m}","{v:,.1f}"')
    open(path, "w").write("\n".join(lines) + "\n")


def run(profile, ncu, warm=None):
    return subprocess.run([sys.executable, SCRIPT, "compare", profile, ncu] +
                          (["--warm", warm] if warm else []), capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as d:
        write_profile(d)
        same, off = os.path.join(d, "same.csv"), os.path.join(d, "off.csv")
        write_ncu(same, 1.0)
        write_ncu(off, 1.08)  # ncu reads 8 % more: outside 5 %
        good, bad = run(d, same), run(d, off)
        # Flushed, ncu's occupancy 20 % low; unflushed, right, but its DRAM
        # reads half (a replay pass finding the inputs in L2): each metric
        # judged from its run passes, the flushed run alone does not.
        cold, warm = os.path.join(d, "cold.csv"), os.path.join(d, "warm.csv")
        write_ncu(cold, 1.0, occupancy_scale=0.8)
        write_ncu(warm, 0.5)
        cold_only, both = run(d, cold), run(d, cold, warm)
        off_with_warm = run(d, off, warm)
        # A DRAM-pass profile: its in-step reads (half) judged against the
        # unflushed run, its replayed reads against the flushed one.
        pass_dir = os.path.join(d, "dram_pass")
        os.mkdir(pass_dir)
        write_profile(pass_dir, dram_pass=True)
        pass_both, pass_flushed_only = run(pass_dir, same, warm), run(pass_dir, same)
        pass_against_warm_as_flushed = run(pass_dir, warm, warm)
    failures = []
    if good.returncode != 0 or "2 launches matched" not in good.stdout:
        failures.append("same counters should pass with 2 launches matched:\n" + good.stdout +
                        good.stderr)
    if "(within 5 %)" not in good.stdout:
        failures.append("no 'within 5 %' verdict:\n" + good.stdout)
    if bad.returncode == 0 or "OUTSIDE 5 %" not in bad.stdout:
        failures.append("8 % more bytes under ncu should fail:\n" + bad.stdout + bad.stderr)
    if cold_only.returncode == 0:
        failures.append("20 % low occupancy in the flushed run alone should fail:\n" +
                        cold_only.stdout)
    if both.returncode != 0 or "without the cache flush" not in both.stdout:
        failures.append("occupancy from the unflushed run, DRAM from the flushed, should pass:\n" +
                        both.stdout + both.stderr)
    if off_with_warm.returncode == 0:
        failures.append("the flushed run's 8 % more bytes should fail whatever the warm run "
                        "says:\n" + off_with_warm.stdout)
    if pass_both.returncode != 0 or "dram_read_replayed_bytes" not in pass_both.stdout:
        failures.append("a DRAM-pass profile, each read against its ncu run, should pass:\n" +
                        pass_both.stdout + pass_both.stderr)
    if pass_flushed_only.returncode != 0:
        failures.append("without an unflushed run the in-step reads must not be judged against "
                        "the flushed one:\n" + pass_flushed_only.stdout + pass_flushed_only.stderr)
    if pass_against_warm_as_flushed.returncode == 0:
        failures.append("the replayed reads against an unflushed run's half reads should fail:\n" +
                        pass_against_warm_as_flushed.stdout)
    if "memory-bound ops: worst |reads / model - 1| 5.3 %" not in good.stdout:
        failures.append("the norm's reads (memory-bound, 1.053) alone should be judged:\n" +
                        good.stdout)
    if "writes over the step: 30.00 MB against the model's 23.00 MB, 1.304  (> 10 %)" \
            not in good.stdout:
        failures.append("the step's writes should be judged together:\n" + good.stdout)
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
