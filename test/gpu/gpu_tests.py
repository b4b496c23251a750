"""fsdp-run's GPU tests: run where there is a GPU (scripts/gpu-check.sh, or
lit's gpu_check.test where the `cuda` feature is), on the cases
test/gpu/make_cases.py wrote where fsdp-opt is.

    gpu_tests.py DIR [--fsdp-run BIN] [--device cuda|cpu] [--results DIR]
                 [--timeout S]

1. The backend conformance check over NCCL: one rank, and two ranks on
   the one GPU (FSDP_RUN_SHARE_GPUS=1: each rank its own NCCL_HOSTID, as
   NCCL allows two ranks on one GPU only as two "hosts", over its socket
   transport on loopback). When the 2-rank check fails, the 2-rank cases
   are reported as skipped, not run: the 1-rank results stand alone.
2. fp32 parity with eager PyTorch on the same GPU: each case's losses and
   final state (train_parity.py check --device cuda, 1e-5 relative), at 1
   and 2 ranks. Both sides use deterministic kernels where torch has them
   (fsdp-run --deterministic; torch.use_deterministic_algorithms(True) in
   the reference); at 2 ranks NCCL sums the gradients in its own order,
   which the tolerance covers.
3. The memory the plan predicts against what fsdp-run measures on the
   GPU (live tensor storages, to the byte), beside the caching allocator's
   peak and reserved bytes.
4. --cuda-graph: the same losses as without, bit for bit.

Every command runs with a timeout (fsdp-run's: --timeout, 240 s; the Python
references': at least 240 s) and FSDP_RUN_TIMEOUT=60:
one that does not finish is killed with everything it started and is a
FAIL with its output, and the next check runs. Prints the GPU first (name,
driver, compute mode), one line per check, then a table; with --results,
also writes them to DIR/checks.md. Exits non-zero if any check fails.
`--device cpu` runs the same checks on CPU ranks over Gloo (without
--cuda-graph): the harness's own test, where there is no GPU.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")


class Report:
    """The check lines, printed as they come and kept for --results."""

    def __init__(self):
        self.lines = []
        self.failures = []
        self.skipped = []

    def say(self, line=""):
        print(line, flush=True)
        self.lines.append(line)

    def check(self, ok, name, detail=""):
        self.say(f"{'ok  ' if ok else 'FAIL'} {name}{detail}")
        if not ok:
            self.failures.append(name)
        return ok

    def skip(self, name, why):
        self.say(f"SKIP {name}: {why}")
        self.skipped.append(name)


def run_with_timeout(cmd, env, timeout):
    """Runs `cmd` in a session of its own; past `timeout` seconds kills the
    whole session (fsdp-run --nproc's ranks too). Returns (status or None
    when it timed out, its output)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return None, out


