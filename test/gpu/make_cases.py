"""The GPU tests' inputs, made where fsdp-opt is (scripts/gpu-plans.sh).

    make_cases.py DIR [--fsdp-opt BIN]

Writes into DIR the fixture models (with their weights: they are small),
their data, the plans fsdp-opt compiles for them at 1 and 2 ranks with the
memory each plan predicts, and cases.json, which test/gpu/gpu_tests.py
reads on a machine with a GPU and without MLIR. Plans are device-neutral:
compiled here, they run on the GPU.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")

# name, fixture, optimizer flags (fsdp-opt's, which train_parity.py's check
# takes too), extra fsdp-opt flags (the check takes those of them it knows:
# mixed precision), ranks, and the case's own options: `set`, the model's
# constructor arguments; `seed`, fsdp-run's and the reference's --seed.
CASES = [
    ("mlp-sgd", "mlp", ["--optimizer", "sgd", "--lr", "0.1"], [], [1, 2], {}),
    ("gpt-adamw", "gpt", ["--optimizer", "adamw", "--lr", "0.001"],
     ["--auto-wrap", "class", "--wrap-class", "GPTBlock"], [1, 2], {}),
    # bf16 mixed precision at 2 ranks: the all-gathers send a rounded copy
    # of the shard, which NCCL holds until the wait (the memory model's
    # --backend nccl counts it).
    ("gpt-bf16", "gpt", ["--optimizer", "adamw", "--lr", "0.001"],
     ["--mixed-precision", "bf16", "--auto-wrap", "class", "--wrap-class", "GPTBlock"], [2],
     {}),
    # Dropout: a plan for a GPU draws as eager CUDA does (native_dropout),
    # from the generator both seed.
    ("gpt-dropout", "gpt", ["--optimizer", "adamw", "--lr", "0.001"],
     ["--auto-wrap", "class", "--wrap-class", "GPTBlock"], [1],
     {"set": ["dropout=0.1"], "seed": 7}),
]
STEPS = 5


def mixed_precision(flags):
    """The mixed-precision flags among fsdp-opt's `flags` (the reference
    trains as they say)."""
    return flags[flags.index("--mixed-precision"):][:2] if "--mixed-precision" in flags else []


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"make_cases: {' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--fsdp-opt", default="fsdp-opt")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl",
                   help="the communicator the plans' memory is predicted for "
                        "(gloo: the harness's own test on CPU ranks)")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    cases = []
    made = set()
    for name, fixture, optimizer, extra, ranks, own in CASES:
        sets = own.get("set", [])
        seed = ["--seed", str(own["seed"])] if "seed" in own else []
        for w in ranks:
            # Each rank takes a batch of 2: the data holds w ranks' worth.
            stem = fixture + "".join(f".{s.replace('=', '')}" for s in sets)
            model = f"{stem}.pt"
            data = f"{stem}.w{w}.data.pt"
            if (stem, w) not in made:
                run([sys.executable, os.path.join(FIXTURES, "train_parity.py"), "make",
                     fixture, os.path.join(args.dir, model), os.path.join(args.dir, data),
                     "--loss", "cross_entropy", "--batch", "2", "--data-batch", str(2 * w),
                     "--steps", str(STEPS), *[a for s in sets for a in ("--set", s)]])
                made.add((stem, w))
            plan = f"{name}.w{w}.plan"
            memory = f"{name}.w{w}.memory.json"
            run([args.fsdp_opt, os.path.join(args.dir, model), "--loss", "cross_entropy",
                 *optimizer, *extra, "--world-size", str(w), "--backend", args.backend,
                 "--emit", "plan",
                 "-o", os.path.join(args.dir, plan),
                 "--memory-report-json", os.path.join(args.dir, memory)])
            cases.append({"name": name, "fixture": fixture, "ranks": w, "model": model,
                          "data": data, "plan": plan, "memory": memory, "run": seed,
                          "check": ["--loss", "cross_entropy", *optimizer,
                                    *mixed_precision(extra), *seed,
                                    "--steps", str(STEPS), "--micro-batches", str(w)]})
    with open(os.path.join(args.dir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"{len(cases)} GPU test cases in {args.dir}")


if __name__ == "__main__":
    main()
