#!/usr/bin/env python3
"""The bench's PyTorch peer (scripts/peer/torch_peer.py) computes tinyllama's
model: its loss and every gradient of step 1, from the weights and the batch
tinyllama itself started from and drew (train --dump-dir, on the CPU, fp32),
match the ones tinyllama dumped.

    test_peer_model.py --binary build/tinyllama --peer-script scripts/peer/torch_peer.py

A control swaps the two rows of every RoPE pair in the peer's q and k
weights (a wrong pairing convention) and must fail the same comparison, so
the check can tell a wrong model from a right one. Exit 77 (skipped)
without torch.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIPPED: torch cannot be imported")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_binary  # noqa: E402  (the parity check's binary runner and dump reader)

CFG = dict(vocab=64, dim=32, layers=2, heads=4, kv_heads=2, ffn=96, seq=16, batch=3, seed=7)
LOSS_TOL = 1e-5  # relative, fp32 against fp32
GRAD_TOL = 1e-4  # relative Frobenius error per tensor


def load_peer(path):
    spec = importlib.util.spec_from_file_location("torch_peer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peer_step1(peer, init, rows, swap_rope_pairs=False):
    """The peer's loss and gradients (HF names) on tinyllama's weights and batch."""
    a = argparse.Namespace(vocab_size=CFG["vocab"], hidden_dim=CFG["dim"],
                           num_layers=CFG["layers"], num_heads=CFG["heads"],
                           num_kv_heads=CFG["kv_heads"], ffn_dim=CFG["ffn"])
    model = peer.TinyLlama(a)
    t = {name: torch.tensor(arr, dtype=torch.float32) for name, arr in init.items()}
    if swap_rope_pairs:
        for name in list(t):
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                w = t[name]
                t[name] = w.view(-1, 2, w.shape[1]).flip(1).reshape(w.shape)
    with torch.no_grad():
        model.embedding.copy_(t["model.embed_tokens.weight"])
        model.norm_f.copy_(t["model.norm.weight"])
        for n, layer in enumerate(model.layers):
            p = "model.layers.%d." % n
            layer.norm1.copy_(t[p + "input_layernorm.weight"])
            layer.wqkv.copy_(torch.cat([t[p + "self_attn.%s_proj.weight" % x] for x in "qkv"]))
            layer.wo.copy_(t[p + "self_attn.o_proj.weight"])
            layer.norm2.copy_(t[p + "post_attention_layernorm.weight"])
            layer.wgu.copy_(torch.cat([t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"]]))
            layer.wdown.copy_(t[p + "mlp.down_proj.weight"])
    tokens = torch.tensor(rows, dtype=torch.long)
    cos, sin = peer.rope_tables(CFG["seq"], CFG["dim"] // CFG["heads"], "cpu")
    loss = model(tokens[:, :-1], tokens[:, 1:], cos, sin)
    loss.backward()
    q, kv = CFG["heads"] * CFG["dim"] // CFG["heads"], CFG["kv_heads"] * CFG["dim"] // CFG["heads"]
    grads = {"model.embed_tokens.weight": model.embedding.grad,
             "model.norm.weight": model.norm_f.grad}
    for n, layer in enumerate(model.layers):
        p = "model.layers.%d." % n
        gq, gk, gv = layer.wqkv.grad.split([q, kv, kv])
        gg, gu = layer.wgu.grad.split(CFG["ffn"])
        grads.update({p + "input_layernorm.weight": layer.norm1.grad,
                      p + "self_attn.q_proj.weight": gq, p + "self_attn.k_proj.weight": gk,
                      p + "self_attn.v_proj.weight": gv, p + "self_attn.o_proj.weight": layer.wo.grad,
                      p + "post_attention_layernorm.weight": layer.norm2.grad,
                      p + "mlp.gate_proj.weight": gg, p + "mlp.up_proj.weight": gu,
                      p + "mlp.down_proj.weight": layer.wdown.grad})
    return loss.item(), grads


def worst_grad_error(grads, ref):
    worst = (0.0, "")
    for name, g in ref.items():
        g_ref = torch.tensor(g, dtype=torch.float64)
        err = (grads[name].double() - g_ref).norm().item() / max(g_ref.norm().item(), 1e-30)
        worst = max(worst, (err, name))
    return worst


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True)
    p.add_argument("--peer-script", required=True)
    args = p.parse_args()
    peer = load_peer(args.peer_script)
    with tempfile.TemporaryDirectory() as work:
        run_args = argparse.Namespace(binary=args.binary, device="cpu", amp="none", extra_args="")
        outputs = parity_binary.run_binary(parity_binary.binary_command(run_args, CFG, work, 1),
                                           CFG, work, 300)
    init = parity_binary.arrays(outputs["init"])
    ref_grads = parity_binary.arrays(outputs["grads_step1"])
    rows = outputs["batches"]["step1"][1]
    ref_loss = outputs["report"]["losses"][0]

    loss, grads = peer_step1(peer, init, rows)
    loss_err = abs(loss - ref_loss) / abs(ref_loss)
    grad_err, grad_name = worst_grad_error(grads, ref_grads)
    print("peer against tinyllama: loss %.6f vs %.6f (rel %.2e, tol %.0e); worst gradient %s "
          "rel %.2e (tol %.0e)" % (loss, ref_loss, loss_err, LOSS_TOL, grad_name, grad_err,
                                   GRAD_TOL))
    _, swapped = peer_step1(peer, init, rows, swap_rope_pairs=True)
    control_err, control_name = worst_grad_error(swapped, ref_grads)
    print("control (RoPE pairs swapped in q, k): worst gradient %s rel %.2e, must exceed %.0e"
          % (control_name, control_err, GRAD_TOL))
    ok = loss_err <= LOSS_TOL and grad_err <= GRAD_TOL and control_err > GRAD_TOL
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
