#!/usr/bin/env bash
# Runs the CUPTI range probe, then ncu on the very same kernels (the probe's
# --kernels-only mode, no CUPTI of its own), and prints the two side by side.
#
#   scripts/probes/run-on-device.sh [probe options]   e.g. --metrics a,b,c --n 67108864
#
# The probe options go to both runs, so both see the same kernels and sizes.
# ncu gets the metrics the probe accepted (its `passes METRIC K` lines), or
# the whole requested list when the probe stopped before checking them.
#
# Environment: PROBE_BIN (default: build it with build-cupti-probe into
# build/probes/), NCU (default: ncu on PATH or under /usr/local/cuda),
# NCU_CLOCK_CONTROL (default none: GPU clocks as the probe sees them; ncu's
# own default, base, locks them and moves the time and %-of-peak metrics),
# OUTDIR (default $OUT when set, else out/cupti-probe).
#
# Exit: the probe's code when it is not 0 (3: no permission to read
# counters), else ncu's (127 when ncu is not found).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUTDIR=${OUTDIR:-${OUT:-out/cupti-probe}}
mkdir -p "$OUTDIR"

if [[ -z ${PROBE_BIN:-} ]]; then
  scripts/probes/build-cupti-probe >"$OUTDIR/build.log" 2>&1 || {
    cat "$OUTDIR/build.log"; echo "run-on-device: build failed" >&2; exit 1; }
  PROBE_BIN=build/probes/cupti_range_probe
fi

echo "=== cupti_range_probe $* (AutoRange+KernelReplay unless --user-range)"
"$PROBE_BIN" "$@" 2>&1 | tee "$OUTDIR/probe.txt"
probe_rc=${PIPESTATUS[0]}
echo "=== probe exit $probe_rc"

metrics=$(awk '$1 == "passes" && $2 != "ALL" { printf "%s%s", sep, $2; sep = "," }' "$OUTDIR/probe.txt")
[[ -n $metrics ]] || metrics=$("$PROBE_BIN" "$@" --print-metrics)

find_ncu() {
  if [[ -n ${NCU:-} ]]; then echo "$NCU"; return; fi
  command -v ncu && return
  for c in /usr/local/cuda/bin/ncu /usr/local/cuda/nsight-compute*/ncu /opt/nvidia/nsight-compute/*/ncu; do
    [[ -x $c ]] && { echo "$c"; return; }
  done
}
ncu_bin=$(find_ncu)
if [[ -z $ncu_bin ]]; then
  echo "run-on-device: ncu not found (set NCU=/path/to/ncu); no comparison" >&2
  (( probe_rc != 0 )) && exit "$probe_rc"
  exit 127
fi

echo "=== $ncu_bin --metrics $metrics (clock control ${NCU_CLOCK_CONTROL:-none})"
"$ncu_bin" --metrics "$metrics" --csv --print-units base \
  --clock-control "${NCU_CLOCK_CONTROL:-none}" --kernel-name "regex:probe_(copy|fma|hmma)" \
  --log-file "$OUTDIR/ncu.csv" \
  "$PROBE_BIN" "$@" --kernels-only >"$OUTDIR/ncu-app.txt" 2>&1
ncu_rc=$?
cat "$OUTDIR/ncu-app.txt" "$OUTDIR/ncu.csv" 2>/dev/null
echo "=== ncu exit $ncu_rc"

# Side by side: one row per (range, metric) the probe printed.
python3 - "$OUTDIR/probe.txt" "$OUTDIR/ncu.csv" <<'PY' | tee "$OUTDIR/compare.txt"
import csv, sys
labels = ("copy", "fma", "hmma")
probe = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3 and f[0] in labels:
        probe[(f[0], f[1])] = f[2]
ncu = {}
try:
    rows = [l for l in open(sys.argv[2]) if l.startswith('"')]  # skip ==PROF== lines
    for row in csv.DictReader(rows):
        kernel = row.get("Kernel Name", "")
        label = next((l for l in labels if "probe_" + l in kernel), None)
        if label:
            ncu[(label, row["Metric Name"])] = row["Metric Value"].replace(",", "")
except FileNotFoundError:
    pass
print("%-6s %-72s %18s %18s %8s" % ("range", "metric", "cupti", "ncu", "ratio"))
for (label, metric), value in probe.items():
    other = ncu.get((label, metric), "-")
    try:
        ratio = "%.4f" % (float(value) / float(other))
    except (ValueError, ZeroDivisionError):
        ratio = "-"
    print("%-6s %-72s %18s %18s %8s" % (label, metric, value, other, ratio))
PY

(( probe_rc != 0 )) && exit "$probe_rc"
exit "$ncu_rc"
