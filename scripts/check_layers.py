#!/usr/bin/env python3
"""Fails when an include points up the layers (docs/ARCHITECTURE.md, Layers).

    core <- model <- cpu, cuda, io <- data, prof <- train, infer <- bench, bench_suite <- cli

A file may include its own folder and any folder of a lower layer; folders
of one layer (cpu, cuda and io; data and prof; train and infer) do not
include each other.

Within a folder, a subfolder may sit beneath the rest of it (BENEATH): the
device runtime, src/cuda/runtime, sits beneath the CUDA ops, so its files
include only cuda/runtime/ of src/cuda (and the lower layers).
"""
import pathlib
import re
import sys

RANK = {"core": 0, "dist": 1, "model": 1, "cpu": 2, "cuda": 2, "io": 2, "data": 3, "prof": 3, "train": 4,
        "infer": 4, "bench": 5, "bench_suite": 5, "cli": 6}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]*)"')
# folder -> its subfolder beneath the rest of the folder
BENEATH = {"cuda": "runtime"}


def folder_of(path, root):
    rel = path.relative_to(root).parts
    return rel[1] if rel[0] == "src" else rel[0]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    files = [p for d in ("src", "bench", "cli") for p in (root / d).rglob("*")
             if p.suffix in (".h", ".cc", ".cu", ".cuh")]
    for path in files:
        here = folder_of(path, root)
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in RANK:
                continue
            if m.group(1) == here:
                sub = BENEATH.get(here)
                rel = path.relative_to(root).parts
                if (sub and rel[0] == "src" and len(rel) > 3 and rel[2] == sub
                        and not m.group(2).startswith(sub + "/")):
                    bad.append("%s:%d: %s/%s includes %s/%s (%s/%s sits beneath the rest of %s/)"
                               % (path.relative_to(root), n, here, sub, here, m.group(2), here,
                                  sub, here))
                continue
            there = m.group(1)
            if RANK[there] >= RANK[here]:
                bad.append("%s:%d: %s includes %s/ (%s is not below %s)"
                           % (path.relative_to(root), n, here, there, there, here))
    for b in bad:
        print(b)
    print("layers: %d files, %s" % (len(files), "%d upward includes" % len(bad) if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
