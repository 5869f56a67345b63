#!/usr/bin/env python3
"""Prints tinyllama's --json reports and the PyTorch peer's JSON lines as one
table: ms/step, samples/s and peak memory side by side, and tinyllama's SM
clock over its timed steps where the GPU was sampled.

Peak memory is shown in MiB for both (the peer reports
torch.cuda.max_memory_allocated / 2**20; tinyllama's peak_mb is in 1e6 bytes).
"""
import json
import os
import sys


def rows_from(path):
    if not os.path.exists(path):
        return []
    if path.endswith(".jsonl"):
        out = []
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "error" in r:
                out.append((f"pytorch {r['variant']}", r["amp"], None, None, None, r["error"][:40]))
            else:
                out.append((f"pytorch {r['variant']}", r["amp"], r["ms_per_step"], r["samples_per_s"],
                            r["peak_mb"], ""))
        return out
    r = json.load(open(path))
    cfg = r.get("config", {})
    level = cfg.get("level", "?")
    precision = cfg.get("precision", "?")
    amp = {"fp32": "fp32", "amp_bfloat16": "bf16", "amp_float16": "fp16"}.get(precision, precision)
    name = f"tinyllama {level}" + (" graph" if r.get("execution") == "cuda_graph" else "")
    wall = r.get("wall_ms_per_step")
    note = f"loss {r['final_loss']:.4f}" + (f", wall {wall:.3f} ms/step" if wall else "")
    clocks = r.get("clocks") or {}
    if "sm_mhz_median" in clocks:  # the clock the timed steps held, and how often the cap held it
        capped = clocks.get("reasons_pct", {}).get("power cap", 0.0)
        note += f", SM {clocks['sm_mhz_median']:.0f} MHz (power-capped {capped:.0f} %)"
    return [(name, amp, r["ms_per_step"], r["samples_per_s"], r["peak_mb"] * 1e6 / 2**20, note)]


def main():
    rows = [row for path in sys.argv[1:] for row in rows_from(path)]
    print(f"{'run':<22} {'prec':<5} {'ms/step':>9} {'samples/s':>10} {'peak MiB':>9}  note")
    for name, amp, ms, sps, peak, note in sorted(rows, key=lambda r: (r[1], r[0])):
        fmt = lambda v, spec: format(v, spec) if v is not None else "-"
        print(f"{name:<22} {amp:<5} {fmt(ms, '9.3f'):>9} {fmt(sps, '10.1f'):>10} {fmt(peak, '9.1f'):>9}  {note}")


if __name__ == "__main__":
    main()
