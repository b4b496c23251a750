"""The cost model against fsdp-run: predicted step time beside measured.

    .venv/bin/python bench/cost/bench_cost.py [--machine FILE|cpu] [--calibrate]
        [--ranks 1 2] [--steps 30] [--warmup 5] [--repeat 1]
        [--models mlp cnn gpt encoder resnet18 gpt2]

For each model and rank count: export it (traced), compile its training
step with fsdp-opt (cross-entropy, AdamW, FULL_SHARD, size-based wrapping
at --min-num-params) with --memory-report-json and --machine, which gives
the predicted step time (step_seconds); run the plan with fsdp-run --nproc
(CPU, Gloo, cores / ranks threads a rank) and take rank 0's median step_ms
after the warm-up steps. The same compile with --measure-kernels gives a
second prediction, with each distinct call's time measured here (at the
rank's threads) in place of the rates' estimate; the collectives stay the
rates'. With --calibrate, first measure this machine's rates (fsdp-opt
--calibrate, once per rank count) and predict with them.
The fixtures (test/fixtures/models.py) are those the compiler is tested
on; resnet18 (torchvision) and gpt2 (transformers' GPT2LMHeadModel from a
small config, random weights) are models the cost model was not fitted to.
With --per-op N, fsdp-run also writes its profile (--profile-json), and
for each model and rank count the N ops whose predicted and measured
times differ most follow the table (the last repeat's, every step's mean
with the warm-up's; profiling adds two clock reads per instruction to
the measured step), then the N calls (instructions, with the module
they come from) that differ most.
With --repeat N, each model and rank count is compiled and run N times,
each time with a calibration of its own (made before the first model):
the table then gives the medians and the ratios' range, since on a shared
machine both sides move between runs.
Prints a markdown table: predicted (rates; kernels timed, and how much of
the latter is kernels reading operands evicted from the caches: their
cold time over the warm one) and measured ms, their ratios, and the
predicted share of the step in collectives not overlapped.
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
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402

import fsdp_export  # noqa: E402
import models  # noqa: E402
import train_parity  # noqa: E402

# model -> (batch per rank, min-num-params for wrapping)
CONFIGS = {
    "mlp": (64, 20000),
    "cnn": (16, 2000),
    "gpt": (8, 20000),
    "encoder": (16, 20000),
    "resnet18": (8, 500000),
    "gpt2": (4, 100000),
}


def build(name, batch):
    """The module and its example inputs (one rank's batch)."""
    if name == "resnet18":
        import torchvision
        torch.manual_seed(0)
        return (torchvision.models.resnet18(num_classes=10),
                {"x": torch.randn(batch, 3, 32, 32)})
    if name == "gpt2":
        import transformers
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=64,
                                      vocab_size=512, attn_pdrop=0.0, embd_pdrop=0.0,
                                      resid_pdrop=0.0, use_cache=False,
                                      attn_implementation="eager")

        class LM(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = transformers.GPT2LMHeadModel(cfg)

            def forward(self, ids):
                return self.model(input_ids=ids).logits

        return LM(), {"ids": torch.randint(0, 512, (batch, 32))}
    kw = {"mlp": {"hidden": 512}, "cnn": {"widths": (32, 64)},
          "gpt": {"d_model": 128, "n_layer": 4, "max_len": 64, "vocab": 512},
          "encoder": {"d_model": 128}}[name]
    return models.build(name, batch=batch, **kw)


def export(name, module, inputs, path):
    """Traces `module` (train mode) with a cross-entropy target to `path`;
    returns its output on `inputs` and the generator the data continues
    from."""
    module.train()
    with torch.no_grad():
        out = train_parity.first(module(*inputs.values()))
    gen = torch.Generator().manual_seed(1)
    target = train_parity.target_for(out, "cross_entropy", gen)
    fsdp_export.save(module, path, inputs, targets={"target": target})
    return out, gen


def write_data(inputs, out, gen, steps, ranks, path):
    """`steps` batches of every rank's inputs and targets together."""
    data = {}
    for n, ex in inputs.items():
        shape = (steps, ex.shape[0] * ranks) + tuple(ex.shape[1:])
        if ex.dtype.is_floating_point:
            data[n] = torch.randn(shape, generator=gen)
        else:
            data[n] = torch.randint(0, int(ex.max()) + 1, shape, generator=gen)
    target = train_parity.target_for(out, "cross_entropy", gen, steps=steps)
    data["target"] = target.repeat_interleave(ranks, dim=1) if ranks > 1 else target
    torch.save(data, path)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machine", default="cpu")
    p.add_argument("--calibrate", action="store_true")
    p.add_argument("--ranks", type=int, nargs="*", default=[1, 2])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--models", nargs="*", default=list(CONFIGS))
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--per-op", type=int, default=0, metavar="N",
                   help="after the table, for each model and rank count the N ops "
                        "whose predicted (kernels timed) and measured times differ "
                        "most, then the N calls (fsdp-run --profile-json, last "
                        "repeat)")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.per_op < 0:
        p.error("--per-op must be at least 0")
    opt, run = os.path.join(args.bin, "fsdp-opt"), os.path.join(args.bin, "fsdp-run")

    with tempfile.TemporaryDirectory() as tmp:
        # One machine per repeat: a calibration moves between runs too.
        machines = {}
        for ranks in args.ranks:
            machines[ranks] = []
            for r in range(args.repeat):
                if not args.calibrate:
                    machines[ranks].append(args.machine)
                    continue
                path = os.path.join(tmp, f"machine-{ranks}-{r}.json")
                subprocess.run([opt, "--calibrate", "--world-size", str(ranks), "-o", path],
                               check=True, stdout=subprocess.DEVNULL)
                machines[ranks].append(path)
        repeats = (f"; the median over {args.repeat} repeats (each its own calibration, "
                   "compiles and run), the ratios' range in brackets" if args.repeat > 1 else "")
        print(f"machine {'calibrated here' if args.calibrate else args.machine}; "
              f"median step_ms of steps {args.warmup + 1}-{args.steps} on rank 0{repeats}\n")
        print("| model | params | ranks | batch/rank | predicted ms (rates) "
              "| predicted ms (kernels timed) | of which operands from memory "
              "| measured ms | rates / measured "
              "| kernels timed / measured | collectives not overlapped |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        per_op = []
        for name in args.models:
            batch, min_params = CONFIGS[name]
            module, inputs = build(name, batch)
            model = os.path.join(tmp, f"{name}.pt")
            out, gen = export(name, module, inputs, model)
            params = sum(q.numel() for q in train_parity.unique_parameters(module))
            for ranks in args.ranks:
                data_path = os.path.join(tmp, f"{name}-{ranks}.data.pt")
                write_data(inputs, out, gen, args.steps, ranks, data_path)
                rows = []
                for machine in machines[ranks]:
                    rows.append(predict_and_run(opt, run, model, data_path, ranks,
                                                min_params, machine, args, tmp, name))
                if args.per_op:
                    per_op.append((name, ranks, rows[-1][5]))
                rows = [row[:5] for row in rows]
                rates, kernels, measured, exposed, cold = (statistics.median(col)
                                                           for col in zip(*rows))

                def ratio(k):
                    r = f"{statistics.median(row[k] / row[2] for row in rows):.2f}"
                    if len(rows) > 1:
                        r += f" ({min(row[k] / row[2] for row in rows):.2f}-" \
                             f"{max(row[k] / row[2] for row in rows):.2f})"
                    return r
                print(f"| {name} | {params / 1e6:.2f}M | {ranks} | {batch} | {rates:.2f} | "
                      f"{kernels:.2f} | {cold:.2f} | {measured:.2f} | {ratio(0)} | "
                      f"{ratio(1)} | {100 * exposed:.0f}% |", flush=True)
        for name, ranks, ops in per_op:
            print(f"\n{name} at {ranks} rank{'s' if ranks > 1 else ''}: ms a step, "
                  "predicted with kernels timed (a collective's time on its own "
                  "clock, at its start) against measured (a collective's start "
                  "and its wait apart)\n")
            print("| op | predicted ms | measured ms | measured - predicted |")
            print("|---|---:|---:|---:|")
            worst = sorted(ops[0].items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))
            for op, (pred, meas) in worst[:args.per_op]:
                print(f"| {op} | {pred:.2f} | {meas:.2f} | {meas - pred:+.2f} |")
            print("\n| instruction | op | from | predicted ms | measured ms "
                  "| measured - predicted |")
            print("|---:|---|---|---:|---:|---:|")
            calls = sorted(ops[1], key=lambda c: -abs(c[4] - c[3]))
            for i, op, where, pred, meas in calls[:args.per_op]:
                print(f"| #{i} | {op} | {where} | {pred:.3f} | {meas:.3f} "
                      f"| {meas - pred:+.3f} |")


