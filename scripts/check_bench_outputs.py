#!/usr/bin/env python3
"""Checks the files `tinyllama bench` or `tinyllama compare` wrote into DIR.

    scripts/check_bench_outputs.py DIR [--expect-peer VARIANT]

bench.json (or compare.json) has its keys and every point its figures,
bench.csv one row per point, and every SVG parses as XML with an <svg> root
of a positive size (what an image viewer needs); with --expect-peer, every
point has that peer variant measured. Exit 1 naming each problem.
"""
import csv
import json
import pathlib
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}svg"
POINT_KEYS = ("key", "model", "level", "precision", "batch_size", "seq_len", "status",
              "ms_per_step", "tokens_per_s", "peak_mb", "peers")


def check(directory, expect_peer=None):
    problems = []
    d = pathlib.Path(directory)
    report = d / "bench.json" if (d / "bench.json").exists() else d / "compare.json"
    if not report.exists():
        return ["no bench.json or compare.json in %s" % d]
    j = json.loads(report.read_text())
    for key in ("tool", "environment", "device", "model", "num_steps", "warmup_steps", "points"):
        if key not in j:
            problems.append("%s: no key %r" % (report.name, key))
    for p in j.get("points", []):
        for key in POINT_KEYS:
            if key not in p:
                problems.append("%s: point %s has no %r" % (report.name, p.get("key"), key))
        if p.get("status") == "ok" and not p.get("ms_per_step", 0) > 0:
            problems.append("%s: point %s has no ms_per_step" % (report.name, p.get("key")))
        if expect_peer:
            peer = [x for x in p.get("peers", []) if x.get("variant") == expect_peer]
            if not peer or peer[0].get("status") != "ok" or not peer[0].get("ms_per_step", 0) > 0:
                problems.append("%s: point %s has no measured %s peer: %s"
                                % (report.name, p.get("key"), expect_peer, peer))
    if report.name == "bench.json":
        rows = list(csv.DictReader((d / "bench.csv").open()))
        if len(rows) != len(j.get("points", [])):
            problems.append("bench.csv: %d rows for %d points" % (len(rows), len(j["points"])))
    svgs = sorted(d.glob("*.svg"))
    if not svgs:
        problems.append("no SVG plots in %s" % d)
    for svg in svgs:
        try:
            root = ET.parse(svg).getroot()
        except ET.ParseError as e:
            problems.append("%s: not well-formed XML: %s" % (svg.name, e))
            continue
        if root.tag != SVG or not float(root.get("width", 0)) > 0:
            problems.append("%s: root is %s, not a sized <svg>" % (svg.name, root.tag))
    print("%s: %d points, %d plots, %s" % (report.name, len(j.get("points", [])), len(svgs),
                                          "%d problems" % len(problems) if problems else "ok"))
    return problems


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--expect-peer"):
        print("usage: check_bench_outputs.py DIR [--expect-peer VARIANT]", file=sys.stderr)
        return 2
    problems = check(args[0], args[2] if len(args) == 3 else None)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
