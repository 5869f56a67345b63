#!/usr/bin/env python3
"""tinyllama's PyTorch peer for data-parallel scaling runs (DDP over NCCL).

Trains the model of DESIGN.md section 1 (RMSNorm, interleaved-pair RoPE,
causal GQA attention, SwiGLU FFN, tied LM head, AdamW) on synthetic tokens
with PyTorch's DistributedDataParallel, one process per GPU, and reports how
fast a step is. It is the yardstick for tinyllama's own multi-GPU runs: same
model, same flags, same per-GPU batch, what a careful PyTorch user would run.

Usage:

  export NCCL_NVLS_ENABLE=0      # NVLink multicast must stay off (see below)
  torchrun --standalone --nproc-per-node 4 scripts/ddp-peer.py \\
      --hidden-dim 512 --num-layers 8 --batch-size 8 --seq-len 256 \\
      --amp bf16 --compile compile --json out/ddp4.json

  python3 scripts/ddp-peer.py ...   # no torchrun: world 1, no process group

The model is in scripts/peer/ddp_model.py and the setup helpers (notes, the
GQA path, the optimizer, the token pool) in scripts/peer/ddp_setup.py; this
file has the command line and the training loop.

The script sets NCCL_NVLS_ENABLE=0 itself before any process group exists;
export it in the calling shell too, so that torchrun's agent and anything
else started alongside see the same setting.

How it runs:
  * rank r uses cuda:LOCAL_RANK; world > 1 wraps the model in
    DistributedDataParallel (NCCL, gradient_as_bucket_view=True,
    static_graph=True, broadcast_buffers=False: the only buffers are the
    constant RoPE tables); world 1 trains the bare model.
  * --amp bf16: fp32 parameters and AdamW state, torch.autocast(bfloat16)
    around the forward pass; --amp fp32: true fp32 (TF32 off, as tinyllama).
  * --compile compile: torch.compile of the (DDP-wrapped) model. With
    world > 1, --ddp-compile whole (default) compiles one graph and DDP
    all-reduces the buckets after the compiled backward; split lets Dynamo's
    DDPOptimizer cut the graph at bucket boundaries so that the all-reduce
    overlaps the backward, at the price of more, smaller graphs (more host
    work per step). On 2 H200s with the default model (32M parameters,
    bf16, S 256), split was 30-45 % slower than whole in every same-machine
    pair tried (B 8 and 32): such small steps are bound by the host's kernel
    launches, not by the GPU or NVLink, so their times also move with the
    host (B 8: 6.9 to 11.5 ms/step at world 1 on two machines of one kind):
    compare peers only within one machine and one call. A compute-bound
    model may prefer split: time both. A compile failure is reported and the run falls back to
    eager (all ranks agree on the fallback); the JSON's "compile" field says
    what was actually timed. The agreement needs the failure on every rank,
    as a compile error is (same code, torch and shapes); should only some
    ranks fail, the others are already inside DDP's all-reduce and the run
    ends with a collective error or the 10-minute process-group timeout.
  * attention: F.scaled_dot_product_attention(is_causal=True); K < H either
    passes enable_gqa=True (when this torch has it and the flash kernel can
    take the shapes, since other backends would silently fall back to the
    slow math path) or repeats K/V with repeat_interleave (--gqa).
  * optimizer: torch.optim.AdamW(fused=True), betas (0.9, 0.999), eps 1e-8,
    weight decay 0.01 on every parameter.
  * data: each rank pre-generates a small pool of batches of uniform tokens
    in [1, vocab) on its GPU, seeded by --seed and its rank, and cycles
    through it; no host-to-device traffic inside the timed loop.

What it measures:
  * --warmup untimed steps first (at least 1 under torch.compile, which
    compiles during the first step), then --steps timed steps.
  * every rank times every step with a pair of CUDA events around the whole
    step: zero_grad, forward, backward (with DDP's all-reduce), optimizer
    step. No host synchronisation inside the loop.
  * per rank: median and mean ms/step. Rank 0 gathers the ranks' numbers and
    reports the median over ranks of the per-rank medians (and means), with
    the max over ranks beside it.
  * tokens/s per GPU = batch-size * seq-len / median step time;
    tokens/s = that * world (global throughput).
  * peak memory: torch.cuda.max_memory_allocated over the whole run (model,
    optimizer state, data pool, warm-up and compile included; not reset after
    warm-up), in MB of 10^6 bytes as tinyllama reports; the max over ranks.

Output: rank 0 prints one line to stdout (notes go to stderr) and, with
--json PATH, writes one JSON object:
  {"peer": "pytorch-ddp", "world", "amp", "compile", "config": {...},
   "ms_per_step_median", "ms_per_step_mean", "tokens_per_s_per_gpu",
   "tokens_per_s", "peak_mem_mb", "torch", "gpu", "nccl", ...}
plus the max-over-ranks figures, the per-rank numbers and the notes.

Flags follow tinyllama's names; --vocab, --steps, --warmup and --lr also
answer to tinyllama's --vocab-size, --num-steps, --warmup-steps and
--learning-rate. Needs Python 3 and PyTorch only (torch >= 2.0 for
torch.compile and SDPA; an older torch runs eagerly with written-out
attention, which is only good for a smoke test).
"""

