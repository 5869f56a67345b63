#!/usr/bin/env python3
"""The PyTorch peer of `tinyllama bench`: the same model, trained the same
way, timed the way tinyllama times itself.

Model (DESIGN.md section 1, tinyllama's contract): tied embedding and LM head, pre-norm blocks
of RMSNorm (eps 1e-6, statistics in fp32), causal GQA attention with
interleaved RoPE (theta 10000), SwiGLU, final RMSNorm; one fused Q/K/V
weight and one fused gate/up weight; init N(0, 0.02), norm weights 1;
AdamW (0.9, 0.999, eps 1e-8, weight decay 0.01); synthetic rows of S+1
tokens uniform in [1, vocab) from a pool of 1000, B distinct rows a step.

Variants: eager, and compile (torch.compile(mode="reduce-overhead"): Inductor
kernels replayed from CUDA graphs). Precisions: fp32 (TF32 off, like
tinyllama), bf16 and fp16 under autocast with fp32 weights (fp16 with a
GradScaler), and fp8: bf16 autocast with the four projections (fused QKV,
out-proj, fused gate/up, down) as float8 GEMMs, torchao's "tensorwise"
recipe on torch._scaled_mm (fp8_linear.py; needs FP8 tensor cores, sm_89
on). Attention, norms, the tied LM head and the loss stay bf16 autocast.
--self-check compares one fp8 linear with a bf16 linear on the GPU.

Timing: --warmup-steps untimed steps, then --num-steps steps each timed with
CUDA events (wall clock on the CPU); the median is reported. Memory: the
peak is reset before the first warm-up step and read after the last step,
so compilation and the CUDA-graph pool (which holds the activations and
gradients a peak taken over replays alone would miss) are counted. peak_mb
is in decimal megabytes (1e6 bytes), as tinyllama's; before 2026-11-29 it
was in MiB.

Writes one JSON object to --json (and prints it); exit 1 with one line on
stderr on failure (out of memory included).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the bench checks first; a direct call gets one line
    print("error: torch_peer.py needs torch: %s" % e, file=sys.stderr)
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_linear  # noqa: E402  (loads on any torch; float8 is looked up when it runs)


def rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight).to(x.dtype)


def causal_attention(q, k, v):
    # PyTorch's fused attention where this torch has it (2.0 on); before it
    # (Debian's 1.13 in CI) the same math written out.
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.float().masked_fill(mask, float("-inf")), dim=-1).to(v.dtype) @ v


def rope_tables(seq, head_dim, device, theta=10000.0):
    # Pair i of a head rotates by p * theta^(-2i/hd) at position p.
    inv = theta ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    return torch.cos(angles), torch.sin(angles)  # [S, hd/2]


def rope(x, cos, sin):
    # x [B, heads, S, hd]; interleaved pairs (2i, 2i+1).
    pairs = x.float().unflatten(-1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


class TinyLlama(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.h, self.k = a.num_heads, a.num_kv_heads
        self.hd = a.hidden_dim // a.num_heads
        self.ffn = a.ffn_dim
        # The four projections' GEMM; the LM head is always F.linear.
        fp8 = getattr(a, "precision", None) == "fp8"
        self.linear = fp8_linear.fp8_linear if fp8 else F.linear

        def normal(*shape):
            return torch.nn.Parameter(torch.randn(*shape) * 0.02)

        d = a.hidden_dim
        self.embedding = normal(a.vocab_size, d)
        self.layers = torch.nn.ModuleList()
        for _ in range(a.num_layers):
            layer = torch.nn.Module()
            layer.norm1 = torch.nn.Parameter(torch.ones(d))
            layer.wqkv = normal((self.h + 2 * self.k) * self.hd, d)
            layer.wo = normal(d, self.h * self.hd)
            layer.norm2 = torch.nn.Parameter(torch.ones(d))
            layer.wgu = normal(2 * self.ffn, d)
            layer.wdown = normal(d, self.ffn)
            self.layers.append(layer)
        self.norm_f = torch.nn.Parameter(torch.ones(d))

    def forward(self, tokens, targets, cos, sin):
        b, s = tokens.shape
        x = F.embedding(tokens, self.embedding)
        for layer in self.layers:
            qkv = self.linear(rms_norm(x, layer.norm1), layer.wqkv)
            q, k, v = qkv.split([self.h * self.hd, self.k * self.hd, self.k * self.hd], dim=-1)
            q = rope(q.view(b, s, self.h, self.hd).transpose(1, 2), cos, sin)
            k = rope(k.view(b, s, self.k, self.hd).transpose(1, 2), cos, sin)
            v = v.view(b, s, self.k, self.hd).transpose(1, 2)
            if self.k != self.h:  # query head h reads kv head h / (H/K)
                k = k.repeat_interleave(self.h // self.k, dim=1)
                v = v.repeat_interleave(self.h // self.k, dim=1)
            attn = causal_attention(q, k, v)
            x = x + self.linear(attn.transpose(1, 2).reshape(b, s, -1), layer.wo)
            gate, up = self.linear(rms_norm(x, layer.norm2), layer.wgu).split(self.ffn, dim=-1)
            x = x + self.linear(F.silu(gate) * up, layer.wdown)
        logits = F.linear(rms_norm(x, self.norm_f), self.embedding)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, default in (("--vocab-size", 1000), ("--hidden-dim", 512), ("--num-layers", 8),
                          ("--num-heads", 8), ("--num-kv-heads", 0), ("--ffn-dim", 0),
                          ("--batch-size", 8), ("--seq-len", 256), ("--num-steps", 50),
                          ("--warmup-steps", 5), ("--seed", 1234)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16", "fp8"), default="fp32")
    p.add_argument("--variant", choices=("eager", "compile"), default="eager")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="default: cuda when torch sees a GPU, else cpu")
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--json", default=None, help="write the result here too")
    p.add_argument("--self-check", action="store_true",
                   help="compare one fp8 linear with a bf16 linear on the GPU, then exit")
    a = p.parse_args()
    a.num_kv_heads = a.num_kv_heads or (a.num_heads // 2 if a.num_heads % 2 == 0 else a.num_heads)
    a.ffn_dim = a.ffn_dim or 4 * a.hidden_dim
    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return a


def run(a):
    cuda = a.device == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(a.seed)
    model = TinyLlama(a).to(a.device)
    # fused=True: one kernel per step on the GPU, as PyTorch users would ask
    # for (older torch has no such argument, and it is not needed on the CPU).
    fused = {"fused": True} if cuda else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.learning_rate, betas=(0.9, 0.999),
                                  eps=1e-8, weight_decay=0.01, **fused)
    generator = torch.Generator().manual_seed(a.seed)
    pool = torch.randint(1, a.vocab_size, (1000, a.seq_len + 1), generator=generator).to(a.device)
    cos, sin = rope_tables(a.seq_len, a.hidden_dim // a.num_heads, a.device)
    if a.precision == "fp8":
        if not cuda:
            raise RuntimeError("--precision fp8 needs a CUDA GPU with FP8 tensor cores")
        hd = a.hidden_dim // a.num_heads
        fp8_linear.check_dims(tokens=a.batch_size * a.seq_len, hidden=a.hidden_dim,
                              qkv=(a.num_heads + 2 * a.num_kv_heads) * hd,
                              attn=a.num_heads * hd, ffn=a.ffn_dim)
    # fp8: bf16 autocast around the fp8 projections.
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16,
             "fp8": torch.bfloat16}[a.precision]
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None
    loss_of = model.forward
    if a.variant == "compile":
        if not hasattr(torch, "compile"):
            raise RuntimeError("torch %s has no torch.compile" % torch.__version__)
        loss_of = torch.compile(model.forward, mode="reduce-overhead")

    def step(i):
        rows = pool[torch.randperm(1000, generator=generator)[:a.batch_size].to(a.device)]
        with torch.autocast(a.device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = loss_of(rows[:, :-1], rows[:, 1:], cos, sin)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for i in range(a.warmup_steps):
        step(i)
    times, losses = [], []
    for i in range(a.num_steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step(i)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            loss = step(i)
            times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.detach()))
    peak = torch.cuda.max_memory_allocated() / 1e6 if cuda else None  # MB, as tinyllama's
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError("the loss is not finite")
    return {
        "tool": "torch_peer", "variant": a.variant, "precision": a.precision, "device": a.device,
        "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "batch_size": a.batch_size, "seq_len": a.seq_len,
        "ms_per_step": statistics.median(times), "mean_ms_per_step": statistics.fmean(times),
        "steps_ms": times, "peak_mb": peak, "final_loss": losses[-1],
    }


def main():
    a = parse_args()
    if a.self_check:
        return fp8_linear.self_check()
    try:
        result = run(a)
    except torch.cuda.OutOfMemoryError:
        print("error: out of device memory", file=sys.stderr)
        return 1
    except Exception as e:  # one line, as tinyllama reports its own failures
        print("error: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""),
              file=sys.stderr)
        return 1
    text = json.dumps(result)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
