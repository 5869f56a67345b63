#!/usr/bin/env python3
"""Whole-run parity of the tinyllama binary against an independent PyTorch model.

For each of a few tiny configurations the binary trains 3 steps with
--dump-dir, writing its initial weights, the token batches it drew and the
step-1 gradients, and then 1 step in a second run. A float64 PyTorch
implementation of DESIGN.md section 1 (autograd for the gradients,
torch.optim.AdamW for the update) replays the same run on the CPU and the
script compares (metric max|binary - ref| / max|ref| per tensor, ref fp64):

  check          binary                     reference              tol
  loss step1..3  report.json "losses"       the replay's losses    1e-5
  grad step1     grads_step1.safetensors    autograd               1e-5
  weight step3   --save-weights             the replay's weights   1e-5
  adamw step1    the 1-step run's weights   one fp64 AdamW step    1e-4
                 from that run's own init and dumped gradients; metric:
                 error beyond 2 fp32 ulps / the largest update

Under --amp (bfloat16 or float16) a fixed tolerance cannot judge the
binary: a low-precision result's error depends on the shapes, the
magnitudes and the reduction lengths of each tensor. The script then also
trains the same run with PyTorch's torch.autocast (fp32 parameters and
AdamW, the same initial weights and batches, fp16 with GradScaler's first
loss scale 2^16 like tinyllama's LossScaler) and measures that run's error
against fp64 with the same metric. Each run is compared with its own fp64
replay (step 1's update from its own gradients), so step 1's losses and
gradients have one reference for both. The limits, per quantity:

  loss step t, grad step1   binary error <= 2 x autocast error + floor
  weight step3              within the AdamW bound (adam_error_scale, below)
                            of gradients that err by the tensor's grad
                            step1 limit; 1e-5 for the fp32 weights' own
                            rounding
  adamw step1               1e-4 as above (fp32 master weights and state)

floor = torch.finfo(dtype).eps, 2^-7 (bf16) or 2^-10 (fp16): one unit in
the last place of the compute dtype at a tensor's largest element,
relative to it (for bf16 between 2^-8 and 2^-7 depending on where that
element sits in its binade; the bound is taken). It is the resolution of
the compute dtype at the tensor's scale: every checked value is computed
from operands stored in that dtype, and a correct implementation that
rounds one intermediate differently (another summation order landing on
the neighbouring value) is that far off. Where autocast's own error is
far below it (a scalar loss whose rounding errors cancel, a value autocast
keeps in fp32), twice autocast's error alone would fail correct code. The
factor 2 leaves room for tinyllama's own precision placement
(autocast_replay lists where the two differ).

The weights after 3 steps are not held to 2x autocast's weight error
directly: after step 1 each run's largest weight error sits on the few
elements whose Adam update is ill-conditioned, so the ratio of two such
maxima swings both ways (from 0.2 to 5 when both placements were emulated
by rounding after each op in PyTorch) and only a floor that swallows
3 steps of movement would absorb it. The bound asks instead that the
weights lie within what gradients inside their limit can produce through
AdamW, so the weight limit follows from the same 2x rule; autocast's
weight error against the same bound is printed beside it.
--self-check runs this comparison on runs made with CPU autocast, the
binary's part included (no binary, no GPU; CTest pytorch_parity_amp_selfcheck).

Why the weight checks look the way they do: AdamW's update m/(sqrt(v)+eps)
is nearly sign(g) where the gradient is near zero, so rounding far inside
the gradient tolerance can flip an element's update by 2 lr; a correct
fp32 run does that to about one element in a few thousand, and the flipped
weights then shift later gradients by up to 5e-4 of their max. A naive
3-step replay therefore fails correct fp32 code by two orders of magnitude.
The replay instead takes step 1's update from the binary's own (already
checked) gradients, which removes the step-1 flips, and scales the rare
elements still ill-conditioned at steps 2 and 3 by their Adam sensitivity
(adam_error_scale). Weight decay is 3e-6 of a weight per step, too little
to see after 3 steps at 1e-5, hence the exact one-step check.

The reference always runs in float64 on the CPU, so the one script checks
the CPU and the CUDA backends, every level and toggle (--extra-args).
Runs with Debian's python3-torch 1.13 as well as torch 2.x: no pytest, no
safetensors package, no F.scaled_dot_product_attention.

Exit status: 0 all checks pass, 1 a check failed, 2 the binary failed or
did not produce its outputs, or (--amp) this torch cannot run the autocast
that the limits are measured with.
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

from parity_config import (AMP_DTYPES, AMP_FACTOR, CONFIGS, FP16_LOSS_SCALE, NUM_STEPS, TOL_ADAMW,
                           TOL_FP32)
from parity_reference import (adamw_first_step, amp_floor, autocast_device, autocast_replay,
                              autocast_works, expected_shapes)
from parity_binary import BinaryFailure, binary_command, run_binary
from parity_compare import (Report, check_reproducible, check_structure, compare_amp,
                            compare_config, ratio_str, short_name, verdict)


def fabricated_runs(cfg, amp, device, seed=5):
    """A 3-step and a 1-step "binary" run that are the autocast replay itself."""
    rng = np.random.default_rng(seed)
    init = {t: (np.ones(shape) if len(shape) == 1 else rng.normal(0.0, 0.02, shape))
            for t, shape in expected_shapes(cfg).items()}
    batches = [rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1)).astype(np.int32)
               for _ in range(NUM_STEPS)]
    losses, grads, final = autocast_replay(init, batches, cfg, amp, device)

    def f32(tensors):
        return {t: ("F32", np.asarray(a, dtype=np.float32)) for t, a in tensors.items()}

    def run(steps, final, loss_list):
        return {"init": f32(init), "grads_step1": f32(grads[0]), "final": f32(final),
                "batches": {"step%d" % (i + 1): ("I32", batches[i]) for i in range(steps)},
                "report": {"losses": list(loss_list)}}
    return (run(NUM_STEPS, final, losses),
            run(1, adamw_first_step(f32_arrays(init), grads[0]), losses[:1]))


def f32_arrays(tensors):
    return {t: np.asarray(a, dtype=np.float32) for t, a in tensors.items()}


def perturb(run, loss_step, grad_tensor, weight_tensor):
    """A copy of run with one loss, one gradient element and one weight element off by 5 %."""
    bad = {key: dict(value) for key, value in run.items()}
    bad["report"] = {"losses": list(run["report"]["losses"])}
    bad["report"]["losses"][loss_step - 1] *= 1.05
    for key, t in (("grads_step1", grad_tensor), ("final", weight_tensor)):
        a = run[key][t][1].copy()
        a.flat[0] += 0.05 * np.max(np.abs(a))
        bad[key][t] = ("F32", a)
    return bad


def self_check_amp():
    """--self-check: the --amp comparison on fabricated runs; no binary, no GPU.

    The "binary" is the autocast replay itself, so every ratio is 1 and all
    checks must pass; with one loss, one gradient and one weight pushed 5 %
    off, those must fail (the gradient's may take its weight along: the
    replay's step 1 follows the binary's gradients). Runs wherever torch's
    autocast supports the dtype on the CPU (bf16; fp16 from torch 2.x).
    """
    name, cfg = "mqa", CONFIGS["mqa"]
    k_proj = "model.layers.1.self_attn.k_proj.weight"
    up_proj = "model.layers.2.mlp.up_proj.weight"
    status = 0
    for amp in AMP_DTYPES:
        if not autocast_works("cpu", AMP_DTYPES[amp]):
            print("self-check %s: skipped, CPU autocast lacks it in torch %s"
                  % (amp, torch.__version__))
            continue
        run, one_step = fabricated_runs(cfg, amp, "cpu")
        print("self-check %s, the autocast replay as the binary: all must pass" % amp)
        good = Report()
        compare_amp(good, name, cfg, run, one_step, amp, "cpu")
        print("self-check %s, loss step2, grad %s, weight %s 5 %% off: those must fail"
              % (amp, short_name(k_proj), short_name(up_proj)))
        bad = Report()
        compare_amp(bad, name, cfg, perturb(run, 2, k_proj, up_proj), one_step, amp, "cpu")
        failed = {f.split(":")[0] for f in bad.failures}
        must = {"%s loss step2" % name, "%s grad %s" % (name, k_proj),
                "%s weight %s" % (name, up_proj)}
        may = must | {"%s weight %s" % (name, k_proj)}
        ok = not good.failures and must <= failed <= may
        print("self-check %s: %s (clean run: %d failures; perturbed run failed %s)"
              % (amp, verdict(ok), len(good.failures), sorted(failed)))
        status = status or (0 if ok else 1)
    return status


def amp_setup(args):
    """Print what --amp compares with; return autocast's device, or None if it cannot run."""
    device = autocast_device(args.device)
    dtype = AMP_DTYPES[args.amp]
    if device != args.device:
        print("note: this torch has no CUDA; autocast runs on the CPU, whose op lists "
              "differ from CUDA's (softmax stays %s)" % args.amp)
    if not autocast_works(device, dtype):
        print("\nERROR: torch %s cannot run torch.autocast(%r, %s), which the %s limits "
              "are measured with; use a torch that can (with CUDA for float16)"
              % (torch.__version__, device, args.amp, args.amp))
        return None
    print("bar: torch.autocast(%r, %s), fp32 weights and AdamW%s, same init and batches"
          % (device, args.amp, ", loss scale %g" % FP16_LOSS_SCALE
             if args.amp == "float16" else ""))
    print("limits: binary error <= %g x autocast error + %.2e (one %s ulp at the max) for "
          "losses and step-1 grads (max|a-b|/max|b| against fp64);"
          % (AMP_FACTOR, amp_floor(args.amp), args.amp))
    print("        weight step%d: the AdamW bound of the grad limit (|a-b| per element, "
          "%g for the fp32 weights); one adamw step %g; ratio = binary / autocast"
          % (NUM_STEPS, TOL_FP32, TOL_ADAMW))
    return device


