#!/usr/bin/env python3
"""Times `fsdp-opt` importing the GPT fixture at growing depth, and its memory.

    .venv/bin/python bench/import/bench_import.py [--layers 12 24 48 96] [--hidden 768]
        [--no-skeleton]

For each depth: export the traced GPT (hidden 768, 12 heads, sequence 128,
vocabulary 8192), run `build/bin/fsdp-opt model.pt -o model.mlir -mlir-timing`
--repeat times, and print for the best run: the wall time, the part spent
loading the archive (the module's code and types: the weights' values are
not read), the part spent importing the graph, the ATen op count, the
import's ms per 1000 ops and fsdp-opt's peak resident memory. Import should
grow linearly with the op count, and the peak memory should not grow with
the archive's size.

Then a 7B-shaped GPT saved without weights (vocabulary 32000, hidden 4096,
32 heads, 32 layers, sequence 2048, batch 1; built with
fsdp_export.empty_init, so no parameter is materialised): the archive's
size, the time and peak memory of importing it, and of compiling it whole
(loss, backward, AdamW, FULL_SHARD over 64 ranks with one unit per block,
the plan and the memory report).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402

import fsdp_export  # noqa: E402
import models  # noqa: E402


PEAK_RSS = os.path.join(ROOT, "test", "fixtures", "peak_rss.py")


def run_measured(cmd):
    """Runs `cmd` twice: timed, then under test/fixtures/peak_rss.py (a small
    process: a child's peak RSS counts what it inherited from its parent, and
    this one holds the models). Returns (wall seconds, peak RSS MiB, stderr)."""
    start = time.perf_counter()
    run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if run.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stderr}")
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run([sys.executable, PEAK_RSS, out.name, "--", *cmd], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rss = float(out.read())
    return wall, rss, run.stderr


def skeleton(args, tmp):
    pt = os.path.join(tmp, "gpt7b.pt")
    start = time.perf_counter()
    with fsdp_export.empty_init():
        model = models.GPT(vocab=32000, d_model=4096, n_head=32, n_layer=32, max_len=2048)
    params = sum(p.numel() for p in model.parameters())
    fsdp_export.save(model, pt, {"idx": torch.zeros(1, 2048, dtype=torch.long)}, weights=False)
    export = time.perf_counter() - start
    imp = run_measured([args.fsdp_opt, pt, "-o", os.path.join(tmp, "gpt7b.mlir")])
    full = run_measured([args.fsdp_opt, pt, "--target", "y:1x2048xi64", "--loss", "cross_entropy",
                         "--optimizer", "adamw", "--lr", "1e-4", "--world-size", "64",
                         "--auto-wrap", "class", "--wrap-class", "GPTBlock", "--memory-report",
                         "--emit", "plan", "-o", os.path.join(tmp, "gpt7b.plan")])
    print()
    print(f"7B-shaped GPT saved without weights: {params / 1e9:.2f}B parameters "
          f"({params * 4 / 2**30:.1f} GiB in fp32), archive {os.path.getsize(pt) / 1e6:.2f} MB, "
          f"exported in {export:.1f} s")
    print(f"{'fsdp-opt':<44} {'wall s':>7} {'peak RSS MiB':>13}")
    print(f"{'import':<44} {imp[0]:>7.2f} {imp[1]:>13.0f}")
    print(f"{'compile (AdamW, FULL_SHARD on 64, memory report)':<44} {full[0]:>7.2f} {full[1]:>13.0f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48, 96])
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fsdp-opt", default=os.path.join(ROOT, "build", "bin", "fsdp-opt"))
    p.add_argument("--no-skeleton", action="store_true", help="skip the 7B skeleton")
    args = p.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in args.layers:
            torch.manual_seed(0)
            model = models.GPT(vocab=args.vocab, d_model=args.hidden, n_head=args.heads,
                               n_layer=layers, max_len=args.seq)
            idx = torch.randint(0, args.vocab, (args.batch, args.seq))
            pt = os.path.join(tmp, f"gpt{layers}.pt")
            out = os.path.join(tmp, f"gpt{layers}.mlir")
            fsdp_export.save(model, pt, {"idx": idx})
            params = sum(p.numel() for p in model.parameters())
            del model
            best = (float("inf"), 0.0, 0.0, 0.0)
            for _ in range(args.repeat):
                wall, rss, stderr = run_measured([args.fsdp_opt, pt, "-o", out, "-mlir-timing"])
                phases = {}
                for line in stderr.splitlines():
                    m = re.match(r"^\s*([\d.]+)\s+\(\s*[\d.]+%\)\s+(.*?)\s*$", line)
                    if m:
                        phases[m.group(2)] = float(m.group(1))
                load = phases.get("load archive", 0.0)
                walk = sum(v for k, v in phases.items()
                           if k in ("inline and JIT clean-up", "declare parameters and buffers",
                                    "walk graph", "verify"))
                best = min(best, (wall, load, walk, rss))
            with open(out) as f:
                ops = sum(1 for line in f if "aten.call" in line)
            rows.append((layers, params, os.path.getsize(pt), ops, best))
            os.remove(pt)

    print()
    print(f"GPT import, hidden {args.hidden}, seq {args.seq}, batch {args.batch}, "
          f"best of {args.repeat} (fsdp-opt wall time and peak RSS)")
    print(f"{'layers':>6} {'params (M)':>10} {'file (MB)':>9} {'ATen ops':>9} "
          f"{'wall s':>7} {'load s':>7} {'import s':>9} {'import ms/1000 ops':>19} "
          f"{'peak RSS MiB':>13}")
    for layers, params, size, ops, (wall, load, walk, rss) in rows:
        print(f"{layers:>6} {params / 1e6:>10.1f} {size / 1e6:>9.0f} {ops:>9} "
              f"{wall:>7.2f} {load:>7.2f} {walk:>9.2f} {walk * 1e6 / max(ops, 1):>19.1f} "
              f"{rss:>13.0f}")
    if not args.no_skeleton:
        with tempfile.TemporaryDirectory() as tmp:
            skeleton(args, tmp)


if __name__ == "__main__":
    main()
