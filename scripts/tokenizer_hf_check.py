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
                 pipeline("text-generation", model=DIR) generates those
                 tokens and returns the prompt joined to their text, either
                 as generate printed it or, as the transformers the device
                 ran does (its PR 45860 describes the change), prompt + decode(new ids), which drops the space
                 before the first new word ("Thefollowing"; see
                 check_pipeline). Skipped, with a message, where
                 transformers cannot be imported.
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
    import transformers
    report["transformers"] = transformers.__version__
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
    ok &= check_pipeline(args, tok, out[0].tolist(), inputs.shape[1], len(generated), pipeline, report)
    return ok


def check_pipeline(args, tok, ids, n_in, n_new, pipeline, report):
    """pipeline("text-generation") against transformers' own generate().

    What the pipeline guarantees: it generates with model.generate(), and
    its generated_text (return_full_text) is the prompt string followed by
    the decoded continuation. How the continuation is decoded changed:
    before the change described in transformers PR 45860 it was decode(all ids) with the
    first len(decode(prompt ids)) characters cut off, which keeps the space
    between "The" and " following"; since then it is decode(new ids) alone,
    and a Llama-style decoder (LlamaTokenizer's Strip(left=1) when
    add_prefix_space, as sentencepiece's own decode) drops the leading space
    of the first piece, giving "Thefollowing". No tokenizer_config setting
    keeps the dummy prefix on encode without that strip on decode, and a
    decoder without it would give every whole-sequence decode a leading
    space, so both joins pass here: the ids must be generate()'s, and the
    text one of the two joins of exactly those ids.
    """
    pipe = pipeline("text-generation", model=args.dir, tokenizer=args.dir)
    call = dict(max_new_tokens=n_new, do_sample=False, clean_up_tokenization_spaces=False)
    text = pipe(args.prompt, **call)[0]["generated_text"]
    pipe_ids = [int(i) for i in pipe(args.prompt, return_tensors=True, **call)[0]["generated_token_ids"]]
    whole = tok.decode(ids, skip_special_tokens=True)
    cut = len(tok.decode(ids[:n_in], skip_special_tokens=True))
    new = tok.decode(ids[n_in:], skip_special_tokens=True)
    joins = {"prompt + decode(all ids)[len(decode(prompt ids)):]": args.prompt + whole[cut:],
             "prompt + decode(new ids)": args.prompt + new}
    how = [name for name, want in joins.items() if text == want]
    good_ids = pipe_ids == ids
    good = good_ids and whole.startswith(args.prompt) and bool(how)
    print("%s pipeline('text-generation', model=DIR): %s; text %s: %r" % (
        "ok  " if good else "FAIL",
        "generate()'s ids" if good_ids else "ids differ from generate()'s",
        "= " + how[0] if how else "is neither join of those ids", text[:80]))
    if how and text != whole:
        print("     (the continuation's leading space is dropped: transformers decodes the new ids alone)")
    report["pipeline_text"] = text
    report["pipeline_join"] = how[0] if how else None
    report["pipeline_ids_equal_generate"] = good_ids
    return good


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
