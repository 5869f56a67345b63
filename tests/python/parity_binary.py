"""Running the tinyllama binary on one configuration and reading what it
wrote."""

import json
import os
import shlex
import subprocess

from parity_io import read_safetensors, read_safetensors_metadata, rope_layout, to_interleaved


class BinaryFailure(Exception):
    """The binary exited non-zero or did not write what --dump-dir promises."""


# --------------------------------------------------------------------------
# Running the binary.


def binary_command(args, cfg, workdir, steps):
    cmd = [args.binary, "train",
           "--device", args.device,
           "--vocab-size", str(cfg["vocab"]),
           "--hidden-dim", str(cfg["dim"]),
           "--num-layers", str(cfg["layers"]),
           "--num-heads", str(cfg["heads"]),
           "--num-kv-heads", str(cfg["kv_heads"]),
           "--ffn-dim", str(cfg["ffn"]),
           "--seq-len", str(cfg["seq"]),
           "--batch-size", str(cfg["batch"]),
           "--num-steps", str(steps),
           "--warmup-steps", "0",
           "--seed", str(cfg["seed"]),
           "--log-every", "1",
           "--dump-dir", workdir,
           "--save-weights", os.path.join(workdir, "final.safetensors"),
           "--json", os.path.join(workdir, "report.json")]
    if args.amp != "none":
        cmd += ["--use-amp", "--amp-dtype", args.amp]
    return cmd + shlex.split(args.extra_args)


def run_binary(cmd, cfg, workdir, timeout):
    """Run one training; return its dumps, or raise BinaryFailure."""
    os.makedirs(workdir, exist_ok=True)
    print("  $ " + " ".join(shlex.quote(c) for c in cmd))
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BinaryFailure("timed out after %d s" % timeout)
    except OSError as e:
        raise BinaryFailure("cannot start: %s" % e)
    if proc.returncode != 0:
        raise BinaryFailure("exit status %d\n--- stderr ---\n%s--- stdout ---\n%s"
                            % (proc.returncode, proc.stderr, proc.stdout))
    outputs = {}
    try:
        for key in ("init", "batches", "grads_step1", "final"):
            path = os.path.join(workdir, key + ".safetensors")
            outputs[key] = read_safetensors(path)
            if key != "batches":
                outputs[key] = to_interleaved(outputs[key], cfg,
                                              rope_layout(read_safetensors_metadata(path)))
        with open(os.path.join(workdir, "report.json")) as f:
            outputs["report"] = json.load(f)
    except (OSError, ValueError) as e:
        raise BinaryFailure("exited 0 but its outputs are unreadable: %s\n"
                            "--- stderr ---\n%s" % (e, proc.stderr))
    # Which attention ran (a requested one may have fallen back), so the
    # log shows what each check covered.
    plan = outputs["report"].get("plan", {})
    ops = plan.get("ops", {})
    if ops:
        line = "    attention %s" % ops.get("attention", "?")
        for fb in plan.get("fallbacks", []):
            if fb.get("op") == "attention":
                line += " (%s -> %s: %s)" % (fb["wanted"], fb["using"], fb["reason"])
        print(line)
    return outputs


def arrays(safetensors):
    return {name: a for name, (_, a) in safetensors.items()}
