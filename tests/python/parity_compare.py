"""The checks: error metrics, the report, and the fp32 and --amp
comparisons of a binary run with its references."""

import math
import time

import numpy as np

from parity_config import AMP_FACTOR, NUM_STEPS, TOL_ADAMW, TOL_FP32
from parity_reference import (adam_error_scale, adamw_first_step, amp_floor, autocast_replay,
                              expected_shapes, replay)
from parity_binary import arrays


# --------------------------------------------------------------------------
# Checks.


def rel_err(actual, ref, scale=None):
    """max|a - b| / max|b| (b the reference), or max(|a - b| / scale) elementwise."""
    actual = np.asarray(actual, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(actual)):
        return float("inf")
    if ref.size == 0:
        return 0.0
    diff = np.abs(actual - ref)
    if scale is None:
        scale = np.max(np.abs(ref))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff == 0.0, 0.0, diff / scale)
    return float(np.max(ratio))


def adamw_err(actual, ref, init):
    """Error of one AdamW step in units of the largest update, rounding excused.

    The binary keeps fp32 weights, so its result may sit up to an ulp or two
    from the exact one (w * (1 - lr wd) and the update are rounded apart);
    that much is forgiven. What is left is compared with max|ref - init|,
    the update's scale: a missing weight decay (0.01 * |w| of it), a wrong
    bias correction or eps shows at 1e-3 or more, rounding at 1e-7.
    """
    ref = np.asarray(ref, dtype=np.float64)
    rounding = 2.0 * np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    excess = np.maximum(np.abs(np.asarray(actual, dtype=np.float64) - ref) - rounding, 0.0)
    if not np.all(np.isfinite(excess)):
        return float("inf")
    update = np.max(np.abs(ref - init))
    if update == 0.0:
        return 0.0 if not np.any(excess) else float("inf")
    return float(np.max(excess) / update)


def group_of(name):
    """model.layers.3.self_attn.q_proj.weight -> self_attn.q_proj (all layers pooled)."""
    parts = name.split(".")
    if parts[0] == "model":
        parts = parts[1:]
    if parts[0] == "layers":
        parts = parts[2:]
    if parts[-1] == "weight":
        parts = parts[:-1]
    return ".".join(parts)


class Report:
    """Counts checks and remembers the failures for the summary."""

    def __init__(self):
        self.failures = []
        self.count = 0
        self.worst = {}  # tolerance -> worst passing metric
        self.worst_ratio = {}  # --amp: kind -> (worst binary/autocast ratio, label)
        self.worst_share = None  # --amp: (worst binary error / limit, label)

    def record(self, label, metric, tol):
        self.count += 1
        if metric <= tol:
            self.worst[tol] = max(self.worst.get(tol, 0.0), metric)
            return True
        self.failures.append("%s: %.3g > %g" % (label, metric, tol))
        return False

    def record_amp(self, label, kind, error, autocast, limit):
        """An --amp check: the binary's error against its limit, autocast's beside it."""
        self.count += 1
        ratio = amp_ratio(error, autocast)
        if kind not in self.worst_ratio or ratio > self.worst_ratio[kind][0]:
            self.worst_ratio[kind] = (ratio, label)
        share = error / limit if limit > 0.0 else float("inf")
        if self.worst_share is None or share > self.worst_share[0]:
            self.worst_share = (share, label)
        if error <= limit:
            return True
        self.failures.append("%s: %.3g > limit %.3g (autocast %.3g, ratio %s)"
                             % (label, error, limit, autocast, ratio_str(ratio)))
        return False

    def fail(self, label, why):
        self.count += 1
        self.failures.append("%s: %s" % (label, why))
        print("  FAIL %s: %s" % (label, why))


def verdict(ok):
    return "ok" if ok else "FAIL"


def amp_ratio(error, autocast):
    if autocast > 0.0:
        return error / autocast
    return 0.0 if error == 0.0 else float("inf")


def ratio_str(ratio):
    return "%.2f" % ratio if math.isfinite(ratio) else "inf"


