"""The runtime inside a Python loop against fsdp-run: the same plan, the
same batches, the same ranks.

    .venv/bin/python bench/runtime/bench_module.py [--steps N] [--rounds R]

Compiles examples/stdlib's GPT (4 blocks of width 128, sequences of 128
bytes, 8 a rank; AdamW) for 2 ranks, and trains N steps (default 40) of
random tokens twice per round: with `fsdp-run --nproc 2` (its data file),
and with `fsdp_opt.Runtime` under torchrun, the script handing each rank its
batches from a DataLoader. Prints the median step time of each (the
executor's step and the loss's all-reduce, as each reports it, steps 6 to
N), the module's median time between two `step` calls in the Python loop
(the DataLoader's batch included), and their ratios; median of R rounds
(default 3), alternating.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

BATCH, SEQ, WORLD = 8, 128, 2


def worker(d, steps):
    import time
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    import fsdp_opt
    data = torch.load(os.path.join(d, "tokens.pt"))
    rt = fsdp_opt.Runtime(os.path.join(d, "gpt.plan"), os.path.join(d, "gpt.pt2"))
    ds = TensorDataset(data["idx"], data["y"])
    loader = DataLoader(ds, batch_size=BATCH, sampler=DistributedSampler(
        ds, num_replicas=WORLD, rank=rt.rank, shuffle=False))
    step_ms, loop_ms = [], []
    last = None
    for idx, y in loader:
        rt.step({"idx": idx, "y": y})
        now = time.perf_counter()
        if last is not None:
            loop_ms.append((now - last) * 1e3)
        last = now
        step_ms.append(rt.metrics["step_ms"])
    if rt.rank == 0:
        with open(os.path.join(d, "module.json"), "w") as f:
            json.dump({"step_ms": step_ms, "loop_ms": loop_ms}, f)


def run(cmd, **kw):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if proc.returncode:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{proc.stdout}")
    return proc.stdout


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        return worker(sys.argv[2], int(sys.argv[3]))
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    bin_dir = os.path.join(ROOT, "build", "bin")
    with tempfile.TemporaryDirectory() as d:
        run([sys.executable, os.path.join(ROOT, "examples", "stdlib", "model.py"),
             os.path.join(d, "gpt.pt2"), "--batch", str(BATCH), "--seq-len", str(SEQ)])
        run([os.path.join(bin_dir, "fsdp-opt"), os.path.join(d, "gpt.pt2"), "--loss",
             "cross_entropy", "--target", f"y:{BATCH}x{SEQ}xi64", "--optimizer", "adamw",
             "--world-size", str(WORLD), "--auto-wrap", "class", "--wrap-class", "Block",
             "--emit", "plan", "-o", os.path.join(d, "gpt.plan")])
        g = torch.Generator().manual_seed(0)
        n = args.steps * BATCH * WORLD
        data = {"idx": torch.randint(0, 256, (n, SEQ), generator=g),
                "y": torch.randint(0, 256, (n, SEQ), generator=g)}
        torch.save(data, os.path.join(d, "tokens.pt"))
        # fsdp-run's file: global batch s is rank 0's batch s, then rank 1's
        # (a DistributedSampler without shuffling deals samples in turn).
        per_rank = [{k: v[r::WORLD] for k, v in data.items()} for r in range(WORLD)]
        steps = {k: torch.stack([torch.cat([per_rank[r][k][s * BATCH:(s + 1) * BATCH]
                                            for r in range(WORLD)])
                                 for s in range(args.steps)]) for k in data}
        torch.save(steps, os.path.join(d, "steps.pt"))
        rows = {"fsdp-run": [], "module": [], "module loop": []}
        env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 2) // WORLD)))
        for _ in range(args.rounds):
            run([os.path.join(bin_dir, "fsdp-run"), os.path.join(d, "gpt.plan"), "--model",
                 os.path.join(d, "gpt.pt2"), "--data", os.path.join(d, "steps.pt"), "--nproc",
                 str(WORLD), "--metrics", os.path.join(d, "run.jsonl")])
            with open(os.path.join(d, "run.jsonl")) as f:
                ms = [json.loads(line)["step_ms"] for line in f if '"step_ms"' in line]
            rows["fsdp-run"].append(statistics.median(ms[5:]))
            run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc-per-node", str(WORLD), os.path.abspath(__file__), "worker", d,
                 str(args.steps)], env=env)
            with open(os.path.join(d, "module.json")) as f:
                m = json.load(f)
            rows["module"].append(statistics.median(m["step_ms"][5:]))
            rows["module loop"].append(statistics.median(m["loop_ms"][4:]))
    base = statistics.median(rows["fsdp-run"])
    print(f"| {'GPT 4x128, seq 128, 8 a rank, 2 ranks, AdamW':<46} | median step ms | vs fsdp-run |")
    print("|---|---:|---:|")
    for name, values in rows.items():
        v = statistics.median(values)
        print(f"| {name:<46} | {v:.2f} | {v / base:.3f} |")


if __name__ == "__main__":
    main()
