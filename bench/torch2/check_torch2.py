"""Imports and trains the archives bench/torch2/export_torch2.sh made:

    check_torch2.py DIR [--bin BUILD/bin] [--only NAME.MODE ...]

DIR is the unpacked torch2/ folder. For each export/NAME.MODE.pt: the plain
import (`fsdp-opt ARCHIVE`), OK or its first error line. For each
train/NAME.MODE.pt: the training compile (FULL_SHARD, 2 ranks, the loss and
optimizer the reference used), `fsdp-run --nproc 2` on the data the torch
that exported it wrote, and the per-step losses and the final parameters
and buffers compared (to 1e-5 relative, as the parity tests do) with

  ref-2x: the eager reference computed by the exporting torch (train/*.ref.json)
  ref-1.13: this machine's torch loading the archive (train_parity.reference),
            where this torch can load it (else the first line of its error).

Prints one row per archive (markdown table); exits 0.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

import attention_check  # noqa: E402
import models  # noqa: E402
import parity  # noqa: E402
import train_parity  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "bool": torch.bool, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int32": torch.int32}


def first_error(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for i, l in enumerate(lines):
        if "error" in l.lower():
            if l.endswith(":") and i + 1 < len(lines):  # the reason on the next line
                l += " " + lines[i + 1]
            return l[:300]
    return (lines[-1] if lines else "")[:300]


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def state_from_json(state):
    out = {}
    for n, e in state.items():
        t = torch.tensor(e["values"], dtype=torch.float64 if "float" in e["dtype"] else None)
        out[n] = t.to(DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def compare(name, losses, expected_state, metrics, final):
    """Mismatches of fsdp-run's losses and checkpoint with the reference's
    (the keys of the fixture's state_dict: non-persistent buffers are not
    saved), and the largest relative loss difference."""
    keys = set(models.build(name)[0].state_dict())
    expected_state = {n: t for n, t in expected_state.items() if n in keys}
    bad = []
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    got = [line["loss"] for line in lines if not line.get("summary")]
    if len(got) != len(losses):
        bad.append(f"{len(got)} steps, expected {len(losses)}")
    diff = max((abs(g - e) / max(abs(e), 1e-6) for g, e in zip(got, losses)), default=0.0)
    if diff > parity.TOLERANCE:
        bad.append(f"losses {got} != {losses}")
    state = torch.load(final)
    for n, ref in expected_state.items():
        if n not in state:
            bad.append(f"{n} missing")
        elif not parity.close(state[n], ref):
            bad.append(f"{n} differs")
    return bad, diff


def main():
    # torch 2.x archives of nn.MultiheadAttention call
    # aten::scaled_dot_product_attention: defined here (with its math as the
    # kernel) so that this torch's eager reference can load them.
    attention_check.define_attention()
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "bin"))
    p.add_argument("--only", action="append", default=[])
    args = p.parse_args()
    warnings.simplefilter("ignore")
    opt, runner = os.path.join(args.bin, "fsdp-opt"), os.path.join(args.bin, "fsdp-run")
    tmp = tempfile.mkdtemp(prefix="torch2-")
    print("| archive | plain import | training compile | fsdp-run 2 ranks | vs ref-2x (max loss rel diff) | ref-1.13 |")
    print("| --- | --- | --- | --- | --- | --- |")
    exports = sorted(f[:-3] for f in os.listdir(os.path.join(args.dir, "export")) if f.endswith(".pt"))
    for key in exports:
        if args.only and key not in args.only:
            continue
        row = [key]
        rc, out = run([opt, os.path.join(args.dir, "export", key + ".pt"), "-o", os.devnull])
        row.append("OK" if rc == 0 else "FAIL: " + first_error(out))
        model = os.path.join(args.dir, "train", key + ".pt")
        if not os.path.exists(model):
            print("| " + " | ".join(row + ["-", "-", "-", "-"]) + " |")
            continue
        data = os.path.join(args.dir, "train", key + ".data.pt")
        with open(os.path.join(args.dir, "train", key + ".flags")) as f:
            loss, *flags = f.read().split()
        plan = os.path.join(tmp, key + ".plan")
        metrics = os.path.join(tmp, key + ".jsonl")
        final = os.path.join(tmp, key + ".final.pt")
        rc, out = run([opt, model, "--loss", loss, *flags, "--world-size", "2",
                       "--sharding", "FULL_SHARD", "--emit", "plan", "-o", plan])
        if rc != 0:
            row += ["FAIL: " + first_error(out), "-", "-"]
        else:
            row.append("OK")
            rc, out = run([runner, plan, "--model", model, "--data", data, "--nproc", "2",
                           "--threads", "1", "--metrics", metrics, "--save", final])
            if rc != 0:
                row += ["FAIL: " + first_error(out), "-"]
            else:
                row.append("OK")
                ref_path = os.path.join(args.dir, "train", key + ".ref.json")
                if os.path.exists(ref_path):
                    with open(ref_path) as f:
                        ref = json.load(f)
                    bad, diff = compare(key.split(".")[0], ref["losses"], state_from_json(ref["state"]),
                                        metrics, final)
                    row.append(("match" if not bad else "MISMATCH " + "; ".join(bad[:3]))
                               + f" ({diff:.1e})")
                else:
                    row.append("no reference")
        # This torch's eager reference, when it loads the archive.
        try:
            ns = argparse.Namespace(loss=loss, steps=3)
            fp = argparse.ArgumentParser()
            train_parity.add_optimizer_args(fp)
            ns = fp.parse_args(flags, namespace=ns)
            losses, module, _ = train_parity.reference(ns, model, data, 2)
            if os.path.exists(metrics) and os.path.exists(final) and row[3] == "OK":
                bad, diff = compare(key.split(".")[0], losses, {n: t.detach() for n, t in module.state_dict().items()},
                                    metrics, final)
                row.append(("match" if not bad else "MISMATCH " + "; ".join(bad[:3]))
                           + f" ({diff:.1e})")
            else:
                row.append("loads")
        except Exception as e:  # noqa: BLE001
            row.append("cannot load: " + str(e).strip().splitlines()[0][:200])
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