def print_failures(report):
    print("FAIL: %d of %d checks failed:" % (len(report.failures), report.count))
    for f in report.failures[:20]:
        print("  " + f)
    if len(report.failures) > 20:
        print("  ... and %d more" % (len(report.failures) - 20))


def amp_summary(report):
    """One line: the worst binary/autocast ratio per kind, the check nearest its limit."""
    ratios = ", ".join("%s %s" % (kind, ratio_str(report.worst_ratio[kind][0]))
                       for kind in ("loss", "grad", "weight") if kind in report.worst_ratio)
    worst = ", ".join("%s: %s" % (kind, report.worst_ratio[kind][1])
                      for kind in ("grad", "weight") if kind in report.worst_ratio)
    share, label = report.worst_share or (0.0, "none")
    return ("worst binary/autocast ratio %s (%s); nearest its limit: %s at %.3g of it"
            % (ratios, worst, label, share))


def print_summary(report, configs, amp):
    print()
    if amp == "none":
        if report.failures:
            print_failures(report)
            return 1
        print("PASS: %d checks over %d configs; worst %s"
              % (report.count, configs,
                 ", ".join("%.2e (tol %g)" % (w, t) for t, w in sorted(report.worst.items()))))
        return 0
    # gpu-check shows the last line: it carries the verdict and the ratios.
    if report.failures:
        print_failures(report)
        print("FAIL (%s): %d of %d checks; %s"
              % (amp, len(report.failures), report.count, amp_summary(report)))
        return 1
    print("PASS (%s): %d checks over %d configs; %s"
          % (amp, report.count, configs, amp_summary(report)))
    return 0