import os

# NVLink multicast (NVLS) stays off: set before torch / NCCL can read it.
os.environ["NCCL_NVLS_ENABLE"] = "0"

import argparse  # noqa: E402
import datetime  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

# The model and the setup helpers live beside torch_peer.py in scripts/peer/.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer"))
from ddp_model import HAVE_SDPA, TinyLlama  # noqa: E402
from ddp_setup import (POOL_BATCHES, Notes, choose_gqa, fmt_int, make_data,  # noqa: E402
                       make_optimizer, nccl_version)


# --------------------------------------------------------------------------
# Command line


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch DDP peer of tinyllama: times data-parallel training "
                    "steps of the DESIGN.md model on synthetic tokens. Launch with "
                    "torchrun --standalone --nproc-per-node N, or plainly for one GPU.")
    m = p.add_argument_group("model")
    m.add_argument("--vocab", "--vocab-size", dest="vocab", type=int, default=1000,
                   help="vocabulary size (default 1000)")
    m.add_argument("--hidden-dim", type=int, default=512, help="hidden size D (default 512)")
    m.add_argument("--num-layers", type=int, default=8, help="transformer blocks L (default 8)")
    m.add_argument("--num-heads", type=int, default=8, help="query heads H (default 8)")
    m.add_argument("--num-kv-heads", type=int, default=None,
                   help="key/value heads K, must divide H; 0 means K = H (no GQA); "
                        "default as tinyllama: H/2, or H when H is odd")
    m.add_argument("--ffn-dim", type=int, default=0,
                   help="SwiGLU inner size F; 0 (default) derives 4*D as tinyllama")
    t = p.add_argument_group("training")
    t.add_argument("--batch-size", type=int, default=8, help="rows per step per GPU (default 8)")
    t.add_argument("--seq-len", type=int, default=256, help="tokens per row S (default 256)")
    t.add_argument("--steps", "--num-steps", dest="steps", type=int, default=50,
                   help="timed steps (default 50)")
    t.add_argument("--warmup", "--warmup-steps", dest="warmup", type=int, default=5,
                   help="untimed steps before the timed ones (default 5; at least 1 "
                        "under torch.compile)")
    t.add_argument("--lr", "--learning-rate", dest="lr", type=float, default=3e-4,
                   help="AdamW learning rate (default 3e-4)")
    t.add_argument("--seed", type=int, default=1234,
                   help="seed of the initial weights (all ranks) and of the data "
                        "(offset by rank) (default 1234)")
    e = p.add_argument_group("execution")
    e.add_argument("--amp", choices=("bf16", "fp32"), default="bf16",
                   help="bf16: autocast bfloat16 with fp32 weights and AdamW (default); "
                        "fp32: true fp32, TF32 off")
    e.add_argument("--compile", choices=("none", "compile"), default="compile",
                   help="torch.compile the model (default compile; falls back to eager "
                        "with a note if compiling fails)")
    e.add_argument("--ddp-compile", choices=("whole", "split"), default="whole",
                   help="how torch.compile meets DDP (world > 1): whole (default) compiles "
                        "one graph (Dynamo's optimize_ddp off; the all-reduce follows the "
                        "compiled backward), split lets Dynamo's DDPOptimizer cut the graph "
                        "at bucket boundaries so the all-reduce overlaps the backward")
    e.add_argument("--gqa", choices=("auto", "native", "repeat"), default="auto",
                   help="how attention serves K < H: native = SDPA enable_gqa=True, "
                        "repeat = repeat_interleave K/V; auto (default) takes native "
                        "only where the flash kernel can run it")
    e.add_argument("--json", metavar="PATH", default=None,
                   help="rank 0 writes the results as one JSON object here")
    # Hidden: CPU smoke test of the model and the loop (gloo under torchrun).
    e.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    def fail(msg):
        p.error(msg)

    for name in ("vocab", "hidden_dim", "num_layers", "num_heads", "batch_size", "seq_len",
                 "steps"):
        if getattr(args, name) < 1:
            fail("--%s must be at least 1" % name.replace("_", "-"))
    if args.vocab < 2:
        fail("--vocab must be at least 2")
    if args.warmup < 0:
        fail("--warmup must be at least 0")
    if args.ffn_dim < 0:
        fail("--ffn-dim must be 0 (derived) or positive")
    if args.num_kv_heads is None:
        args.num_kv_heads = args.num_heads // 2 if args.num_heads % 2 == 0 else args.num_heads
    elif args.num_kv_heads == 0:
        args.num_kv_heads = args.num_heads
    elif args.num_kv_heads < 0:
        fail("--num-kv-heads must be 0 (= heads) or positive")
    if args.ffn_dim == 0:
        args.ffn_dim = 4 * args.hidden_dim
    if args.hidden_dim % args.num_heads != 0:
        fail("--hidden-dim %d must be divisible by --num-heads %d"
             % (args.hidden_dim, args.num_heads))
    if (args.hidden_dim // args.num_heads) % 2 != 0:
        fail("head_dim = hidden-dim / num-heads = %d must be even for RoPE"
             % (args.hidden_dim // args.num_heads))
    if args.num_heads % args.num_kv_heads != 0:
        fail("--num-heads %d must be divisible by --num-kv-heads %d"
             % (args.num_heads, args.num_kv_heads))
    return args


# --------------------------------------------------------------------------
# Main


def main(argv=None):
    args = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    distributed = world > 1
    notes = Notes(rank)

    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("error: no CUDA device (the hidden --device cpu runs a CPU smoke test)",
                  file=sys.stderr)
            return 2
        if local_rank >= torch.cuda.device_count():
            print("error: LOCAL_RANK %d but only %d CUDA devices"
                  % (local_rank, torch.cuda.device_count()), file=sys.stderr)
            return 2
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
        notes.add("--device cpu: a smoke test of the model and the loop, not a benchmark")

    # fp32 means fp32 (tinyllama runs no TF32); bf16 GEMMs are unaffected.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    if distributed:
        # Generous for torch.compile's first step, which ranks finish at
        # different times; short enough that a stuck run does end.
        timeout = datetime.timedelta(minutes=10)
        try:  # device_id (torch >= 2.3) binds the NCCL communicator to our GPU
            dist.init_process_group(backend=backend, timeout=timeout,
                                    device_id=device if device.type == "cuda" else None)
        except TypeError:
            dist.init_process_group(backend=backend, timeout=timeout)
        assert dist.get_world_size() == world and dist.get_rank() == rank

    try:
        return run(args, world, rank, local_rank, distributed, device, notes)
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def run(args, world, rank, local_rank, distributed, device, notes):
    is_cuda = device.type == "cuda"
    cfg = dict(vocab=args.vocab, hidden_dim=args.hidden_dim, num_layers=args.num_layers,
               num_heads=args.num_heads, num_kv_heads=args.num_kv_heads,
               ffn_dim=args.ffn_dim, seq_len=args.seq_len)
    gqa_native, gqa_mode = choose_gqa(args, device, notes)

    want_compile = args.compile == "compile"
    if want_compile and not hasattr(torch, "compile"):
        notes.add("torch %s has no torch.compile: running eagerly" % torch.__version__)
        want_compile = False
    warmup = args.warmup
    if want_compile and warmup < 1:
        notes.add("torch.compile compiles during the first step: 1 warm-up step instead of 0")
        warmup = 1

    if is_cuda:
        torch.cuda.reset_peak_memory_stats(device)

    def build(compiled):
        torch.manual_seed(args.seed)  # the same initial weights on every rank
        model = TinyLlama(cfg, gqa_native).to(device)
        wrapped = model
        if distributed:
            wrapped = nn.parallel.DistributedDataParallel(
                model,
                device_ids=[local_rank] if is_cuda else None,
                output_device=local_rank if is_cuda else None,
                broadcast_buffers=False,
                gradient_as_bucket_view=True,
                static_graph=True)
        if compiled:
            if distributed:
                try:
                    dynamo = importlib.import_module("torch._dynamo")
                    dynamo.config.optimize_ddp = args.ddp_compile == "split"
                except (ImportError, AttributeError) as err:
                    notes.add("cannot set Dynamo's optimize_ddp (%s)" % err)
            wrapped = torch.compile(wrapped)
        opt, opt_kind = make_optimizer(model.parameters(), args, device, notes)
        return model, wrapped, opt, opt_kind

    model, wrapped, opt, opt_kind = build(want_compile)
    n_params = sum(p.numel() for p in model.parameters())
    inputs, targets = make_data(args, device, rank)
    autocast = dict(device_type=device.type, dtype=torch.bfloat16, enabled=args.amp == "bf16")

    def step(i):
        opt.zero_grad(set_to_none=True)
        j = i % POOL_BATCHES
        with torch.autocast(**autocast):
            loss = wrapped(inputs[j], targets[j])
        loss.backward()
        opt.step()
        return loss

    # Warm-up. Under torch.compile the first step compiles; a failure there
    # (on any rank) makes every rank rebuild the model eagerly.
    compile_used = want_compile
    first_loss = None
    compile_s = None
    step_i = 0
    if warmup > 0:
        failure = None
        t0 = time.perf_counter()
        try:
            first_loss = step(step_i).detach()
            if is_cuda:
                torch.cuda.synchronize(device)
        except Exception as err:  # compile errors come in many types
            if not want_compile:
                raise
            failure = "%s: %s" % (type(err).__name__, (str(err).strip().splitlines() or [""])[0])
        first_s = time.perf_counter() - t0
        if want_compile:
            failed = torch.tensor([1 if failure else 0], device=device)
            if distributed:
                dist.all_reduce(failed, op=dist.ReduceOp.MAX)
            if int(failed.item()):
                if failure:
                    notes.add("torch.compile failed on rank %d (%s); falling back to eager"
                              % (rank, failure), all_ranks=True)
                else:
                    notes.add("torch.compile failed on another rank; falling back to eager")
                del model, wrapped, opt
                try:
                    importlib.import_module("torch._dynamo").reset()
                except Exception:
                    pass
                if is_cuda:
                    torch.cuda.synchronize(device)
                    torch.cuda.empty_cache()
                    # The failed attempt is no part of what is measured.
                    torch.cuda.reset_peak_memory_stats(device)
                compile_used = False
                model, wrapped, opt, opt_kind = build(False)
                first_loss = step(step_i).detach()
            else:
                compile_s = first_s
        step_i += 1
        for _ in range(1, warmup):
            step(step_i)
            step_i += 1

    # Timed steps: CUDA events around each whole step, no host sync inside.
    if distributed:
        dist.barrier()
    if is_cuda:
        torch.cuda.synchronize(device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
    cpu_ms = []
    wall0 = time.perf_counter()
    loss = None
    for i in range(args.steps):
        if is_cuda:
            starts[i].record()
            loss = step(step_i)
            ends[i].record()
        else:
            t = time.perf_counter()
            loss = step(step_i)
            cpu_ms.append((time.perf_counter() - t) * 1e3)
        step_i += 1
    if is_cuda:
        torch.cuda.synchronize(device)
        step_ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    else:
        step_ms = cpu_ms
    wall_ms = (time.perf_counter() - wall0) * 1e3 / args.steps
    last_loss = float(loss.item())
    if first_loss is not None:
        first_loss = float(first_loss.item())
    if not all(math.isfinite(x) for x in (last_loss, first_loss or 0.0)):
        notes.add("non-finite loss (first %r, last %r)" % (first_loss, last_loss),
                  all_ranks=True)

    peak_mb = torch.cuda.max_memory_allocated(device) / 1e6 if is_cuda else None
    mine = dict(rank=rank, ms_median=statistics.median(step_ms),
                ms_mean=statistics.fmean(step_ms), ms_min=min(step_ms), ms_max=max(step_ms),
                wall_ms_per_step=wall_ms, peak_mem_mb=peak_mb, loss_first=first_loss,
                loss_last=last_loss, notes=[n for n in notes.items] if rank != 0 else [])
    if distributed:
        ranks = [None] * world
        dist.all_gather_object(ranks, mine)
    else:
        ranks = [mine]
    if rank != 0:
        return 0

    medians = [r["ms_median"] for r in ranks]
    means = [r["ms_mean"] for r in ranks]
    ms_median = statistics.median(medians)
    ms_median_max = max(medians)
    tokens = args.batch_size * args.seq_len
    tps_gpu = tokens / (ms_median / 1e3)
    peaks = [r["peak_mem_mb"] for r in ranks if r["peak_mem_mb"] is not None]
    peak = max(peaks) if peaks else None
    gpu = torch.cuda.get_device_name(device) if is_cuda else "cpu"
    for r in ranks[1:]:
        for n in r["notes"]:
            if n not in notes.items:
                notes.items.append("rank %d: %s" % (r["rank"], n))

    result = {
        "peer": "pytorch-ddp",
        "world": world,
        "amp": args.amp,
        "compile": "compile" if compile_used else "none",
        "compile_requested": args.compile,
        "config": dict(cfg, head_dim=args.hidden_dim // args.num_heads,
                       batch_size=args.batch_size, steps=args.steps, warmup=warmup,
                       lr=args.lr, seed=args.seed, params=n_params,
                       tokens_per_step_per_gpu=tokens, gqa=gqa_mode,
                       attention="sdpa" if HAVE_SDPA else "written-out",
                       optimizer="adamw-" + opt_kind, device=device.type,
                       backend=("nccl" if is_cuda else "gloo") if distributed else None,
                       ddp=distributed,
                       ddp_compile=args.ddp_compile if distributed and compile_used else None),
        "ms_per_step_median": ms_median,
        "ms_per_step_mean": statistics.median(means),
        "ms_per_step_median_max_rank": ms_median_max,
        "ms_per_step_mean_max_rank": max(means),
        "tokens_per_s_per_gpu": tps_gpu,
        "tokens_per_s": tps_gpu * world,
        "tokens_per_s_per_gpu_slowest_rank": tokens / (ms_median_max / 1e3),
        "peak_mem_mb": peak,
        "compile_first_step_s": compile_s,
        "loss_first": first_loss,
        "loss_last": last_loss,
        "per_rank": [{k: v for k, v in r.items() if k != "notes"} for r in ranks],
        "notes": notes.items,
        "torch": torch.__version__,
        "gpu": gpu,
        "nccl": nccl_version() if is_cuda else None,
        "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
    }

    line = ("pytorch-ddp | world %d | %s | %s | %.3f ms/step median (mean %.3f, slowest rank "
            "%.3f) | %s tokens/s/GPU | %s tokens/s | peak %s | loss %.4f -> %.4f | %s"
            % (world, args.amp, result["compile"], ms_median, result["ms_per_step_mean"],
               ms_median_max, fmt_int(tps_gpu), fmt_int(tps_gpu * world),
               "%.1f MB" % peak if peak is not None else "n/a",
               first_loss if first_loss is not None else float("nan"), last_loss, gpu))
    print(line, flush=True)
    if args.json:
        parent = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(parent, exist_ok=True)
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
