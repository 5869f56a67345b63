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
import json
import math
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

# DESIGN.md section 1 constants.
RMS_EPS = 1e-6
ROPE_THETA = 10000.0
ADAMW = dict(lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
NUM_STEPS = 3

TOL_FP32 = 1e-5
# One AdamW step from the binary's own gradients is exact up to fp32
# rounding: 1e-7 of the update seen, a missing weight decay 7e-4 or more.
TOL_ADAMW = 1e-4

# --amp: the binary's error may be AMP_FACTOR times PyTorch autocast's, plus
# one unit in the last place of the compute dtype (amp_floor).
AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
AMP_FACTOR = 2.0
# The first loss scale of tinyllama's LossScaler and of torch's GradScaler.
FP16_LOSS_SCALE = 65536.0

# Small, fixed, deliberately irregular shapes: they must run in seconds on
# two CPU cores, and odd sizes catch indexing bugs that powers of two hide.
# Together they cover K = H (MHA), K = H/2 (GQA), K = 1 (MQA), head_dim 8 to
# 32, sequence lengths that are not powers of two (one above 32, i.e. more
# than one attention tile), a vocab that is not a multiple of anything, and
# three layers (gradients through more than one residual hand-off), and one
# FFN width the Hopper SwiGLU GEMM takes.
CONFIGS = {
    "mha": dict(vocab=101, dim=48, layers=2, heads=4, kv_heads=4, ffn=80,
                seq=19, batch=3, seed=1234),
    "gqa": dict(vocab=67, dim=64, layers=2, heads=4, kv_heads=2, ffn=96,
                seq=23, batch=2, seed=77),
    "mqa": dict(vocab=50, dim=32, layers=3, heads=4, kv_heads=1, ffn=72,
                seq=13, batch=4, seed=9001),
    "hd32": dict(vocab=83, dim=64, layers=1, heads=2, kv_heads=1, ffn=112,
                 seq=37, batch=2, seed=4242),
    # An FFN width that is a multiple of 64 (192: one and a half 128-column
    # tiles), where --swiglu gemm's Hopper kernel runs instead of falling
    # back; a hidden width off the 64-wide k step, 87 rows off the 128-row tile.
    "ffn192": dict(vocab=61, dim=72, layers=2, heads=4, kv_heads=2, ffn=192,
                   seq=29, batch=3, seed=31337),
}


class BinaryFailure(Exception):
    """The binary exited non-zero or did not write what --dump-dir promises."""


# --------------------------------------------------------------------------
# safetensors, read by hand: the package is not installed on the test hosts.


def _bf16_to_f32(raw):
    # bfloat16 is the top half of a float32.
    return (raw.astype(np.uint32) << 16).view(np.float32)


_ST_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
}


def read_safetensors_header(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError("%s: header length %d past end of file" % (path, header_len))
    return blob, header_len, json.loads(blob[8:8 + header_len].decode("utf-8"))


def read_safetensors_metadata(path):
    return read_safetensors_header(path)[2].get("__metadata__", {})


def read_safetensors(path):
    """Return {name: (dtype string, numpy array)}; __metadata__ is skipped."""
    blob, header_len, header = read_safetensors_header(path)
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _ST_DTYPES:
            raise ValueError("%s: %s has unsupported dtype %s" % (path, name, dtype))
        np_dtype = _ST_DTYPES[dtype]
        shape = [int(d) for d in info["shape"]]
        begin, end = info["data_offsets"]
        expected = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
        if end - begin != expected or end > len(data):
            raise ValueError("%s: %s has bad data_offsets %s for shape %s %s"
                             % (path, name, info["data_offsets"], shape, dtype))
        array = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape)
        if dtype == "BF16":
            array = _bf16_to_f32(array)
        tensors[name] = (dtype, array.copy())
    return tensors


def rope_layout(metadata):
    """The q/k row layout of a file (src/io/hf_weights.h): rotate_half unless
    it says otherwise or tinyllama wrote it before recording the layout."""
    if "rope_layout" in metadata:
        return metadata["rope_layout"]
    return "interleaved" if metadata.get("producer") == "tinyllama" else "rotate_half"