def main():
    parser = argparse.ArgumentParser(
        description="Check the tinyllama binary against a float64 PyTorch replay "
                    "(losses, step-1 gradients, weights after %d AdamW steps)." % NUM_STEPS)
    parser.add_argument("--binary", help="the tinyllama executable")
    parser.add_argument("--self-check", action="store_true",
                        help="check the --amp comparison itself on fabricated runs "
                             "(CPU autocast, no binary) and exit")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="passed to the binary; the reference always runs on the CPU")
    parser.add_argument("--amp", choices=("none", "bfloat16", "float16"), default="none",
                        help="run the binary with --use-amp --amp-dtype AMP; the limits are "
                             "%g x torch.autocast's own error + one ulp" % AMP_FACTOR)
    parser.add_argument("--extra-args", default="",
                        help="appended to the binary's command line, e.g. "
                             "'--version v1 --enable-qkv-fusion' (not the flags set here: "
                             "the last occurrence wins)")
    parser.add_argument("--workdir", default=None,
                        help="where the binary writes its dumps, kept afterwards "
                             "(default: a temporary directory, removed)")
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=None,
                        help="subset of configurations (default: all)")
    parser.add_argument("--tol", type=float, default=None,
                        help="override the fp32 tolerance (default %g)" % TOL_FP32)
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds allowed per binary run")
    args = parser.parse_args()
    if args.self_check:
        return self_check_amp()
    if not args.binary:
        parser.error("--binary is required")
    if args.tol is not None and args.amp != "none":
        parser.error("--tol sets the fp32 tolerance; under --amp the limits come from autocast")

    tol = args.tol if args.tol is not None else TOL_FP32
    names = args.configs or list(CONFIGS)
    print("tinyllama parity: binary=%s device=%s amp=%s extra-args=%r torch=%s"
          % (args.binary, args.device, args.amp, args.extra_args, torch.__version__))
    if args.amp == "none":
        print("tolerances: losses, grads, weights %g (max|a-b|/max|b|); one adamw step %g"
              % (tol, TOL_ADAMW))
    else:
        amp_device = amp_setup(args)
        if amp_device is None:
            return 2

    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="tinyllama_parity_")
        root = tmp.name
    else:
        root = os.path.abspath(args.workdir)
    report = Report()
    try:
        for name in names:
            cfg = CONFIGS[name]
            print("\n[%s] V=%d D=%d L=%d H=%d K=%d F=%d S=%d B=%d hd=%d seed=%d"
                  % (name, cfg["vocab"], cfg["dim"], cfg["layers"], cfg["heads"],
                     cfg["kv_heads"], cfg["ffn"], cfg["seq"], cfg["batch"],
                     cfg["dim"] // cfg["heads"], cfg["seed"]))
            # The NUM_STEPS run is the replay target; the one-step run's
            # weights isolate AdamW, driven by the binary's own gradients.
            runs = {}
            try:
                for steps, sub in ((NUM_STEPS, name), (1, name + "_1step")):
                    workdir = os.path.join(root, sub)
                    runs[steps] = run_binary(binary_command(args, cfg, workdir, steps), cfg,
                                             workdir, args.timeout)
            except BinaryFailure as e:
                print("\nERROR: the binary failed on config %s: %s" % (name, e))
                return 2
            if not (check_structure(report, name, runs[NUM_STEPS], cfg, NUM_STEPS)
                    and check_structure(report, name + " 1-step", runs[1], cfg, 1)
                    and check_reproducible(report, name, runs[NUM_STEPS], runs[1])):
                continue
            if args.amp == "none":
                compare_config(report, name, cfg, runs[NUM_STEPS], runs[1], tol)
            else:
                compare_amp(report, name, cfg, runs[NUM_STEPS], runs[1], args.amp, amp_device)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return print_summary(report, len(names), args.amp)


if __name__ == "__main__":
    sys.exit(main())