def check_structure(report, label, outputs, cfg, steps):
    """The dumps must hold exactly the expected tensors; False skips the numbers."""
    shapes = expected_shapes(cfg)
    good = True
    for key in ("init", "grads_step1", "final"):
        got = outputs[key]
        missing = sorted(set(shapes) - set(got))
        extra = sorted(set(got) - set(shapes))
        if missing or extra:
            report.fail("%s %s.safetensors names" % (label, key),
                        "missing %s, unexpected %s" % (missing, extra))
            good = False
            continue
        for t, shape in shapes.items():
            if tuple(got[t][1].shape) != shape:
                report.fail("%s %s %s" % (label, key, t),
                            "shape %s, expected %s" % (list(got[t][1].shape), list(shape)))
                good = False
    # Weights that were never initialised would match a reference replayed
    # from the same zeros: refuse such a vacuous run.
    for t, (_, a) in outputs["init"].items():
        if not np.all(np.isfinite(a)) or not np.any(a):
            report.fail("%s init %s" % (label, t), "all zeros or not finite")
            good = False
    batches = outputs["batches"]
    want = ["step%d" % (i + 1) for i in range(steps)]
    if sorted(batches) != want:
        report.fail("%s batches.safetensors names" % label,
                    "got %s, expected %s" % (sorted(batches), want))
        return False
    for key in want:
        dtype, rows = batches[key]
        if dtype != "I32" or tuple(rows.shape) != (cfg["batch"], cfg["seq"] + 1):
            report.fail("%s batches %s" % (label, key),
                        "%s %s, expected I32 %s"
                        % (dtype, list(rows.shape), [cfg["batch"], cfg["seq"] + 1]))
            good = False
        elif rows.min() < 0 or rows.max() >= cfg["vocab"]:
            report.fail("%s batches %s" % (label, key), "token out of [0, vocab)")
            good = False
    losses = outputs["report"].get("losses")
    if not isinstance(losses, list) or len(losses) != steps:
        report.fail("%s report.json losses" % label,
                    "expected a list of %d losses, got %r" % (steps, losses))
        good = False
    # The fp64 replay applies every AdamW update; an fp16 step skipped for
    # overflow would make the comparison meaningless, so it is refused.
    skipped = [r.get("step") for r in outputs["report"].get("steps", []) if r.get("skipped")]
    if skipped:
        report.fail("%s report.json steps" % label,
                    "steps %s were skipped for fp16 overflow; the replay needs every update"
                    % skipped)
        good = False
    return good


def check_reproducible(report, name, run, one_step):
    """Same seed, same init and first batch: DESIGN draws both on the host."""
    for key, what in (("init", "initial weights"), ("batches", "step-1 batch")):
        a, b = arrays(run[key]), arrays(one_step[key])
        names = [t for t in b if t in a]
        if not all(np.array_equal(a[t], b[t]) for t in names):
            report.fail("%s %s" % (name, what), "differ between two runs with the same seed")
            return False
    return True


def compare_config(report, name, cfg, run, one_step, tol):
    """Replay `run` (NUM_STEPS steps) in fp64 and compare everything."""
    init = arrays(run["init"])
    batches = [run["batches"]["step%d" % (i + 1)][1] for i in range(NUM_STEPS)]
    t0 = time.time()
    grads = arrays(run["grads_step1"])
    ref_losses, ref_grads, ref_final = replay(init, batches, cfg, step1_grads=grads)
    ref_adamw = adamw_first_step(arrays(one_step["init"]), arrays(one_step["grads_step1"]))
    print("  reference replay (fp64, cpu): %.2f s" % (time.time() - t0))

    for step, (got, want) in enumerate(zip(run["report"]["losses"], ref_losses), start=1):
        metric = rel_err(got, want)
        ok = report.record("%s loss step%d" % (name, step), metric, tol)
        print("  %-26s binary %.7f ref %.7f %9.2e %s"
              % ("loss step%d" % step, got, want, metric, verdict(ok)))

    final = arrays(run["final"])
    one_init, one_final = arrays(one_step["init"]), arrays(one_step["final"])
    groups = {}
    for t in expected_shapes(cfg):
        groups.setdefault(group_of(t), []).append(t)
    print("  %-26s %-15s %-15s %-15s" % ("tensor (worst layer)", "grad step1",
                                         "weight step%d" % NUM_STEPS, "adamw step1"))
    for group, tensors in groups.items():
        worst = [0.0, 0.0, 0.0]
        ok = [True, True, True]
        for t in tensors:
            scale = adam_error_scale([grads[t]] + [g[t] for g in ref_grads[1:]],
                                     ref_final[t], tol)
            checks = (("grad", rel_err(grads[t], ref_grads[0][t]), tol),
                      ("weight", rel_err(final[t], ref_final[t], scale), tol),
                      ("adamw", adamw_err(one_final[t], ref_adamw[t], one_init[t]), TOL_ADAMW))
            for i, (kind, metric, limit) in enumerate(checks):
                ok[i] = report.record("%s %s %s" % (name, kind, t), metric, limit) and ok[i]
                worst[i] = max(worst[i], metric)
        print("  %-26s %s" % (group, " ".join("%9.2e %-5s" % (w, verdict(o))
                                              for w, o in zip(worst, ok))))