def predict_and_run(opt, run, model, data_path, ranks, min_params, machine, args, tmp, name):
    """Predicted (rates; kernels timed) and measured ms of one compile and
    run, the predicted share not overlapped, the part of the timed
    kernels' time spent on operands evicted from the caches, and the
    per-op and per-call times."""
    plan = os.path.join(tmp, f"{name}-{ranks}.plan")
    report = os.path.join(tmp, f"{name}-{ranks}.json")
    metrics = os.path.join(tmp, f"{name}-{ranks}.jsonl")
    compile_args = [opt, model, "--loss", "cross_entropy", "--optimizer", "adamw",
                    "--lr", "1e-3", "--world-size", str(ranks),
                    "--sharding", "FULL_SHARD", "--auto-wrap", "size",
                    "--min-num-params", str(min_params), "--machine", machine]
    subprocess.run(compile_args + ["--memory-report-json", report, "--emit", "plan",
                                   "-o", plan], check=True)
    timed = os.path.join(tmp, f"{name}-{ranks}.kernels.json")
    subprocess.run(compile_args + ["--measure-kernels", "--memory-report-json", timed,
                                   "-o", os.devnull], check=True)
    profile = os.path.join(tmp, f"{name}-{ranks}.profile.json")
    subprocess.run([run, plan, "--model", model, "--data", data_path,
                    "--nproc", str(ranks), "--metrics", metrics]
                   + (["--profile-json", profile] if args.per_op else []),
                   check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        predicted = json.load(f)
    with open(timed) as f:
        timed_report = json.load(f)
    kernels_ms = timed_report["step_seconds"] * 1e3
    ops, calls = {}, []
    if args.per_op:
        # By op, as fsdp-run --profile names them: the plan's instructions
        # in the same order on both sides.
        with open(profile) as f:
            measured_ops = json.load(f)
        assert len(measured_ops["ops"]) == len(timed_report["instruction_seconds"])
        for op, pred, meas in zip(measured_ops["ops"], timed_report["instruction_seconds"],
                                  measured_ops["instruction_seconds"]):
            entry = ops.setdefault(op, [0.0, 0.0])
            entry[0] += pred * 1e3
            entry[1] += meas * 1e3
        # Each call, named by the module it comes from (the plan's `loc`:
        # "module at file:line", the file's directory left out).
        with open(plan) as f:
            instructions = json.load(f)["instructions"]
        for i, inst in enumerate(instructions):
            if inst.get("kind") not in ("call", "autograd_backward"):
                continue
            module_name, _, where = inst.get("loc", "").partition(" at ")
            where = f"{module_name} at {os.path.basename(where)}" if where else module_name
            calls.append((i, inst.get("op", inst.get("kind")), where,
                          timed_report["instruction_seconds"][i] * 1e3,
                          measured_ops["instruction_seconds"][i] * 1e3))
    with open(metrics) as f:
        steps = [j["step_ms"] for j in map(json.loads, f) if "step" in j]
    measured = statistics.median(steps[args.warmup:])
    exposed = predicted["exposed_seconds"] / max(predicted["step_seconds"], 1e-12)
    cold_ms = timed_report["cold_seconds"] * 1e3
    return (predicted["step_seconds"] * 1e3, kernels_ms, measured, exposed, cold_ms,
            (ops, calls))


if __name__ == "__main__":
    main()