def describe_gpu(report):
    """The GPU, its driver and compute mode (an exclusive mode refuses a
    second rank's context on the one GPU)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        report.say("GPU: nvidia-smi not found; compute mode unknown")
        return
    done = subprocess.run([smi, "--query-gpu=name,driver_version,compute_mode,memory.total",
                           "--format=csv,noheader"], capture_output=True, text=True,
                          timeout=60)
    report.say(f"GPU: {done.stdout.strip() or done.stderr.strip()} "
               "(name, driver, compute mode, memory)")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--fsdp-run", default="fsdp-run")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--results", default=None,
                   help="a folder to write checks.md into (the lines and the table)")
    p.add_argument("--timeout", type=float,
                   default=float(os.environ.get("FSDP_GPU_CHECK_TIMEOUT", 240)),
                   help="seconds each command may take (default 240, or "
                        "FSDP_GPU_CHECK_TIMEOUT)")
    args = p.parse_args()
    dev = args.device
    backend = "nccl" if dev == "cuda" else "gloo"
    env = dict(os.environ, FSDP_RUN_SHARE_GPUS="1", OMP_NUM_THREADS="1",
               FSDP_RUN_TIMEOUT="60")
    if dev == "cuda":
        # Two ranks on one GPU talk over NCCL's socket transport, on
        # loopback; NCCL says why when it fails.
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env.setdefault("NCCL_DEBUG", "WARN")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(HERE, "..", "..", "python"), FIXTURES, env.get("PYTHONPATH", "")])
    report = Report()
    rows = []
    if dev == "cuda":
        describe_gpu(report)

    def run(name, cmd):
        # --timeout bounds fsdp-run's commands; the Python references (eager
        # PyTorch, which starts slowly on a loaded machine) get at least
        # the default.
        timeout = args.timeout if cmd[0] == args.fsdp_run else max(args.timeout, 240)
        status, out = run_with_timeout(cmd, env, timeout)
        ok = status == 0
        detail = "" if status is not None else f" (no end within {timeout:g} s: killed)"
        report.check(ok, name, detail)
        if not ok:
            report.say("  " + " ".join(cmd))
            report.say("  " + (out or "").strip().replace("\n", "\n  "))
        return ok

    def metrics_of(path):
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        return [l for l in lines if "step" in l], next(l for l in lines if l.get("summary"))

    # 1. Conformance.
    run(f"check-communicator {backend}, 1 rank",
        [args.fsdp_run, "--check-communicator", "--device", dev])
    two = run(f"check-communicator {backend}, 2 ranks on one {dev}",
              [args.fsdp_run, "--check-communicator", "--device", dev, "--nproc", "2"])
    if two:
        two = run(f"check-communicator {backend}, 2 ranks, shard groups of 1",
                  [args.fsdp_run, "--check-communicator", "--device", dev, "--nproc", "2",
                   "--shard-group-size", "1"])
    else:
        report.skip(f"check-communicator {backend}, 2 ranks, shard groups of 1",
                    "the 2-rank conformance check failed")

    with open(os.path.join(args.dir, "cases.json")) as f:
        cases = json.load(f)
    d = lambda name: os.path.join(args.dir, name)  # noqa: E731
    for case in cases:
        label = f"{case['name']} on {case['ranks']} rank{'s' if case['ranks'] > 1 else ''}"
        if case["ranks"] > 1 and not two:
            report.skip(f"fsdp-run {label}", "the 2-rank conformance check failed")
            continue
        outputs = {}
        for graph in (False, True) if dev == "cuda" else (False,):
            tag = ".graph" if graph else ""
            metrics = d(f"{case['name']}.w{case['ranks']}{tag}.jsonl")
            final = d(f"{case['name']}.w{case['ranks']}{tag}.final.pt")
            cmd = [args.fsdp_run, d(case["plan"]), "--model", d(case["model"]),
                   "--data", d(case["data"]), "--device", dev, "--metrics", metrics,
                   "--save", final, "--deterministic", *case.get("run", [])]
            if case["ranks"] > 1:
                cmd += ["--nproc", str(case["ranks"])]
            if graph:
                cmd += ["--cuda-graph"]
            if run(f"fsdp-run {label}{' --cuda-graph' if graph else ''}", cmd):
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
        report.check(predicted == measured, f"memory {label}",
                     f": predicted {predicted} B, measured {measured} B, allocator peak "
                     f"{summary['allocator_peak_bytes']} B, reserved "
                     f"{summary.get('allocator_reserved_bytes')} B")
        rows.append((label, predicted, measured, summary["allocator_peak_bytes"],
                     summary.get("allocator_reserved_bytes"),
                     sum(s["step_ms"] for s in steps[1:]) / max(len(steps) - 1, 1)))
        # 4. The CUDA graph's losses.
        if True in outputs:
            graphed, _ = metrics_of(outputs[True][0])
            plain = [s["loss"] for s in steps]
            replayed = [s["loss"] for s in graphed]
            same = plain == replayed
            report.check(same, f"--cuda-graph losses {label}",
                         f": {'the same' if same else f'{replayed} != {plain}'}")

    report.say()
    report.say(f"| case | predicted B | measured B | allocator B | reserved B | ms/step |")
    report.say("|---|---:|---:|---:|---:|---:|")
    for label, pred, meas, alloc, res, ms in rows:
        report.say(f"| {label} | {pred} | {meas} | {alloc} | {res or 0} | {ms:.2f} |")
    report.say()
    if report.skipped:
        report.say(f"{len(report.skipped)} GPU checks skipped: {'; '.join(report.skipped)}")
    if not two:
        report.say("the 2-rank checks failed or were skipped: two ranks could not talk "
                   f"over {backend} on this one {dev} (see the conformance check's "
                   "output above); the 1-rank results stand")
    if report.failures:
        report.say(f"{len(report.failures)} GPU checks failed: {'; '.join(report.failures)}")
    else:
        report.say("all GPU checks passed" + (" (some skipped)" if report.skipped else ""))
    if args.results:
        os.makedirs(args.results, exist_ok=True)
        with open(os.path.join(args.results, "checks.md"), "w") as f:
            f.write("\n".join(report.lines) + "\n")
    sys.exit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