def to_interleaved(tensors, cfg, layout):
    """q_proj/k_proj rows from Hugging Face's rotate-half order back to the
    interleaved RoPE pairs this script's model (DESIGN.md) computes with:
    row j of a head holds interleaved row 2j (j < hd/2) or 2(j - hd/2) + 1."""
    if layout == "interleaved":
        return tensors
    if layout != "rotate_half":
        raise ValueError("unknown rope_layout %r" % layout)
    hd = cfg["dim"] // cfg["heads"]
    order = np.empty(hd, dtype=np.int64)  # order[interleaved row] = rotate-half row
    for j in range(hd):
        order[2 * j if j < hd // 2 else 2 * (j - hd // 2) + 1] = j
    out = dict(tensors)
    for name, (dtype, a) in tensors.items():
        if name.endswith("self_attn.q_proj.weight") or name.endswith("self_attn.k_proj.weight"):
            heads = a.reshape(-1, hd, a.shape[1])
            out[name] = (dtype, heads[:, order, :].reshape(a.shape).copy())
    return out


# --------------------------------------------------------------------------
# The model: HF LLaMA names, the tied embedding doubles as the LM head.


def expected_shapes(cfg):
    hd = cfg["dim"] // cfg["heads"]
    d, f = cfg["dim"], cfg["ffn"]
    shapes = {"model.embed_tokens.weight": (cfg["vocab"], d),
              "model.norm.weight": (d,)}
    for n in range(cfg["layers"]):
        p = "model.layers.%d." % n
        shapes[p + "input_layernorm.weight"] = (d,)
        shapes[p + "self_attn.q_proj.weight"] = (cfg["heads"] * hd, d)
        shapes[p + "self_attn.k_proj.weight"] = (cfg["kv_heads"] * hd, d)
        shapes[p + "self_attn.v_proj.weight"] = (cfg["kv_heads"] * hd, d)
        shapes[p + "self_attn.o_proj.weight"] = (d, cfg["heads"] * hd)
        shapes[p + "post_attention_layernorm.weight"] = (d,)
        shapes[p + "mlp.gate_proj.weight"] = (f, d)
        shapes[p + "mlp.up_proj.weight"] = (f, d)
        shapes[p + "mlp.down_proj.weight"] = (d, f)
    return shapes


def rms_norm(x, w):
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + RMS_EPS) * w