def short_name(tensor):
    """model.layers.0.self_attn.q_proj.weight -> layers.0.self_attn.q_proj."""
    return tensor[len("model."):-len(".weight")]


AMP_CELL = "%8s %8s %7s %-4s"  # binary error, autocast error, ratio, verdict


def amp_cell(report, label, kind, error, autocast, limit):
    ok = report.record_amp(label, kind, error, autocast, limit)
    return AMP_CELL % ("%.2e" % error, "%.2e" % autocast, ratio_str(amp_ratio(error, autocast)),
                       verdict(ok))


def amp_row(name, limit, *cells):
    """One table line: a quantity, its limit, then a cell per check."""
    return "  %-33s %8s | %s" % (name, limit, " | ".join(cells))


def amp_weight_errors(tensor, runs, limit):
    """Weights after the steps, each run against its own replay, in the AdamW bound.

    runs: (step-1 grads, final weights, replay()) of the binary, then of
    autocast. The bound lets every gradient err by `limit` (the tensor's
    grad step1 limit) and the fp32 master weights by TOL_FP32.
    """
    errors = []
    for grads1, final, (_, ref_grads, ref_final) in runs:
        steps = [grads1[tensor]] + [g[tensor] for g in ref_grads[1:]]
        scale = adam_error_scale(steps, ref_final[tensor], limit, plain=TOL_FP32)
        errors.append(rel_err(final[tensor], ref_final[tensor], scale))
    return errors


def compare_amp(report, name, cfg, run, one_step, amp, device):
    """--amp: every check against PyTorch autocast's own error on the same run."""
    init = arrays(run["init"])
    batches = [run["batches"]["step%d" % (i + 1)][1] for i in range(NUM_STEPS)]
    grads, final = arrays(run["grads_step1"]), arrays(run["final"])
    t0 = time.time()
    ac_losses, ac_grads, ac_final = autocast_replay(init, batches, cfg, amp, device)
    t1 = time.time()
    # One fp64 replay per run, each taking step 1's update from that run's
    # own gradients (module docstring); their step 1 is the same.
    ref = replay(init, batches, cfg, step1_grads=grads)
    ref_ac = replay(init, batches, cfg, step1_grads=ac_grads[0])
    ref_adamw = adamw_first_step(arrays(one_step["init"]), arrays(one_step["grads_step1"]))
    print("  autocast replay (%s, %s): %.2f s; reference replays (fp64, cpu): %.2f s"
          % (device, amp, t1 - t0, time.time() - t1))

    floor = amp_floor(amp)
    header = AMP_CELL % ("binary", "autocast", "ratio", "")
    print(amp_row("", "limit", header, header))
    for step, (got, want) in enumerate(zip(run["report"]["losses"], ref[0]), start=1):
        ac = rel_err(ac_losses[step - 1], ref_ac[0][step - 1])
        limit = AMP_FACTOR * ac + floor
        label = "loss step%d" % step
        print(amp_row(label, "%.2e" % limit, amp_cell(
            report, "%s %s" % (name, label), "loss", rel_err(got, want), ac, limit)))

    width = len(header)
    print(amp_row("tensor", "", "%-*s" % (width, "grad step1"), "weight step%d" % NUM_STEPS))
    worst_adamw, adamw_ok = 0.0, True
    one_init, one_final = arrays(one_step["init"]), arrays(one_step["final"])
    for t in expected_shapes(cfg):
        ac = rel_err(ac_grads[0][t], ref[1][0][t])
        limit = AMP_FACTOR * ac + floor
        grad = amp_cell(report, "%s grad %s" % (name, t), "grad",
                        rel_err(grads[t], ref[1][0][t]), ac, limit)
        weight_b, weight_a = amp_weight_errors(
            t, ((grads, final, ref), (ac_grads[0], ac_final, ref_ac)), limit)
        weight = amp_cell(report, "%s weight %s" % (name, t), "weight", weight_b, weight_a, limit)
        print(amp_row(short_name(t), "%.2e" % limit, grad, weight))
        metric = adamw_err(one_final[t], ref_adamw[t], one_init[t])
        adamw_ok = report.record("%s adamw %s" % (name, t), metric, TOL_ADAMW) and adamw_ok
        worst_adamw = max(worst_adamw, metric)
    print("  adamw step1 (fp32, the binary's own gradients): worst %.2e, tol %g %s"
          % (worst_adamw, TOL_ADAMW, verdict(adamw_ok)))
