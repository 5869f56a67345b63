#!/usr/bin/env python3
"""A tinyllama model exported with --export-hf computes tinyllama's loss elsewhere.

For a few small configurations the binary trains 60 steps and exports the
model as a Hugging Face LLaMA directory (config.json + model.safetensors),
then a second run starts from that directory (--init-from DIR) and reports
the loss of its first step on a batch it dumps (--dump-dir). That loss, in
fp32, is compared (|a - b| / |b|, limit 1e-5, the fp32 parity bar of
test_parity.py) with the loss of the same tokens under:

  reference     a float64 LLaMA written here from Hugging Face's modeling
                code's math: the tensors by their Hugging Face names, the
                config.json values (rms_norm_eps, rope_theta, heads, kv
                heads, tie_word_embeddings), RoPE as rotate_half. It runs
                wherever torch does (CTest hf_export_reference_cpu);
  transformers  transformers.LlamaForCausalLM.from_pretrained(DIR) itself,
                in float64 with eager attention (CTest hf_export_transformers;
                exit status 77, SKIPPED, when transformers cannot be
                imported, as on CI's Debian torch);
  generate-reference, generate
                tinyllama generate's greedy tokens (--temperature 0, with its
                KV cache) against greedy decoding by the reference above
                (rerun on the whole sequence per token; CTest
                hf_generate_reference_cpu) or by transformers' generate
                (float64; CTest hf_generate_transformers, skipped likewise),
                token for token; a difference is allowed only where the
                reference's two best logits are a near tie that fp32 cannot
                separate.

All compute what a user of the directory gets, so a q/k row order that
did not match rotate_half, a wrong eps or theta, or a vocabulary padded
into the export would show here. The reference's agreement also checks
the second run: --init-from DIR read the weights back to what was trained.

  /usr/bin/python3 tests/python/test_hf_export.py --binary build/tinyllama
  python3 tests/python/test_hf_export.py --binary build/tinyllama --check transformers \\
      --device cuda
  python3 tests/python/test_hf_export.py --binary build/tinyllama --check generate-reference
  python3 tests/python/test_hf_export.py --binary build/tinyllama --check generate
  python3 tests/python/test_hf_export.py --binary build/tinyllama --check generate --device cuda

Exit status: 0 pass, 1 a check failed, 2 the binary failed, 77 skipped.
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_io import read_safetensors  # noqa: E402  (no safetensors package needed)

TOL = 1e-5
SKIPPED = 77

# Irregular small shapes: MHA and GQA, head_dim 8 and 16, a vocabulary that
# the engine pads internally (61 -> 128 rows) but the export must not.
CONFIGS = {
    "gqa": dict(vocab=61, dim=64, layers=2, heads=4, kv_heads=2, ffn=96, seq=21, batch=3, seed=5),
    "mha": dict(vocab=97, dim=48, layers=3, heads=6, kv_heads=6, ffn=80, seq=17, batch=2, seed=8),
}


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError("%s\nexit status %d\n%s" % (" ".join(cmd), proc.returncode,
                                                      proc.stderr))


def model_flags(cfg):
    return ["--vocab-size", str(cfg["vocab"]), "--hidden-dim", str(cfg["dim"]),
            "--num-layers", str(cfg["layers"]), "--num-heads", str(cfg["heads"]),
            "--num-kv-heads", str(cfg["kv_heads"]), "--ffn-dim", str(cfg["ffn"]),
            "--seq-len", str(cfg["seq"]), "--batch-size", str(cfg["batch"])]


def export_and_reload(binary, device, cfg, workdir):
    """The exported directory, the reloaded run's first loss and its batch."""
    hf_dir = os.path.join(workdir, "hf")
    # Trained hard enough that attention is far from uniform: with the
    # initial weights' near-uniform attention, RoPE (and so the q/k row
    # order) hardly moves the loss; after these steps interleaved pairs read
    # as rotate-half move it by 1e-3, a hundred times the limit.
    run([binary, "train", "--device", device] + model_flags(cfg) +
        ["--num-steps", "60", "--warmup-steps", "0", "--seed", str(cfg["seed"]),
         "--learning-rate", "3e-2", "--export-hf", hf_dir])
    dump = os.path.join(workdir, "dump")
    report = os.path.join(workdir, "report.json")
    run([binary, "train", "--device", device] + model_flags(cfg) +
        ["--num-steps", "1", "--warmup-steps", "0", "--seed", str(cfg["seed"] + 1),
         "--init-from", hf_dir, "--dump-dir", dump, "--json", report])
    with open(report) as f:
        loss = json.load(f)["losses"][0]
    rows = read_safetensors(os.path.join(dump, "batches.safetensors"))["step1"][1]
    return hf_dir, float(loss), torch.from_numpy(rows.astype(np.int64))


def rms_norm(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def reference_loss(hf_dir, rows):
    """Hugging Face LLaMA's loss, in float64, from the directory alone."""
    logits = reference_logits(hf_dir, rows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)).item()


