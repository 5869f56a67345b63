#!/usr/bin/env python3
"""Fails when an include points up the layers (docs/ARCHITECTURE.md, Layers).

    core <- model <- device <- cpu, cuda, io <- data, prof <- train, infer
         <- bench, bench_suite <- cli

A file belongs to the layer of its folder, except in src/ops/, where each op
family's folder holds files of several layers, told apart by their names:
cpu_* is the CPU reference (layer cpu), .cu, .cuh and cuda_* the CUDA kernels
and their dispatch (layer cuda, as is everything in a family's subfolder:
flash/, cudnn/, swiglu_gemm/), bench_* the kernel bench's entry (layer
bench), and any other file the op's contract (layer model).

A file may include its own layer and any lower one; layers of one rank (cpu,
cuda and io; data and prof; train and infer; bench and bench_suite) do not
include each other.
"""
import pathlib
import re
import sys

RANK = {"core": 0, "dist": 1, "model": 1, "device": 1.5, "cpu": 2, "cuda": 2, "io": 2, "data": 3,
        "prof": 3, "train": 4, "infer": 4, "bench": 5, "bench_suite": 5, "cli": 6}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+/[^"]*)"')


def op_role(parts):
    """The layer of a file under src/ops/<family>/ (parts: the path below ops/)."""
    if len(parts) > 2:
        return "cuda"
    name = parts[-1]
    if name.startswith("cpu_"):
        return "cpu"
    if name.startswith("bench_"):
        return "bench"
    if name.startswith("cuda_") or name.endswith((".cu", ".cuh")):
        return "cuda"
    return "model"


def layer_of(rel):
    """The layer of a path relative to the repository root (src/..., bench/..., cli/...)."""
    parts = rel.parts[1:] if rel.parts[0] == "src" else rel.parts
    if parts[0] == "ops":
        return op_role(parts[1:])
    return parts[0]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    files = [p for d in ("src", "bench", "cli") for p in (root / d).rglob("*")
             if p.suffix in (".h", ".cc", ".cu", ".cuh")]
    for path in files:
        rel = path.relative_to(root)
        here = layer_of(rel)
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = pathlib.PurePosixPath(m.group(1))
            if target.parts[0] not in RANK and target.parts[0] != "ops":
                continue
            there = layer_of(target)
            if there == here:
                continue
            if RANK[there] >= RANK[here]:
                bad.append("%s:%d: %s (layer %s) includes %s (layer %s, not below %s)"
                           % (rel, n, rel.name, here, target, there, here))
    for b in bad:
        print(b)
    print("layers: %d files, %s" % (len(files), "%d upward includes" % len(bad) if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
