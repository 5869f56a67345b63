#!/usr/bin/env python3
"""Peak memory against seq_len, one row per sequence length, a column pair per
level: the summary JSONs of `tinyllama train --json` runs (gpu-check's
memsweep phase). Planned bytes (parameters, gradients, optimizer state,
activations, workspaces) and the driver's high-water mark, in MiB."""
import json
import sys
from collections import defaultdict

MIB = 1024 * 1024


def main(paths):
    rows = defaultdict(dict)
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        cfg = run["config"]
        rows[cfg["seq_len"]][cfg["level"]] = run
    levels = sorted({lvl for by_level in rows.values() for lvl in by_level})
    head = ["seq_len"]
    for lvl in levels:
        head += [f"{lvl} activations MiB", f"{lvl} peak MiB", f"{lvl} driver MiB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for seq in sorted(rows):
        cells = [str(seq)]
        for lvl in levels:
            run = rows[seq].get(lvl)
            if run is None:
                cells += ["—"] * 3
                continue
            cells += [
                f"{run['memory']['activations_bytes'] / MIB:.1f}",
                f"{run['peak_mb'] * 1e6 / MIB:.1f}",
                f"{run['device_used_peak_mb'] * 1e6 / MIB:.1f}",
            ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: memory_table.py RUN.json...")
    main(sys.argv[1:])
