"""fsdp-run's GPU tests: run where there is a GPU (scripts/gpu-check.sh, or
lit's gpu_check.test where the `cuda` feature is), on the cases
test/gpu/make_cases.py wrote where fsdp-opt is.

    gpu_tests.py DIR [--fsdp-run BIN]

1. The backend conformance check over NCCL: one rank, and two ranks on
   the one GPU (FSDP_RUN_SHARE_GPUS=1: each rank its own NCCL_HOSTID).
2. fp32 parity with eager PyTorch on the same GPU: each case's losses and
   final state (train_parity.py check --device cuda, 1e-5 relative), at 1
   and 2 ranks. Both sides use deterministic algorithms where torch has
   them (CUBLAS_WORKSPACE_CONFIG); at 2 ranks NCCL sums the gradients in
   its own order, which the tolerance covers.
3. The memory the plan predicts against what fsdp-run measures on the
   GPU (live tensor storages, to the byte), beside the caching allocator's
   peak and reserved bytes.
4. --cuda-graph: the same losses as without, bit for bit.

Prints one line per check and a table; exits non-zero if any fails.
`--device cpu` runs the same checks on CPU ranks over Gloo (without
--cuda-graph): the harness's own test, where there is no GPU.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--fsdp-run", default="fsdp-run")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = p.parse_args()
    dev = args.device
    backend = "nccl" if dev == "cuda" else "gloo"
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", FSDP_RUN_SHARE_GPUS="1",
               OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(HERE, "..", "..", "python"), FIXTURES, env.get("PYTHONPATH", "")])
    failures = []
    rows = []

    def run(name, cmd):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        ok = done.returncode == 0
        print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
        if not ok:
            failures.append(name)
            print("  " + " ".join(cmd))
            print("  " + (done.stdout + done.stderr).strip().replace("\n", "\n  "))
        return done

    def metrics_of(path):
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        return [l for l in lines if "step" in l], next(l for l in lines if l.get("summary"))

    # 1. Conformance.
    run(f"check-communicator {backend}, 1 rank",
        [args.fsdp_run, "--check-communicator", "--device", dev])
    run(f"check-communicator {backend}, 2 ranks on one {dev}",
        [args.fsdp_run, "--check-communicator", "--device", dev, "--nproc", "2"])
    run(f"check-communicator {backend}, 2 ranks, shard groups of 1",
        [args.fsdp_run, "--check-communicator", "--device", dev, "--nproc", "2",
         "--shard-group-size", "1"])

    with open(os.path.join(args.dir, "cases.json")) as f:
        cases = json.load(f)
    d = lambda name: os.path.join(args.dir, name)
    for case in cases:
        label = f"{case['name']} on {case['ranks']} rank{'s' if case['ranks'] > 1 else ''}"
        outputs = {}
        for graph in (False, True) if dev == "cuda" else (False,):
            tag = ".graph" if graph else ""
            metrics = d(f"{case['name']}.w{case['ranks']}{tag}.jsonl")
            final = d(f"{case['name']}.w{case['ranks']}{tag}.final.pt")
            cmd = [args.fsdp_run, d(case["plan"]), "--model", d(case["model"]),
                   "--data", d(case["data"]), "--device", dev, "--metrics", metrics,
                   "--save", final]
            if case["ranks"] > 1:
                cmd += ["--nproc", str(case["ranks"])]
            if graph:
                cmd += ["--cuda-graph"]
            done = run(f"fsdp-run {label}{' --cuda-graph' if graph else ''}", cmd)
            if done.returncode == 0:
                outputs[graph] = (metrics, final)
        if False not in outputs:
            continue
        metrics, final = outputs[False]
        # 2. Parity with eager on the GPU.
        run(f"parity with eager PyTorch on the {dev}: {label}",
            [sys.executable, os.path.join(FIXTURES, "train_parity.py"), "check",
             case["fixture"], d(case["model"]), d(case["data"]), metrics, final,
             "--device", dev, *case["check"]])
        # 3. Memory: predicted against measured.
        steps, summary = metrics_of(metrics)
        with open(d(case["memory"])) as f:
            predicted = json.load(f)["peak_bytes"]
        measured = summary["peak_bytes"]
        same = predicted == measured
        print(f"{'ok  ' if same else 'FAIL'} memory {label}: predicted {predicted} B, "
              f"measured {measured} B, allocator peak {summary['allocator_peak_bytes']} B, "
              f"reserved {summary.get('allocator_reserved_bytes')} B")
        if not same:
            failures.append(f"memory {label}")
        rows.append((label, predicted, measured, summary["allocator_peak_bytes"],
                     summary.get("allocator_reserved_bytes"),
                     sum(s["step_ms"] for s in steps[1:]) / max(len(steps) - 1, 1)))
        # 4. The CUDA graph's losses.
        if True in outputs:
            graphed, _ = metrics_of(outputs[True][0])
            plain = [s["loss"] for s in steps]
            replayed = [s["loss"] for s in graphed]
            same = plain == replayed
            print(f"{'ok  ' if same else 'FAIL'} --cuda-graph losses {label}: "
                  f"{'the same' if same else f'{replayed} != {plain}'}")
            if not same:
                failures.append(f"cuda graph losses {label}")

    print(f"\n{'case':<28} {'predicted B':>12} {'measured B':>12} {'allocator B':>12} "
          f"{'reserved B':>12} {'ms/step':>8}")
    for label, pred, meas, alloc, res, ms in rows:
        print(f"{label:<28} {pred:>12} {meas:>12} {alloc:>12} {res or 0:>12} {ms:>8.2f}")
    if failures:
        print(f"\n{len(failures)} GPU checks failed: {'; '.join(failures)}")
        sys.exit(1)
    print("\nall GPU checks passed")


if __name__ == "__main__":
    main()
