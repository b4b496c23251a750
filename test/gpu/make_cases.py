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
# takes too), extra fsdp-opt flags, ranks.
CASES = [
    ("mlp-sgd", "mlp", ["--optimizer", "sgd", "--lr", "0.1"], [], [1, 2]),
    ("gpt-adamw", "gpt", ["--optimizer", "adamw", "--lr", "0.001"],
     ["--auto-wrap", "class", "--wrap-class", "GPTBlock"], [1, 2]),
]
STEPS = 5


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
    for name, fixture, optimizer, extra, ranks in CASES:
        for w in ranks:
            # Each rank takes a batch of 2: the data holds w ranks' worth.
            model = f"{fixture}.pt"
            data = f"{fixture}.w{w}.data.pt"
            if (fixture, w) not in made:
                run([sys.executable, os.path.join(FIXTURES, "train_parity.py"), "make",
                     fixture, os.path.join(args.dir, model), os.path.join(args.dir, data),
                     "--loss", "cross_entropy", "--batch", "2", "--data-batch", str(2 * w),
                     "--steps", str(STEPS)])
                made.add((fixture, w))
            plan = f"{name}.w{w}.plan"
            memory = f"{name}.w{w}.memory.json"
            run([args.fsdp_opt, os.path.join(args.dir, model), "--loss", "cross_entropy",
                 *optimizer, *extra, "--world-size", str(w), "--backend", args.backend,
                 "--emit", "plan",
                 "-o", os.path.join(args.dir, plan),
                 "--memory-report-json", os.path.join(args.dir, memory)])
            cases.append({"name": name, "fixture": fixture, "ranks": w, "model": model,
                          "data": data, "plan": plan, "memory": memory,
                          "check": ["--loss", "cross_entropy", *optimizer,
                                    "--steps", str(STEPS), "--micro-batches", str(w)]})
    with open(os.path.join(args.dir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"{len(cases)} GPU test cases in {args.dir}")


if __name__ == "__main__":
    main()
