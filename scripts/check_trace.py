#!/usr/bin/env python3
"""Checks a tinyllama trace.json against the Chrome Trace Event Format rules
that Perfetto's JSON importer relies on (no Perfetto build is available on the
development machine, so these are checked instead of opening the UI):

* a JSON object with a "traceEvents" array;
* every event has "ph", an integer "pid" and "tid"; non-metadata events a
  numeric "ts" >= 0; complete events ("X") a "dur" >= 0;
* complete events on one track (pid, tid) nest: a slice that starts inside
  another ends inside it too (Perfetto drops improperly nested slices);
* every flow start ("s") has exactly one finish ("f") with the same id, cat
  and name, not earlier in time; the start lies inside a slice on its track
  and the finish (binding point "e") inside or at the start of one on its
  track, so that both ends attach to slices;
* metadata ("M") names the processes and threads used.

Exit status 0 when the trace passes, 1 with one line per problem (at most 20).
"""
import bisect
import json
import sys
from collections import defaultdict

EPS = 1e-6  # microseconds: ts values are printed with ns resolution


def check(path):
    problems = []
    with open(path) as f:
        trace = json.load(f)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not an object with a traceEvents array"]
    slices = defaultdict(list)  # (pid, tid) -> [(ts, end)]
    flows = defaultdict(dict)  # id -> {"s": event, "f": event}
    named = set()
    used = set()
    for i, e in enumerate(trace["traceEvents"]):
        ph = e.get("ph")
        if ph is None or not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int):
            problems.append(f"event {i}: needs ph and integer pid and tid: {e}")
            continue
        if ph == "M":
            if e.get("name") == "process_name":
                named.add((e["pid"], None))
            elif e.get("name") == "thread_name":
                named.add((e["pid"], e["tid"]))
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            problems.append(f"event {i}: ts must be a number >= 0: {e}")
            continue
        used.add((e["pid"], e["tid"]))
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                problems.append(f"event {i}: X needs dur >= 0: {e}")
                continue
            slices[(e["pid"], e["tid"])].append((ts, ts + dur))
        elif ph in ("s", "f"):
            if ph in flows[e.get("id")]:
                problems.append(f"event {i}: second '{ph}' for flow id {e.get('id')}")
            flows[e.get("id")][ph] = e
        else:
            problems.append(f"event {i}: phase {ph!r} is not one tinyllama writes")

    for track, spans in slices.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start + EPS:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + EPS:
                problems.append(f"track {track}: slice [{start}, {end}] overlaps its parent's end "
                                f"{open_ends[-1]} (not nested)")
                break
            open_ends.append(end)

    starts = {t: [s[0] for s in sorted(v)] for t, v in slices.items()}
    ordered = {t: sorted(v) for t, v in slices.items()}

    def inside(track, ts):
        spans = ordered.get(track, [])
        j = bisect.bisect_right(starts.get(track, []), ts + EPS)
        return any(s <= ts + EPS and ts <= e + EPS for s, e in spans[max(0, j - 64):j])

    for fid, pair in flows.items():
        if set(pair) != {"s", "f"}:
            problems.append(f"flow {fid}: has {sorted(pair)} only")
            continue
        s, f = pair["s"], pair["f"]
        if (s.get("cat"), s.get("name")) != (f.get("cat"), f.get("name")):
            problems.append(f"flow {fid}: start and finish differ in cat or name")
        if f["ts"] + EPS < s["ts"]:
            problems.append(f"flow {fid}: finishes at {f['ts']} before it starts at {s['ts']}")
        if f.get("bp") != "e":
            problems.append(f"flow {fid}: finish without binding point 'e'")
        if not inside((s["pid"], s["tid"]), s["ts"]):
            problems.append(f"flow {fid}: start at {s['ts']} is in no slice of its track")
        if not inside((f["pid"], f["tid"]), f["ts"]):
            problems.append(f"flow {fid}: finish at {f['ts']} is in no slice of its track")

    for pid, tid in used:
        if (pid, None) not in named:
            problems.append(f"process {pid} has no process_name")
        if (pid, tid) not in named:
            problems.append(f"track ({pid}, {tid}) has no thread_name")
    return problems


def main(paths):
    status = 0
    for path in paths:
        problems = check(path)
        for p in problems[:20]:
            print(f"{path}: {p}")
        if problems:
            status = 1
            if len(problems) > 20:
                print(f"{path}: ... {len(problems) - 20} more")
        else:
            print(f"{path}: ok")
    return status


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: check_trace.py TRACE.json...")
    sys.exit(main(sys.argv[1:]))