def rope_tables(seq, hd, dtype, device="cpu"):
    """cos/sin [S, hd/2]: pair i at position p turns by p * theta^(-2i/hd)."""
    i = torch.arange(hd // 2, dtype=torch.float64)
    inv_freq = ROPE_THETA ** (-2.0 * i / hd)
    angle = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angle.cos().to(device, dtype), angle.sin().to(device, dtype)


def apply_rope(x, cos, sin):
    """Interleaved pairs (2i, 2i+1) of x [B, heads, S, hd] rotate as complex numbers."""
    a, b = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return rotated.flatten(-2)


def attention(x, p, layer, cfg, cos, sin):
    """Causal GQA attention, scores written out (torch 1.13 has no SDPA)."""
    bsz, seq, _ = x.shape
    h, k = cfg["heads"], cfg["kv_heads"]
    hd = cfg["dim"] // h
    pre = "model.layers.%d.self_attn." % layer
    q = (x @ p[pre + "q_proj.weight"].t()).view(bsz, seq, h, hd).transpose(1, 2)
    kk = (x @ p[pre + "k_proj.weight"].t()).view(bsz, seq, k, hd).transpose(1, 2)
    v = (x @ p[pre + "v_proj.weight"].t()).view(bsz, seq, k, hd).transpose(1, 2)
    q, kk = apply_rope(q, cos, sin), apply_rope(kk, cos, sin)
    # Query head j reads kv head j // (H/K): repeat_interleave, not repeat.
    kk = kk.repeat_interleave(h // k, dim=1)
    v = v.repeat_interleave(h // k, dim=1)
    scores = (q @ kk.transpose(-1, -2)) / math.sqrt(hd)
    future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    out = out.transpose(1, 2).reshape(bsz, seq, h * hd)
    return out @ p[pre + "o_proj.weight"].t()


def swiglu(x, p, layer):
    pre = "model.layers.%d.mlp." % layer
    gate = x @ p[pre + "gate_proj.weight"].t()
    up = x @ p[pre + "up_proj.weight"].t()
    return (F.silu(gate) * up) @ p[pre + "down_proj.weight"].t()


def mean_loss(p, rows, cfg):
    """Mean cross-entropy of rows [B, S+1]: inputs row[:S], targets row[1:]."""
    inputs, targets = rows[:, :-1], rows[:, 1:]
    hd = cfg["dim"] // cfg["heads"]
    emb = p["model.embed_tokens.weight"]
    cos, sin = rope_tables(inputs.shape[1], hd, emb.dtype, emb.device)
    x = emb[inputs]
    for n in range(cfg["layers"]):
        pre = "model.layers.%d." % n
        x = x + attention(rms_norm(x, p[pre + "input_layernorm.weight"]), p, n, cfg, cos, sin)
        x = x + swiglu(rms_norm(x, p[pre + "post_attention_layernorm.weight"]), p, n)
    logits = rms_norm(x, p["model.norm.weight"]) @ emb.t()  # tied LM head
    return F.cross_entropy(logits.reshape(-1, cfg["vocab"]), targets.reshape(-1))


def replay(init, batches, cfg, step1_grads=None, dtype=torch.float64):
    """Train from init on batches; return (losses, grads of every step, final weights).

    init, step1_grads: {name: numpy array}; batches: int arrays [B, S+1].
    The returned grads are always the replay's own; step1_grads, when
    given, drive step 1's update instead (see the module docstring).
    The tied embedding is one parameter, so AdamW sees its summed gradient
    exactly as the binary's single embedding buffer does.
    """
    params = {name: torch.tensor(a, dtype=dtype, requires_grad=True)
              for name, a in init.items()}
    opt = torch.optim.AdamW(list(params.values()), **ADAMW)
    losses, grads = [], []
    for step, rows in enumerate(batches, start=1):
        opt.zero_grad()
        loss = mean_loss(params, torch.tensor(rows, dtype=torch.long), cfg)
        loss.backward()
        losses.append(loss.item())
        grads.append({name: t.grad.detach().numpy().copy() for name, t in params.items()})
        if step == 1 and step1_grads is not None:
            for name, t in params.items():
                t.grad = torch.tensor(step1_grads[name], dtype=dtype)
        opt.step()
    final = {name: t.detach().numpy().copy() for name, t in params.items()}
    return losses, grads, final


def adamw_first_step(init, grads):
    """One float64 torch AdamW step from init with the given gradients."""
    params = {name: torch.tensor(a, dtype=torch.float64) for name, a in init.items()}
    for name, p in params.items():
        p.grad = torch.tensor(grads[name], dtype=torch.float64)
    torch.optim.AdamW(list(params.values()), **ADAMW).step()
    return {name: p.numpy() for name, p in params.items()}


def adam_error_scale(grads_per_step, ref, tol, plain=None):
    """Per-element scale s of a weight after the replay: pass when |a-b|/s <= tol.

    A gradient error d at step t moves that step's update m/(sqrt(v)+eps)
    by at most about 2 d / (sqrt(v_t) + eps) (m and sqrt(v) each move by
    <= d), and an update can change by 2 lr at most. With the tolerated
    d_t = tol * max|g_t|, the allowed error of a weight is plain * max|b|
    (plain defaults to tol) plus lr * min(2, 2 d_t / (sqrt(v_t) + eps)) per
    step. Step 1 adds nothing: its update uses the binary's own gradients.
    Where sqrt(v) is large, nearly every element, s is max|b| * plain / tol.
    """
    beta2 = ADAMW["betas"][1]
    lr, eps = ADAMW["lr"], ADAMW["eps"]
    plain = tol if plain is None else plain
    allowed = np.full(ref.shape, plain * np.max(np.abs(ref)))
    v = np.zeros(ref.shape)
    for t, g in enumerate(grads_per_step, start=1):
        v = beta2 * v + (1.0 - beta2) * g * g
        if t > 1:
            sqrt_v_hat = np.sqrt(v / (1.0 - beta2 ** t))
            allowed += lr * np.minimum(2.0, 2.0 * tol * np.max(np.abs(g)) / (sqrt_v_hat + eps))
    return allowed / tol


# --------------------------------------------------------------------------
# PyTorch's own mixed precision: the bar for --amp.


def autocast_device(binary_device):
    """Autocast runs where the binary ran, when this torch can reach that device."""
    return "cuda" if binary_device == "cuda" and torch.cuda.is_available() else "cpu"


def autocast_works(device, dtype):
    """Whether torch.autocast(device, dtype) runs a matmul in dtype.

    It may refuse (fp16 on the CPU in torch 1.13 raises) or warn and quietly
    run in fp32; an fp32 "autocast" error would fail every correct binary.
    """
    a = torch.ones(2, 2, device=device)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast(device_type=device, dtype=dtype):
                return (a @ a).dtype == dtype
    except RuntimeError:
        return False


def autocast_grads(params, tokens, cfg, device, dtype):
    """One forward and backward under autocast; leaves the mean loss's fp32 grads.

    fp16 scales the loss like GradScaler's and tinyllama's first step: the
    loss times 2^16 is back-propagated, so small gradients do not underflow
    in fp16, and the fp32 gradients are multiplied by the fp32 reciprocal
    (a power of two: exact). Written out rather than with GradScaler, which
    is CUDA-only in torch 1.13 and moved in 2.x. A step with inf or nan is
    taken again at half the scale: GradScaler would skip it, but the fp64
    replay applies every update. Returns (loss, the scale that held).
    """
    scale = FP16_LOSS_SCALE if dtype == torch.float16 else 1.0
    while True:
        for t in params.values():
            t.grad = None
        with torch.autocast(device_type=device, dtype=dtype):
            loss = mean_loss(params, tokens, cfg)
        (loss.float() * scale).backward()
        grads = [t.grad for t in params.values()]
        if all(bool(torch.isfinite(g).all()) for g in grads):
            for g in grads:
                g.mul_(1.0 / scale)
            return loss.item(), scale
        if scale <= 1.0:
            raise RuntimeError("the autocast replay's gradients are not finite")
        scale /= 2.0


def autocast_replay(init, batches, cfg, amp, device):
    """The run as a PyTorch user trains it: (losses, grads of every step, final weights).

    fp32 parameters and fp32 torch.optim.AdamW, the forward and backward of
    mean_loss under plain torch.autocast: the bar is what PyTorch users
    already accept, not a copy of tinyllama. Where the two place precision
    differently (the model code is the fp64 reference's):
      * the residual stream: tinyllama stores every activation in the
        compute dtype between ops, the residual included; under autocast the
        fp32 embedding rows plus low-precision matmul outputs promote to
        fp32, so the residual, RMSNorm (fp32 statistics in both) and RoPE
        (fp32 tables) stay fp32 and only the matmuls' inputs are rounded;
      * the weights: tinyllama reads a compute-dtype copy of every weight,
        the embedding rows and the norm weights included; autocast casts
        the matmuls' weights only;
      * softmax and cross-entropy run in fp32 under CUDA autocast (CPU
        autocast keeps softmax in bf16); tinyllama's attention and
        cross-entropy compute in fp32 from compute-dtype inputs too;
      * weight gradients: tinyllama's GEMMs write them in fp32, autocast's
        are the matmul's low-precision gradient of the cast weight, widened.
    The first two favour autocast, the last tinyllama; hence the factor
    AMP_FACTOR rather than 1.
    """
    dtype = AMP_DTYPES[amp]
    params = {name: torch.tensor(a, dtype=torch.float32, device=device, requires_grad=True)
              for name, a in init.items()}
    opt = torch.optim.AdamW(list(params.values()), **ADAMW)
    losses, grads = [], []
    for step, rows in enumerate(batches, start=1):
        tokens = torch.tensor(rows, dtype=torch.long, device=device)
        loss, scale = autocast_grads(params, tokens, cfg, device, dtype)
        if dtype == torch.float16 and scale != FP16_LOSS_SCALE:
            print("  note: autocast step %d overflowed at loss scale %g; taken at %g"
                  % (step, FP16_LOSS_SCALE, scale))
        losses.append(loss)
        grads.append({name: t.grad.detach().cpu().double().numpy()
                      for name, t in params.items()})
        opt.step()
    final = {name: t.detach().cpu().double().numpy() for name, t in params.items()}
    return losses, grads, final


def amp_floor(amp):
    """One unit in the last place of the compute dtype, relative to a tensor's max.

    For bf16 (8 significant bits) the spacing at x is 2^-8 |x| to 2^-7 |x|
    depending on where x sits in its binade; the bound, torch.finfo's eps,
    is taken: 2^-7 for bf16, 2^-10 for fp16.
    """
    return torch.finfo(AMP_DTYPES[amp]).eps


# --------------------------------------------------------------------------
# Running the binary.


def binary_command(args, cfg, workdir, steps):
    cmd = [args.binary, "train",
           "--device", args.device,
           "--vocab-size", str(cfg["vocab"]),
           "--hidden-dim", str(cfg["dim"]),
           "--num-layers", str(cfg["layers"]),
           "--num-heads", str(cfg["heads"]),
           "--num-kv-heads", str(cfg["kv_heads"]),
           "--ffn-dim", str(cfg["ffn"]),
           "--seq-len", str(cfg["seq"]),
           "--batch-size", str(cfg["batch"]),
           "--num-steps", str(steps),
           "--warmup-steps", "0",
           "--seed", str(cfg["seed"]),
           "--log-every", "1",
           "--dump-dir", workdir,
           "--save-weights", os.path.join(workdir, "final.safetensors"),
           "--json", os.path.join(workdir, "report.json")]
    if args.amp != "none":
        cmd += ["--use-amp", "--amp-dtype", args.amp]
    return cmd + shlex.split(args.extra_args)


def run_binary(cmd, cfg, workdir, timeout):
    """Run one training; return its dumps, or raise BinaryFailure."""
    os.makedirs(workdir, exist_ok=True)
    print("  $ " + " ".join(shlex.quote(c) for c in cmd))
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BinaryFailure("timed out after %d s" % timeout)
    except OSError as e:
        raise BinaryFailure("cannot start: %s" % e)
    if proc.returncode != 0:
        raise BinaryFailure("exit status %d\n--- stderr ---\n%s--- stdout ---\n%s"
                            % (proc.returncode, proc.stderr, proc.stdout))
    outputs = {}
    try:
        for key in ("init", "batches", "grads_step1", "final"):
            path = os.path.join(workdir, key + ".safetensors")
            outputs[key] = read_safetensors(path)
            if key != "batches":
                outputs[key] = to_interleaved(outputs[key], cfg,
                                              rope_layout(read_safetensors_metadata(path)))
        with open(os.path.join(workdir, "report.json")) as f:
            outputs["report"] = json.load(f)
    except (OSError, ValueError) as e:
        raise BinaryFailure("exited 0 but its outputs are unreadable: %s\n"
                            "--- stderr ---\n%s" % (e, proc.stderr))
    # Which attention ran (a requested one may have fallen back), so the
    # log shows what each check covered.
    plan = outputs["report"].get("plan", {})
    ops = plan.get("ops", {})
    if ops:
        line = "    attention %s" % ops.get("attention", "?")
        for fb in plan.get("fallbacks", []):
            if fb.get("op") == "attention":
                line += " (%s -> %s: %s)" % (fb["wanted"], fb["using"], fb["reason"])
        print(line)
    return outputs


def arrays(safetensors):
    return {name: a for name, (_, a) in safetensors.items()}


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