def reference_logits(hf_dir, inputs):
    """Hugging Face LLaMA's forward pass, in float64, from the directory alone."""
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = json.load(f)
    p = {name: torch.from_numpy(a.astype(np.float64))
         for name, (_, a) in read_safetensors(os.path.join(hf_dir, "model.safetensors")).items()}
    h, kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c["hidden_size"] // h
    eps = c["rms_norm_eps"]
    bsz, seq = inputs.shape
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)
    x = p["model.embed_tokens.weight"][inputs]
    for layer in range(c["num_hidden_layers"]):
        pre = "model.layers.%d." % layer
        a = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = (a @ p[pre + "self_attn.q_proj.weight"].t()).view(bsz, seq, h, hd).transpose(1, 2)
        k = (a @ p[pre + "self_attn.k_proj.weight"].t()).view(bsz, seq, kv, hd).transpose(1, 2)
        v = (a @ p[pre + "self_attn.v_proj.weight"].t()).view(bsz, seq, kv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(h // kv, dim=1)
        v = v.repeat_interleave(h // kv, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd) + mask
        o = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(bsz, seq, h * hd)
        x = x + o @ p[pre + "self_attn.o_proj.weight"].t()
        m = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        gate = m @ p[pre + "mlp.gate_proj.weight"].t()
        up = m @ p[pre + "mlp.up_proj.weight"].t()
        x = x + (F.silu(gate) * up) @ p[pre + "mlp.down_proj.weight"].t()
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if c["tie_word_embeddings"] else p["lm_head.weight"]
    return x @ head.t()


def transformers_loss(hf_dir, rows, device):
    from transformers import LlamaForCausalLM
    kwargs = dict(output_loading_info=True)
    try:
        model, info = LlamaForCausalLM.from_pretrained(hf_dir, attn_implementation="eager",
                                                       **kwargs)
    except TypeError:  # transformers before attn_implementation (4.36)
        model, info = LlamaForCausalLM.from_pretrained(hf_dir, **kwargs)
    # Every tensor used, none made up: only the tied head may be "missing".
    missing = [k for k in info.get("missing_keys", []) if k != "lm_head.weight"]
    if missing or info.get("unexpected_keys") or info.get("mismatched_keys"):
        raise AssertionError("loading info: %s" % info)
    if not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight):
        raise AssertionError("lm_head is not tied to the embedding")
    model = model.to(device=device, dtype=torch.float64).eval()
    inputs, targets = rows[:, :-1].to(device), rows[:, 1:].to(device)
    with torch.no_grad():
        logits = model(input_ids=inputs).logits
    if logits.shape[-1] != model.config.vocab_size:
        raise AssertionError("logits have %d columns, config vocab_size %d"
                             % (logits.shape[-1], model.config.vocab_size))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                           targets.reshape(-1)).item()


def greedy_tokens(binary, hf_dir, prompt, max_new, device):
    """tinyllama generate's greedy continuation (--print-ids), in float32 on
    `device` (on cuda, bfloat16 would be the default: too coarse for a
    token-for-token comparison with float64)."""
    proc = subprocess.run([binary, "generate", "--weights", hf_dir, "--prompt-ids",
                           ",".join(str(t) for t in prompt), "--max-new-tokens", str(max_new),
                           "--temperature", "0", "--print-ids", "--device", device,
                           "--dtype", "float32"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    # The text line holds the ids as raw bytes (the byte codec): bytes, not str.
    if proc.returncode != 0:
        raise RuntimeError("generate: exit status %d\n%s"
                           % (proc.returncode, proc.stderr.decode(errors="replace")))
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(b"ids | "):
            return [int(t) for t in line[len(b"ids | "):].decode().split(",")]
    raise RuntimeError("generate printed no ids line:\n" + proc.stdout.decode(errors="replace"))


def compare_greedy(ours, theirs, scores, max_new):
    """Token for token; at the first difference the reference's two best
    logits must be a near tie (closer than fp32 can separate, 1e-4 of the
    largest logit): tinyllama decodes in fp32, the reference in float64.
    Returns the tokens compared and a note; raises AssertionError."""
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            row = scores(i)
            top2 = torch.topk(row, 2).values
            margin = (top2[0] - top2[1]).item()
            if margin > 1e-4 * row.abs().max().item():
                raise AssertionError("token %d: tinyllama %d, reference %d (margin %.3g); "
                                     "tinyllama %s, reference %s" % (i, a, b, margin, ours, theirs))
            return i, "near tie at token %d (margin %.2g)" % (i, margin)
    if len(ours) != max_new or len(theirs) != max_new:
        raise AssertionError("lengths %d and %d, expected %d" % (len(ours), len(theirs), max_new))
    return max_new, "identical"


def write_safetensors(path, tensors, metadata):
    """float32 tensors {name: numpy array} in the safetensors format."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def sharpened_copy(hf_dir, out_dir, seed):
    """The exported model with its weights pushed far from the initial
    N(0, 0.02) (trained on uniform random tokens, it predicts one token
    whatever the prompt, which would make greedy decoding a weak check),
    written the way transformers writes it (metadata format pt only)."""
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(os.path.join(hf_dir, "config.json"), out_dir)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, (_, a) in read_safetensors(os.path.join(hf_dir, "model.safetensors")).items():
        scale = 0.6 if a.ndim == 2 else 0.2
        tensors[name] = a + scale * rng.standard_normal(a.shape)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, {"format": "pt"})
    return out_dir


def greedy_check(binary, hf_dir, rows, device, use_transformers, max_new=24):
    """tinyllama generate's greedy continuation of a prompt against the
    reference's (float64): transformers' generate, or the Hugging Face-math
    model above rerun on the whole sequence for every token."""
    hf_dir = sharpened_copy(hf_dir, hf_dir + "_sharp", seed=int(rows[0, 0]))
    prompt = rows[0, :8].tolist()
    ours = greedy_tokens(binary, hf_dir, prompt, max_new, device)
    if use_transformers:
        from transformers import LlamaForCausalLM
        try:
            model = LlamaForCausalLM.from_pretrained(hf_dir, attn_implementation="eager")
        except TypeError:
            model = LlamaForCausalLM.from_pretrained(hf_dir)
        model = model.to(device=device, dtype=torch.float64).eval()
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt], device=device), do_sample=False,
                                 max_new_tokens=max_new, min_new_tokens=max_new,
                                 output_scores=True, return_dict_in_generate=True,
                                 pad_token_id=0)
        theirs = out.sequences[0, len(prompt):].tolist()
        return check_varied(
            ours, compare_greedy(ours, theirs, lambda i: out.scores[i][0].double().cpu(), max_new))
    seq, rows_scores = list(prompt), []
    for _ in range(max_new):
        last = reference_logits(hf_dir, torch.tensor([seq]))[0, -1]
        rows_scores.append(last)
        seq.append(int(torch.argmax(last)))
    return check_varied(
        ours, compare_greedy(ours, seq[len(prompt):], lambda i: rows_scores[i], max_new))


def check_varied(ours, result):
    # One token repeated would pass whatever the cache held: not a check.
    if len(set(ours)) < 4:
        raise AssertionError("the greedy continuation %s has too few distinct tokens to tell "
                             "anything apart" % ours)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where tinyllama trains and generates and transformers runs "
                        "(default cpu)")
    parser.add_argument("--check", default="reference",
                        choices=("reference", "transformers", "generate-reference",
                                 "generate"),
                        help="reference: the loss under the float64 Hugging Face-math LLaMA; "
                        "transformers: under LlamaForCausalLM; generate-reference, generate: "
                        "tinyllama generate's greedy tokens against that model's greedy "
                        "decoding, or transformers' greedy generate")
    parser.add_argument("--configs", nargs="*", default=sorted(CONFIGS))
    parser.add_argument("--workdir", help="keep the exports here")
    args = parser.parse_args()

    if args.check in ("transformers", "generate"):
        try:
            import transformers
        except ImportError as e:
            print("SKIPPED: transformers cannot be imported (%s); run this where it is "
                  "installed" % e)
            return SKIPPED
        print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="tinyllama_hf_export_") as tmp:
        root = args.workdir or tmp
        for name in args.configs:
            cfg = CONFIGS[name]
            workdir = os.path.join(root, name)
            os.makedirs(workdir, exist_ok=True)
            try:
                hf_dir, ours, rows = export_and_reload(args.binary, args.device, cfg, workdir)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                print("ERROR: the binary failed on config %s: %s" % (name, e))
                return 2
            if args.check.startswith("generate"):
                try:
                    count, note = greedy_check(args.binary, hf_dir, rows, args.device,
                                               args.check == "generate")
                    print("  %-4s greedy: %d tokens compared, %s ok" % (name, count, note))
                except AssertionError as e:
                    failures += 1
                    print("  %-4s greedy FAIL: %s" % (name, e))
                continue
            if args.check == "reference":
                theirs = reference_loss(hf_dir, rows)
            else:
                theirs = transformers_loss(hf_dir, rows, args.device)
            err = abs(ours - theirs) / abs(theirs)
            ok = err <= TOL and math.isfinite(ours)
            failures += 0 if ok else 1
            print("  %-4s tinyllama %.8f  %s %.8f  rel err %.2e (tol %g) %s"
                  % (name, ours, args.check, theirs, err, TOL, "ok" if ok else "FAIL"))
    print("%s: %d of %d configs pass (%s)" % ("PASS" if failures == 0 else "FAIL",
                                             len(args.configs) - failures, len(args.configs),
                                             "greedy tokens" if args.check.startswith("generate")
                                             else "loss within %g" % TOL))
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
