#!/usr/bin/python3
"""Times `fsdp-opt` importing the GPT fixture at growing depth.

    /usr/bin/python3 bench/import/bench_import.py [--layers 12 24 48 96] [--hidden 768]

For each depth: export the traced GPT (hidden 768, 12 heads, sequence 128,
vocabulary 8192), run `build/bin/fsdp-opt model.pt -o model.mlir -mlir-timing`
--repeat times, and print for the best run: the wall time, the part spent
loading the archive (libtorch reading the weights), the part spent importing
the graph, the ATen op count and the import's ms per 1000 ops. Import should
grow linearly with the op count.
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
            best = (float("inf"), 0.0, 0.0)
            for _ in range(args.repeat):
                start = time.perf_counter()
                run = subprocess.run([args.fsdp_opt, pt, "-o", out, "-mlir-timing"],
                                     check=True, capture_output=True, text=True)
                wall = time.perf_counter() - start
                phases = {}
                for line in run.stderr.splitlines():
                    m = re.match(r"^\s*([\d.]+)\s+\(\s*[\d.]+%\)\s+(.*?)\s*$", line)
                    if m:
                        phases[m.group(2)] = float(m.group(1))
                load = phases.get("load archive", 0.0)
                walk = sum(v for k, v in phases.items()
                           if k in ("inline and JIT clean-up", "declare parameters and buffers",
                                    "walk graph", "verify"))
                best = min(best, (wall, load, walk))
            with open(out) as f:
                ops = sum(1 for line in f if "aten.call" in line)
            rows.append((layers, params, os.path.getsize(pt), ops, best))
            os.remove(pt)

    print()
    print(f"GPT import, hidden {args.hidden}, seq {args.seq}, batch {args.batch}, "
          f"best of {args.repeat} (fsdp-opt wall time, includes loading the weights)")
    print(f"{'layers':>6} {'params (M)':>10} {'file (MB)':>9} {'ATen ops':>9} "
          f"{'wall s':>7} {'load s':>7} {'import s':>9} {'import ms/1000 ops':>19}")
    for layers, params, size, ops, (wall, load, walk) in rows:
        print(f"{layers:>6} {params / 1e6:>10.1f} {size / 1e6:>9.0f} {ops:>9} "
              f"{wall:>7.2f} {load:>7.2f} {walk:>9.2f} {walk * 1e6 / max(ops, 1):>19.1f}")


if __name__ == "__main__":
    main()
