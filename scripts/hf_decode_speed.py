#!/usr/bin/env python3
"""transformers' greedy generate on a Hugging Face directory, timed like
`tinyllama generate` times itself: decode tokens/s over the steps after the
prefill, at batch 1, in bfloat16 on the GPU. Used by scripts/decode-check to
measure tinyllama's decoder beside transformers in the same call.

The decode time is that of a generate of N new tokens less that of a
generate of 1 (the prefill and the first token), each the median of
--repeats runs after a warm-up, with the device synchronised around them.
Prints one line:
  transformers X, torch Y: decode N tokens: R tokens/s (prefill P tokens: S ms) | ids 1,2,...
"""

import argparse
import statistics
import time

import torch
import transformers
from transformers import LlamaForCausalLM


def timed_generate(model, prompt, new_tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompt, do_sample=False, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, pad_token_id=0)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out[0, prompt.shape[1]:].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hf_dir")
    parser.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    parser.add_argument("--max-new-tokens", type=int, default=257)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    model = LlamaForCausalLM.from_pretrained(args.hf_dir, torch_dtype=torch.bfloat16)
    model = model.to("cuda").eval()
    prompt = torch.tensor([[int(t) for t in args.prompt_ids.split(",")]], device="cuda")
    timed_generate(model, prompt, 8)  # warm-up: kernels, allocator, cuBLAS handles
    first = statistics.median(timed_generate(model, prompt, 1)[0] for _ in range(args.repeats))
    runs = [timed_generate(model, prompt, args.max_new_tokens) for _ in range(args.repeats)]
    whole = statistics.median(r[0] for r in runs)
    steps = args.max_new_tokens - 1
    print("transformers %s, torch %s: decode %d tokens: %.1f tokens/s (prefill %d tokens and "
          "the first: %.1f ms) | ids %s"
          % (transformers.__version__, torch.__version__, steps, steps / (whole - first),
             prompt.shape[1], first * 1e3, ",".join(str(t) for t in runs[0][1])))


if __name__ == "__main__":
    main()
