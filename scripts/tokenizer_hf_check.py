#!/usr/bin/env python3
"""The Python side of scripts/tokenizer-check: an --export-hf directory read
by sentencepiece and transformers, against what tinyllama printed.

Writes OUT/loss_curve.csv (step, loss from train --json) and
OUT/hf_check.json, and checks:
  sentencepiece  DIR/tokenizer.model encodes the prompt to tinyllama's ids
                 and decodes tinyllama's ids to the text generate printed;
  transformers   AutoTokenizer.from_pretrained(DIR) encodes the prompt as
                 BOS + those ids; AutoModelForCausalLM's greedy generate()
                 gives tinyllama's greedy tokens token for token (a
                 difference only where float64 logits show a near tie);
                 pipeline("text-generation", model=DIR) runs and continues
                 the prompt with the text of those tokens. Skipped, with a
                 message, where transformers cannot be imported.
Exit status: 0 pass (or transformers skipped), 1 a check failed.
"""

import argparse
import json
import os
import sys

import sentencepiece as spm


def parse_sample(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    body, _, ids = text.rpartition("ids | ")
    return body[:-1], [int(x) for x in ids.strip().split(",") if x]


def write_loss_curve(train_json, out):
    with open(train_json) as f:
        losses = json.load(f)["losses"]
    with open(os.path.join(out, "loss_curve.csv"), "w") as f:
        f.write("step,loss\n")
        for i, loss in enumerate(losses, 1):
            f.write("%d,%.6f\n" % (i, loss))
    return losses


def check_sentencepiece(args, prompt_ids, text, generated):
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.dir, "tokenizer.model"))
    ok_ids = sp.encode(args.prompt) == prompt_ids
    ok_text = sp.decode([sp.bos_id()] + prompt_ids + generated) == text
    print("%s sentencepiece: tokenizer.model encodes the prompt to tinyllama's ids" %
          ("ok  " if ok_ids else "FAIL"))
    print("%s sentencepiece: tinyllama's ids decode to the text generate printed" %
          ("ok  " if ok_text else "FAIL"))
    return ok_ids and ok_text, sp.bos_id()


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def check_transformers(args, prompt_ids, generated, bos, report):
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
    except ImportError as e:
        print("skip transformers: cannot import it (%s); the sentencepiece checks stand" % e)
        report["transformers"] = "skipped: %s" % e
        return True
    ok = True
    tok = AutoTokenizer.from_pretrained(args.dir)
    enc = tok(args.prompt).input_ids
    good = enc == [bos] + prompt_ids
    ok &= good
    print("%s AutoTokenizer (%s): the prompt is BOS + tinyllama's ids" %
          ("ok  " if good else "FAIL", type(tok).__name__))
    model = AutoModelForCausalLM.from_pretrained(args.dir, torch_dtype=torch.float32)
    model.eval()
    inputs = torch.tensor([[bos] + prompt_ids])
    with torch.no_grad():
        out = model.generate(inputs, max_new_tokens=len(generated), do_sample=False, num_beams=1)
    theirs = out[0, inputs.shape[1]:].tolist()
    at = first_difference(theirs, generated)
    if at is not None and at < min(len(theirs), len(generated)):
        with torch.no_grad():
            logits = model.double()(torch.tensor([[bos] + prompt_ids + generated[:at]])).logits[0, -1]
        top = torch.topk(logits, 2).values
        gap = float(top[0] - top[1])
        near_tie = gap < 1e-4 * max(1.0, float(top[0].abs()))
        report["first_difference"] = {"position": at, "logit_gap": gap, "near_tie": near_tie}
        good = near_tie
    else:
        good = at is None
    ok &= good
    print("%s transformers greedy generate(): %d tokens, %s" %
          ("ok  " if good else "FAIL", len(theirs),
           "equal to tinyllama's" if at is None else "first difference at %d" % at))
    report["transformers_tokens"] = theirs
    pipe = pipeline("text-generation", model=args.dir, tokenizer=args.dir)
    text = pipe(args.prompt, max_new_tokens=len(generated), do_sample=False)[0]["generated_text"]
    want = tok.decode(out[0], skip_special_tokens=True)
    good = text.startswith(args.prompt) and text == want
    ok &= good
    print("%s pipeline('text-generation', model=DIR): %r" % ("ok  " if good else "FAIL", text[:80]))
    report["pipeline_text"] = text
    return ok


def main():
    p = argparse.ArgumentParser()
    for flag in ("--dir", "--prompt", "--prompt-ids", "--sample", "--train-json", "--out"):
        p.add_argument(flag, required=True)
    args = p.parse_args()
    prompt_ids = [int(x) for x in args.prompt_ids.split(",") if x]
    text, generated = parse_sample(args.sample)
    losses = write_loss_curve(args.train_json, args.out)
    report = {"prompt": args.prompt, "prompt_ids": prompt_ids, "tinyllama_tokens": generated,
              "tinyllama_text": text, "first_loss": losses[0], "final_loss": losses[-1]}
    ok, bos = check_sentencepiece(args, prompt_ids, text, generated)
    ok &= check_transformers(args, prompt_ids, generated, bos, report)
    report["pass"] = bool(ok)
    with open(os.path.join(args.out, "hf_check.json"), "w") as f:
        json.dump(report, f, indent=2, ensure_ascii=False)
    print("tokenizer-check: %s (loss %.3f -> %.3f; %s)" %
          ("PASS" if ok else "FAIL", losses[0], losses[-1], os.path.join(args.out, "hf_check.json")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
