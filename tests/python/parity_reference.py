"""The independent PyTorch model (float64 replay, AdamW's bound) and
PyTorch's own mixed precision, the bar for --amp."""

import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from parity_config import ADAMW, AMP_DTYPES, FP16_LOSS_SCALE, RMS_EPS, ROPE_THETA


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
