#!/usr/bin/env python3
"""The training recipe of the binary against PyTorch (issue 41, docs/TRAINING.md).

Three checks, each on a tiny configuration that trains in seconds:

  schedules   every schedule's per-step learning rate in --json "lrs" against
              an independent formula (recipe_reference.schedule_lr), against
              torch's LambdaLR driven by it, and cosine after its warm-up
              against nanoGPT's get_lr (lr_decay_iters = all steps), where the
              two coincide: relative 1e-12 (the binary reports the double it
              computed; the update rounds it to float as torch's fp32 AdamW
              does)
  recipe      warm-up + cosine + clipping + 4-step accumulation + matrices-
              only weight decay + beta2 0.95 for 30 steps: the per-step loss
              and gradient norm against a float64 replay with
              torch.optim.AdamW (two parameter groups), LambdaLR,
              clip_grad_norm_ and loss / 4 backward per micro-batch:
              relative 1e-5 (fp32); under --amp the binary's error may be
              2x autocast's own plus one unit of the compute dtype, as in
              test_parity.py
  accumulate  4 micro-batches of B2 against one batch of B8 (the same rows):
              the per-step losses and gradient norms of the two binary runs
              over 20 steps, relative 1e-5 (fp32 only)

Exit status: 0 all pass, 1 a check failed, 2 the binary failed.
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

from parity_binary import BinaryFailure, arrays, binary_command, run_binary
from parity_config import AMP_DTYPES, AMP_FACTOR, CONFIGS, TOL_FP32
from parity_reference import amp_floor, autocast_device, autocast_works
from recipe_reference import lambdalr_rates, nanogpt_lr, recipe_replay, schedule_lr

CFG = dict(CONFIGS["gqa"], batch=2)
RECIPE = dict(schedule="cosine", lr=2e-3, min_lr=2e-4, warmup=5, total=30, decay_steps=0,
              clip=0.85, accum=4, weight_decay=0.1, matrices_only=True, betas=(0.9, 0.95),
              eps=1e-8)


def recipe_flags(r):
    flags = ["--learning-rate", repr(r["lr"]), "--lr-schedule", r["schedule"],
             "--lr-warmup-steps", str(r["warmup"]), "--weight-decay", repr(r["weight_decay"]),
             "--adam-beta1", repr(r["betas"][0]), "--adam-beta2", repr(r["betas"][1]),
             "--adam-eps", repr(r["eps"])]
    if r["schedule"] != "constant":
        flags += ["--min-lr", repr(r["min_lr"])]
    if r["schedule"] == "wsd":
        flags += ["--lr-decay-steps", str(r["decay_steps"])]
    if r["clip"] > 0:
        flags += ["--grad-clip", repr(r["clip"])]
    else:
        flags += ["--log-grad-norm"]
    if r["accum"] > 1:
        flags += ["--grad-accum-steps", str(r["accum"])]
    if r["matrices_only"]:
        flags += ["--decay-params", "matrices"]
    return flags


def train(args, cfg, recipe, workdir):
    cmd = binary_command(args, cfg, workdir, recipe["total"]) + recipe_flags(recipe)
    return run_binary(cmd, cfg, workdir, timeout=600)


def rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-30)))


def check(name, err, tol, failures):
    ok = err <= tol
    print("  %-44s %.3g (limit %.3g) %s" % (name, err, tol, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(name)


def check_schedules(args, tmp, failures):
    print("schedules")
    cases = [dict(RECIPE, schedule="cosine", accum=1, clip=0, total=24, warmup=4),
             dict(RECIPE, schedule="linear", accum=1, clip=0, total=24, warmup=0),
             dict(RECIPE, schedule="wsd", accum=1, clip=0, total=24, warmup=3, decay_steps=6),
             dict(RECIPE, schedule="constant", accum=1, clip=0, total=12, warmup=5)]
    for i, r in enumerate(cases):
        out = train(args, CFG, r, os.path.join(tmp, "schedule%d" % i))
        got = out["report"]["lrs"]
        formula = [schedule_lr(s, r) for s in range(r["total"])]
        label = "%s, %d warm-up" % (r["schedule"], r["warmup"])
        check(label + ": binary vs formula", rel(got, formula), 1e-12, failures)
        check(label + ": binary vs LambdaLR", rel(got, lambdalr_rates(r)), 1e-12, failures)
        if r["schedule"] == "cosine":
            nano = [nanogpt_lr(s, r["lr"], r["min_lr"], r["warmup"], r["total"])
                    for s in range(r["warmup"], r["total"])]
            check(label + ": binary vs nanoGPT (after warm-up)", rel(got[r["warmup"]:], nano),
                  1e-12, failures)


def step_batches(out):
    batches = arrays(out["batches"])
    return [batches["step%d" % (s + 1)] for s in range(len(batches))]


def check_recipe(args, tmp, failures):
    print("recipe: %s" % " ".join(recipe_flags(RECIPE)))
    out = train(args, CFG, RECIPE, os.path.join(tmp, "recipe"))
    init = arrays(out["init"])
    batches = step_batches(out)
    losses, norms, _ = recipe_replay(init, batches, CFG, RECIPE)
    got_losses = out["report"]["losses"]
    got_norms = out["report"]["grad_norms"]
    clipped = sum(1 for n in norms if n > RECIPE["clip"])
    print("  %d of %d steps clipped (norm above %g)" % (clipped, len(norms), RECIPE["clip"]))
    if clipped == 0 or clipped == len(norms):
        failures.append("recipe: the run must clip some steps and not others")
        print("  FAIL: the check needs steps on both sides of the clip")
    if args.amp == "none":
        check("loss per step (30)", rel(got_losses, losses), TOL_FP32, failures)
        check("grad norm per step (30)", rel(got_norms, norms), TOL_FP32, failures)
        return
    # The bar under --amp: PyTorch autocast's own error on the same run.
    device = autocast_device(args.device)
    dtype = AMP_DTYPES[args.amp]
    if not autocast_works(device, dtype):
        print("  this torch cannot autocast %s on %s" % (args.amp, device))
        sys.exit(2)
    ac_losses, ac_norms, _ = recipe_replay(init, batches, CFG, RECIPE, dtype=torch.float32,
                                           device=device, autocast=dtype)
    floor = amp_floor(args.amp)
    for name, got, ref, ac in (("loss", got_losses, losses, ac_losses),
                               ("grad norm", got_norms, norms, ac_norms)):
        limit = AMP_FACTOR * rel(ac, ref) + floor
        print("  autocast's %s error %.3g" % (name, rel(ac, ref)))
        check("%s per step (30), %s" % (name, args.amp), rel(got, ref), limit, failures)


def check_accumulation(args, tmp, failures):
    print("accumulation: 4 x B2 against 1 x B8, 20 steps")
    plain = dict(RECIPE, schedule="constant", warmup=0, clip=0, accum=1, total=20,
                 matrices_only=False, weight_decay=0.01, betas=(0.9, 0.999), lr=3e-4)
    one = train(args, dict(CFG, batch=8), plain, os.path.join(tmp, "b8"))
    four = train(args, CFG, dict(plain, accum=4), os.path.join(tmp, "b2x4"))
    same_rows = all(np.array_equal(a, b) for a, b in zip(step_batches(one), step_batches(four)))
    if not same_rows:
        failures.append("accumulation: the two runs drew different rows")
        print("  FAIL: the two runs drew different rows")
    check("loss per step", rel(four["report"]["losses"], one["report"]["losses"]), TOL_FP32,
          failures)
    check("grad norm per step", rel(four["report"]["grad_norms"], one["report"]["grad_norms"]),
          TOL_FP32, failures)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", default="none", choices=["none"] + sorted(AMP_DTYPES))
    parser.add_argument("--extra-args", default="", help="more flags for every run (a level)")
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if args.amp == "none":
                check_schedules(args, tmp, failures)
            check_recipe(args, tmp, failures)
            if args.amp == "none":  # the equivalence is an fp32 claim (issue 41)
                check_accumulation(args, tmp, failures)
        except BinaryFailure as e:
            print("the binary failed: %s" % e)
            return 2
    print("FAIL: " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
