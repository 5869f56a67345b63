"""The DESIGN.md model in PyTorch modules for the DDP peer (scripts/ddp-peer.py):
RMSNorm, RoPE on interleaved pairs, causal GQA attention through SDPA where
this torch has it, SwiGLU, tied embedding and LM head."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# DESIGN.md section 1 constants.
RMS_EPS = 1e-6
ROPE_THETA = 10000.0
INIT_STD = 0.02


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Statistics in fp32 whatever the input dtype; the residual stream is
        # fp32 here anyway (fp32 embedding + autocast GEMM outputs).
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + RMS_EPS)
        return (y * self.weight.float()).to(x.dtype)


def rope_tables(seq_len, head_dim):
    """cos, sin [S, 1, hd/2] fp32: pair i at position p turns by p * theta^(-2i/hd)."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = ROPE_THETA ** (-2.0 * i / head_dim)
    angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angle.cos().float()[:, None, :], angle.sin().float()[:, None, :]


def apply_rope(x, cos, sin):
    """x [B, S, heads, hd]: interleaved pairs (2i, 2i+1) rotate, computed in fp32."""
    xf = x.float().reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    a, b = xf[..., 0], xf[..., 1]
    out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return out.flatten(-2).to(x.dtype)


HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


def sdpa_takes_enable_gqa():
    if not HAVE_SDPA:
        return False
    q = torch.zeros(1, 2, 2, 4)
    kv = torch.zeros(1, 1, 2, 4)
    try:
        F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        return True
    except TypeError:
        return False
    except RuntimeError:
        return False


def written_out_attention(q, k, v):
    """Causal attention without SDPA (torch < 2.0 only: smoke tests)."""
    hd = q.shape[-1]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    s = q.shape[-2]
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(v.dtype) @ v


class Attention(nn.Module):
    def __init__(self, cfg, gqa_native):
        super().__init__()
        self.h, self.k = cfg["num_heads"], cfg["num_kv_heads"]
        self.hd = cfg["hidden_dim"] // self.h
        d = cfg["hidden_dim"]
        # One QKV GEMM: q rows, then k, then v (tinyllama's Wqkv layout).
        self.wqkv = nn.Linear(d, (self.h + 2 * self.k) * self.hd, bias=False)
        self.wo = nn.Linear(self.h * self.hd, d, bias=False)
        self.gqa_native = gqa_native

    def forward(self, x, cos, sin):
        bsz, seq, _ = x.shape
        h, k, hd = self.h, self.k, self.hd
        q, kk, v = self.wqkv(x).split((h * hd, k * hd, k * hd), dim=-1)
        q = apply_rope(q.view(bsz, seq, h, hd), cos, sin).transpose(1, 2)
        kk = apply_rope(kk.view(bsz, seq, k, hd), cos, sin).transpose(1, 2)
        v = v.view(bsz, seq, k, hd).transpose(1, 2)
        if k != h and not self.gqa_native:
            # Query head j reads kv head j // (H/K): repeat_interleave semantics.
            kk = kk.repeat_interleave(h // k, dim=1)
            v = v.repeat_interleave(h // k, dim=1)
        if not HAVE_SDPA:
            out = written_out_attention(q, kk, v)
        elif k != h and self.gqa_native:
            out = F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, kk, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(bsz, seq, h * hd))


class SwiGLU(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["hidden_dim"], cfg["ffn_dim"]
        self.ffn = f
        # One gate/up GEMM: gate rows, then up (tinyllama's Wgu layout).
        self.wgu = nn.Linear(d, 2 * f, bias=False)
        self.wdown = nn.Linear(f, d, bias=False)

    def forward(self, x):
        gate, up = self.wgu(x).split((self.ffn, self.ffn), dim=-1)
        return self.wdown(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg, gqa_native):
        super().__init__()
        self.n1 = RMSNorm(cfg["hidden_dim"])
        self.attn = Attention(cfg, gqa_native)
        self.n2 = RMSNorm(cfg["hidden_dim"])
        self.ffn = SwiGLU(cfg)

    def forward(self, x, cos, sin):
        h = x + self.attn(self.n1(x), cos, sin)
        return h + self.ffn(self.n2(h))


class TinyLlama(nn.Module):
    """Returns the mean cross-entropy of next-token prediction."""

    def __init__(self, cfg, gqa_native):
        super().__init__()
        self.vocab = cfg["vocab"]
        self.embed = nn.Embedding(cfg["vocab"], cfg["hidden_dim"])
        self.blocks = nn.ModuleList(Block(cfg, gqa_native) for _ in range(cfg["num_layers"]))
        self.norm = RMSNorm(cfg["hidden_dim"])
        cos, sin = rope_tables(cfg["seq_len"], cfg["hidden_dim"] // cfg["num_heads"])
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, mean=0.0, std=INIT_STD)

    def forward(self, inputs, targets):
        x = self.embed(inputs)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        logits = F.linear(self.norm(x), self.embed.weight)  # tied LM head
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))
