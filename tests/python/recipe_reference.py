"""The training recipe written from PyTorch's own pieces (issue 41): the
learning-rate schedules as independent formulas (nanoGPT's and llm.c's
conventions), torch.optim.AdamW with parameter groups, LambdaLR,
torch.nn.utils.clip_grad_norm_ and gradient accumulation the way PyTorch
users write it (loss / K, backward per micro-batch, one step)."""

import math
import warnings

import numpy as np
import torch

from parity_reference import mean_loss


def schedule_lr(step, recipe):
    """The learning rate of 0-based optimizer step `step` (docs/TRAINING.md)."""
    peak, floor = recipe["lr"], recipe["min_lr"]
    warmup, total = recipe["warmup"], recipe["total"]
    if step < warmup:
        return peak * (step + 1) / warmup  # llm.c's linear warm-up
    kind = recipe["schedule"]
    if kind == "constant":
        return peak
    if kind == "wsd":
        start = total - recipe["decay_steps"]
        if step < start:
            return peak
        return floor + (peak - floor) * (1 - (step - start) / recipe["decay_steps"])
    ratio = (step - warmup) / (total - warmup)
    if kind == "cosine":
        return floor + 0.5 * (1 + math.cos(math.pi * ratio)) * (peak - floor)
    return floor + (1 - ratio) * (peak - floor)  # linear


def nanogpt_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    """nanoGPT's get_lr after its warm-up (train.py); the warm-up differs."""
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def lambdalr_rates(recipe):
    """The rates torch.optim.lr_scheduler.LambdaLR gives a parameter group."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=recipe["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: schedule_lr(s, recipe) / recipe["lr"])
    rates = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()"
        for _ in range(recipe["total"]):
            rates.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    return rates


def param_groups(params, recipe):
    """AdamW's groups: every tensor decays, or the matrices only (not the norms)."""
    if not recipe["matrices_only"]:
        return [{"params": list(params.values()), "weight_decay": recipe["weight_decay"]}]
    decay = [t for n, t in params.items() if t.dim() == 2]
    keep = [t for n, t in params.items() if t.dim() != 2]
    return [{"params": decay, "weight_decay": recipe["weight_decay"]},
            {"params": keep, "weight_decay": 0.0}]


def recipe_replay(init, batches, cfg, recipe, dtype=torch.float64, device="cpu", autocast=None):
    """Train from init; return (losses, grad norms, final weights).

    batches: per step [K*B, S+1] rows, K = recipe["accum"] micro-batches of
    B rows. autocast: a low-precision dtype to run forward and backward in
    (fp32 parameters and AdamW, the PyTorch user's mixed precision), or None.
    """
    params = {name: torch.tensor(a, dtype=dtype, device=device, requires_grad=True)
              for name, a in init.items()}
    opt = torch.optim.AdamW(param_groups(params, recipe), lr=recipe["lr"],
                            betas=recipe["betas"], eps=recipe["eps"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: schedule_lr(s, recipe) / recipe["lr"])
    k = recipe["accum"]
    losses, norms = [], []
    for rows in batches:
        opt.zero_grad()
        micro = np.split(rows, k)
        total = 0.0
        for part in micro:
            tokens = torch.tensor(part, dtype=torch.long, device=device)
            if autocast is None:
                loss = mean_loss(params, tokens, cfg)
            else:
                with torch.autocast(device_type=device, dtype=autocast):
                    loss = mean_loss(params, tokens, cfg)
            (loss.float() / k if autocast is not None else loss / k).backward()
            total += loss.item() / k
        losses.append(total)
        clip = recipe["clip"]
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()),
                                              clip if clip > 0 else float("inf"))
        norms.append(float(norm))
        opt.step()
        sched.step()
    final = {name: t.detach().cpu().double().numpy() for name, t in params.items()}
    return losses, norms, final
