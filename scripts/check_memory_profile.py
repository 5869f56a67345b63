#!/usr/bin/env python3
"""Checks the files of `train --enable-memory-profiling`: the JSON has its
keys and its sums hold, and the plot is an SVG document (it parses as XML,
its root is <svg>, it holds one filled area per kind and the axes' labels).

usage: check_memory_profile.py TIMELINE.json TIMELINE.svg
"""
import json
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def fail(message):
    print("check_memory_profile: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        fail("usage: check_memory_profile.py TIMELINE.json TIMELINE.svg")
    with open(sys.argv[1]) as f:
        t = json.load(f)
    for key in ("allocated", "persistent_bytes", "arena_bytes", "peak", "kinds", "buffers", "ops",
                "driver_samples", "driver_note", "title"):
        if key not in t:
            fail("the timeline has no key " + key)
    buffers = t["buffers"]
    for op in t["ops"]:
        live = sum(buffers[i]["bytes"] for i in op["live_buffers"])
        if live != op["live_bytes"] or sum(op["live_by_kind"].values()) != live:
            fail("op %s: its live bytes do not add up" % op["name"])
    peak = max(op["live_bytes"] for op in t["ops"])
    if peak != t["peak"]["live_bytes"]:
        fail("peak %d is not the most live bytes, %d" % (t["peak"]["live_bytes"], peak))
    # The buffers cover the arena (the backward scratch may lie over the logits).
    arena, reach = 0, 0
    for b in sorted((b for b in buffers if b["offset_bytes"] is not None),
                    key=lambda b: b["offset_bytes"]):
        if b["offset_bytes"] > reach:
            fail("a gap in the arena before %s" % b["name"])
        end = b["offset_bytes"] + b["bytes"]
        arena += max(0, end - reach)
        reach = max(reach, end)
    if arena != t["arena_bytes"]:
        fail("the arena's buffers cover %d bytes, not %d" % (arena, t["arena_bytes"]))

    root = ET.parse(sys.argv[2]).getroot()  # raises on anything that is not XML
    if root.tag != SVG + "svg":
        fail("the plot's root is %s, not svg" % root.tag)
    areas = root.findall(SVG + "path")
    if len(areas) != len(t["kinds"]):
        fail("%d areas for %d kinds" % (len(areas), len(t["kinds"])))
    texts = " ".join(e.text or "" for e in root.iter(SVG + "text"))
    for label in ["op index", "live activation bytes"] + t["kinds"]:
        if label not in texts:
            fail("the plot has no label " + label)
    print("ok: %d ops, %d buffers, peak %d bytes" % (len(t["ops"]), len(buffers), peak))


if __name__ == "__main__":
    main()
