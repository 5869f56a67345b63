"""The DDP peer's setup (scripts/ddp-peer.py): its notes, the GQA path SDPA
can take, the optimizer, the synthetic token pool."""

import sys

import torch

from ddp_model import HAVE_SDPA, sdpa_takes_enable_gqa

ADAMW_BETAS = (0.9, 0.999)
ADAMW_EPS = 1e-8
WEIGHT_DECAY = 0.01
# Batches per rank in the synthetic pool (cycled through).
POOL_BATCHES = 8


class Notes:
    def __init__(self, rank):
        self.rank = rank
        self.items = []

    def add(self, text, all_ranks=False):
        self.items.append(text)
        if self.rank == 0 or all_ranks:
            prefix = "note" if self.rank == 0 else "note[rank %d]" % self.rank
            print("%s: %s" % (prefix, text), file=sys.stderr, flush=True)


def choose_gqa(args, device, notes):
    """True: SDPA enable_gqa=True; False: repeat_interleave K/V (or MHA)."""
    h, k = args.num_heads, args.num_kv_heads
    hd = args.hidden_dim // h
    if k == h:
        return False, "mha"
    if not HAVE_SDPA:
        notes.add("this torch has no F.scaled_dot_product_attention: written-out attention "
                  "with repeated K/V (smoke tests only, not a fair peer)")
        return False, "repeat (no sdpa)"
    takes = sdpa_takes_enable_gqa()
    if args.gqa == "repeat":
        return False, "repeat"
    if args.gqa == "native":
        if not takes:
            notes.add("--gqa native: this torch's SDPA has no enable_gqa; repeating K/V instead")
            return False, "repeat"
        return True, "native"
    # auto: native only where the flash kernel takes it; elsewhere SDPA would
    # route enable_gqa to the math backend, slower than repeating K/V.
    if not takes:
        return False, "repeat"
    if device.type != "cuda" or args.amp != "bf16":
        return False, "repeat"
    if not torch.backends.cuda.flash_sdp_enabled() or hd > 256 or hd % 8 != 0:
        return False, "repeat"
    verdict = None
    try:
        from torch.backends.cuda import SDPAParams, can_use_flash_attention
        q = torch.zeros(1, h, args.seq_len, hd, device=device, dtype=torch.bfloat16,
                        requires_grad=True)
        kv = torch.zeros(1, k, args.seq_len, hd, device=device, dtype=torch.bfloat16,
                         requires_grad=True)
        try:
            params = SDPAParams(q, kv, kv, None, 0.0, True, True)
        except TypeError:
            params = None  # a torch whose SDPAParams cannot express GQA
        if params is not None:
            verdict = bool(can_use_flash_attention(params, False))
        del q, kv
    except Exception:  # an older torch without the probe: trust the heuristic
        verdict = None
    if verdict is False:
        notes.add("flash attention cannot take this GQA shape: repeating K/V")
        return False, "repeat"
    return True, "native"


def make_optimizer(params, args, device, notes):
    kw = dict(lr=args.lr, betas=ADAMW_BETAS, eps=ADAMW_EPS, weight_decay=WEIGHT_DECAY)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(params, fused=True, **kw), "fused"
        except (TypeError, RuntimeError, ValueError) as err:
            notes.add("fused AdamW unavailable (%s): foreach AdamW" % str(err).splitlines()[0])
            try:
                return torch.optim.AdamW(params, foreach=True, **kw), "foreach"
            except TypeError:
                pass
    return torch.optim.AdamW(params, **kw), "default"


def make_data(args, device, rank):
    """(inputs, targets) [POOL, B, S] int64 on the device, uniform in [1, vocab)."""
    gen = torch.Generator()
    # A distinct stream per rank, and distinct from the weights' seed.
    gen.manual_seed((args.seed * 1000003 + 7919 * (rank + 1)) % (2 ** 63))
    rows = torch.randint(1, args.vocab, (POOL_BATCHES, args.batch_size, args.seq_len + 1),
                         generator=gen, dtype=torch.long)
    inputs = rows[:, :, :-1].contiguous().to(device)
    targets = rows[:, :, 1:].contiguous().to(device)
    return inputs, targets


def nccl_version():
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return None
    if isinstance(v, (tuple, list)):
        return ".".join(str(x) for x in v)
    if isinstance(v, int):  # old torch: major*1000 + minor*100 + patch (or *10000 + ...)
        return str(v)
    return str(v)


def fmt_int(x):
    return "{:,.0f}".format(x)
