#!/usr/bin/env python3
"""tinyllama's SentencePiece encoding agrees with python3-sentencepiece id for id.

The binary trains a small BPE tokenizer (tinyllama tokenizer train) on a
corpus written here, then encodes varied texts -- English, code, CJK,
emoji, whitespace runs, and bytes that are not UTF-8 -- two ways:

  tokenizer encode --input FILE   the file's bytes as one text;
  prepare --tokenizer             documents as BOS, ids, EOS in a shard
                                  (the llm.c header read here).

Both must equal sentencepiece.SentencePieceProcessor's encode of the same
bytes with the same model file, and decoding must give the text back
(invalid UTF-8: SentencePiece reads every bad byte as U+FFFD, and so does
tinyllama, by calling it). The model file is also read by the Python
package directly, so a file tinyllama writes is a file SentencePiece loads.

  /usr/bin/python3 tests/python/test_tokenizer.py --binary build/tinyllama

Exit status: 0 pass, 1 a check failed, 2 the binary failed.
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile

import sentencepiece as spm

TEXTS = [
    b"The quick brown fox jumps over the lazy dog.",
    b"  Leading spaces, trailing spaces   \tand tabs\n\nand blank lines\n",
    b"def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)  # 42\n",
    b"for (int i = 0; i < 1024; ++i) { sum += a[i] * b[i]; }",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.".encode(),
    "Emoji: 🙂 🚀 👩‍💻 🇫🇷 and a llama 🦙".encode(),
    "Accents: café, naïve, Ünïcödé, ÿ; math: ∑ x² ≤ ∞".encode(),
    b"Invalid UTF-8: \xff\xfe then a lone continuation \x80 and a cut \xe6\x97",
    b"\xc0\xaf overlong, \xed\xa0\x80 surrogate, \xf4\x90\x80\x80 past U+10FFFF",
    b"digits 3.14159265358979 and 1,000,000",
]

CORPUS_LINES = [
    "The cat sat on the mat and looked at the dog.",
    "Once upon a time there was a little llama who liked to read.",
    "def main():\n    print('hello world')",
    "int add(int a, int b) { return a + b; }",
    "東京と京都は日本の都市です。",
    "Numbers: 12 345 6789 and more text about tokens.",
    "Emoji 🙂 and symbols like © ® ™ appear sometimes.",
]


def run(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True)
    if r.returncode != 0:
        print("FAIL: %s %s\n%s" % (binary, " ".join(args), r.stderr.decode(errors="replace")))
        sys.exit(2)
    return r.stdout


def ids_of(text):
    text = text.strip()
    return [int(x) for x in text.split(b",")] if text else []


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack_from("<3i", data)
    width = {(20240520, 1): "H", (20240801, 7): "I"}[(magic, version)]
    return list(struct.unpack_from("<%d%s" % (count, width), data, 1024))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    args = p.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            for i in range(80):
                for line in CORPUS_LINES:
                    f.write("%s %d\n" % (line, i))
        model = os.path.join(tmp, "tok.model")
        run(args.binary, "tokenizer", "train", "--input", corpus, "--output", model,
            "--vocab-size", "600")
        sp = spm.SentencePieceProcessor(model_file=model)
        assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 2, 3)

        for i, text in enumerate(TEXTS):
            path = os.path.join(tmp, "t%d.txt" % i)
            with open(path, "wb") as f:
                f.write(text)
            ours = ids_of(run(args.binary, "tokenizer", "encode", "--model", model, "--input", path))
            theirs = sp.encode(text)
            ids = ",".join(map(str, ours))
            back = run(args.binary, "tokenizer", "decode", "--model", model, "--ids", ids)
            # Valid UTF-8 decodes to itself; invalid bytes to one U+FFFD each.
            valid = text.decode("utf-8", errors="ignore").encode() == text
            ok = ours == theirs and back.decode()[:-1] == sp.decode(theirs)
            ok = ok and (not valid or sp.decode(theirs).encode() == text)
            failures += not ok
            print("%s encode %r: %d ids" % ("ok  " if ok else "FAIL", text[:40], len(ours)))
            if not ok:
                print("  tinyllama:   %s\n  sentencepiece: %s" % (ours, theirs))

        # The same texts as documents of one file through prepare.
        docs = os.path.join(tmp, "docs.txt")
        with open(docs, "wb") as f:
            f.write(b"\n%\n".join(TEXTS) + b"\n")
        shards = os.path.join(tmp, "shards")
        run(args.binary, "prepare", "--tokenizer", model, "--input", docs, "--doc-separator", "%",
            "--val-fraction", "0", "--output-dir", shards)
        expected = []
        for text in TEXTS:  # each document ends before the newline that ends its last line
            expected += [sp.bos_id()] + sp.encode(text) + [sp.eos_id()]
        got = read_shard(os.path.join(shards, "train_000000.bin"))
        ok = got == expected
        failures += not ok
        print("%s prepare --tokenizer: %d tokens in %d documents" % ("ok  " if ok else "FAIL",
                                                                     len(got), len(TEXTS)))
        copy = spm.SentencePieceProcessor(model_file=os.path.join(shards, "tokenizer.model"))
        ok = all(copy.encode(t) == sp.encode(t) for t in TEXTS)
        failures += not ok
        print("%s shards/tokenizer.model loads in sentencepiece and encodes alike" %
              ("ok  " if ok else "FAIL"))
    print("tokenizer parity: %s" % ("PASS" if failures == 0 else "%d FAILED" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
