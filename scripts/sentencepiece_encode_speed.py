#!/usr/bin/env python3
"""The sentencepiece Python package's batch encode of a corpus, for the
speed comparison with `tinyllama prepare --tokenizer` (docs/TOKENIZER.md):
the same documents prepare makes by default (paragraphs between empty
lines; the file read without newline translation), encoded by
SentencePieceProcessor.encode(list, num_threads=N).

  /usr/bin/python3 scripts/sentencepiece_encode_speed.py MODEL CORPUS THREADS
"""
import sys
import time

import sentencepiece as spm


def paragraphs(text):
    docs, lines = [], []
    for line in text.split("\n"):
        if line == "":
            if lines:
                docs.append("\n".join(lines))
            lines = []
        else:
            lines.append(line)
    if lines:
        docs.append("\n".join(lines))
    return docs


def main():
    model, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    t0 = time.time()
    sp = spm.SentencePieceProcessor(model_file=model)
    with open(path, encoding="utf-8", newline="") as f:
        docs = paragraphs(f.read())
    t1 = time.time()
    ids = sp.encode(docs, num_threads=threads)
    t2 = time.time()
    tokens = sum(len(x) + 2 for x in ids)  # with BOS and EOS, as prepare writes them
    print("sentencepiece %s, %d threads: %d documents, %d tokens with BOS/EOS; "
          "encode %.2f s, read and split %.2f s" %
          (spm.__version__, threads, len(docs), tokens, t2 - t1, t1 - t0))


if __name__ == "__main__":
    main()
