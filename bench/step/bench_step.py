"""Training-step time of fsdp-run beside eager PyTorch, one rank, CPU.

    .venv/bin/python bench/step/bench_step.py [--steps 20] [--threads N] [--optimizer sgd|adamw]

For each fixture: export it (traced), compile its training step with
fsdp-opt, run it with fsdp-run, and time the same step in eager PyTorch (the
original nn.Module with the same weights: zero_grad, forward, loss,
backward, optimizer.step) on the same batches with the same thread count.
Times are medians over the steps after the warm-up ones (fsdp-run's from
its --metrics step_ms), then the median of --rounds alternating rounds.
Prints a table with the ratio fsdp-run / eager.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402

import fsdp_export  # noqa: E402
import models  # noqa: E402
import train_parity  # noqa: E402

# fixture -> (batch, constructor keywords): big enough that kernels, not
# per-op overhead, dominate.
CONFIGS = {
    "mlp": (256, {"hidden": 1024}),
    "cnn": (32, {"widths": (32, 64)}),
    "gpt": (8, {"d_model": 128, "n_layer": 4, "max_len": 64, "vocab": 512}),
    "encoder": (32, {"d_model": 128}),
}


def median_eager(module, data, names, args):
    opt = train_parity.optimizer_for(train_parity.unique_parameters(module),
                                     argparse.Namespace(**vars(args), weight_decay=None))
    times = []
    for step in range(args.steps):
        batch = [data[n][step] for n in names]
        start = time.perf_counter()
        opt.zero_grad()
        loss = train_parity.loss_of(module(*batch), data["target"][step], "cross_entropy")
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[args.warmup:])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--fixtures", nargs="*", default=list(CONFIGS))
    args = p.parse_args()
    args.lr, args.momentum, args.nesterov = 1e-3, 0.9 if args.optimizer == "sgd" else 0.0, False
    args.beta1, args.beta2, args.eps = 0.9, 0.999, 1e-8
    args.dampening, args.maximize, args.amsgrad = 0.0, False, False
    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    flags = ["--optimizer", args.optimizer, "--lr", "1e-3"]
    if args.optimizer == "sgd":
        flags += ["--momentum", "0.9"]

    print(f"threads {args.threads}, {args.optimizer}, median of steps "
          f"{args.warmup + 1}-{args.steps}, median of {args.rounds} rounds\n")
    print("| fixture | params | batch | eager ms | fsdp-run ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.fixtures:
            batch, kw = CONFIGS[name]
            module, inputs = models.build(name, batch=batch, **kw)
            module.train()
            with torch.no_grad():
                out = train_parity.first(module(*inputs.values()))
            gen = torch.Generator().manual_seed(1)
            target = train_parity.target_for(out, "cross_entropy", gen)
            model = os.path.join(tmp, f"{name}.pt")
            fsdp_export.save(module, model, inputs, targets={"target": target})
            data = {}
            for n, ex in inputs.items():
                if ex.dtype.is_floating_point:
                    data[n] = torch.randn((args.steps,) + tuple(ex.shape), generator=gen)
                else:
                    data[n] = torch.randint(0, int(ex.max()) + 1,
                                            (args.steps,) + tuple(ex.shape), generator=gen)
            data["target"] = train_parity.target_for(out, "cross_entropy", gen, steps=args.steps)
            data_path = os.path.join(tmp, f"{name}.data.pt")
            torch.save(data, data_path)
            plan = os.path.join(tmp, f"{name}.plan")
            metrics = os.path.join(tmp, f"{name}.jsonl")
            subprocess.run([os.path.join(args.bin, "fsdp-opt"), model, "--loss",
                            "cross_entropy", *flags, "--emit", "plan", "-o", plan], check=True)
            # Rounds alternate between the two, so that drift in the machine's
            # speed affects both alike; each side reports its median round.
            ours_rounds, eager_rounds = [], []
            for _ in range(args.rounds):
                subprocess.run([os.path.join(args.bin, "fsdp-run"), plan, "--model", model,
                                "--data", data_path, "--metrics", metrics,
                                "--threads", str(args.threads)], check=True,
                               env=env, stdout=subprocess.DEVNULL)
                with open(metrics) as f:
                    ours_rounds.append(statistics.median(
                        [j["step_ms"] for j in map(json.loads, f) if "step" in j][args.warmup:]))
                # Eager: the original module, with the exported weights.
                reference, _ = models.build(name, batch=batch, **kw)
                reference.load_state_dict(torch.jit.load(model).state_dict(), strict=False)
                reference.train()
                eager_rounds.append(median_eager(reference, data, list(inputs), args))
            ours = statistics.median(ours_rounds)
            eager = statistics.median(eager_rounds)
            params = sum(p.numel() for p in train_parity.unique_parameters(reference))
            print(f"| {name} | {params / 1e6:.2f}M | {batch} | {eager:.2f} | {ours:.2f} | "
                  f"{ours / eager:.2f} |", flush=True)


if __name__ == "__main__":
    main()
