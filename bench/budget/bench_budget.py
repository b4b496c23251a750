"""One memory budget, every saver chosen for it: step time against budget.

    .venv/bin/python bench/budget/bench_budget.py [--ranks 2] [--points 6] [--steps 8]
        [--warmup 3] [--models gpt resnet18 gpt2] [--plot docs/budget.svg] [--machine FILE|cpu]

For each model, at --ranks local CPU ranks (FULL_SHARD, AdamW, one thread
per rank): the peak without savers (the model as one unit) and the
smallest peak any choice reaches (what fsdp-opt's error names for a budget
of 1 byte); --points budgets from the one down to the other. For each
budget, `fsdp-opt --memory-budget B` chooses the units, schedule,
checkpointing and offload (--savers auto); fsdp-run trains the plan: the
table gives what was chosen, the predicted and measured peak, and the
predicted and measured step time (median after the warm-up steps). Beside
it, what a user of PyTorch FSDP picks by hand for the same budget: a unit
per block (--auto-wrap class), then checkpointing every block
(--activation-checkpointing), then offloading everything (--offload-params),
the first that fits by fsdp-opt's prediction, with its measured step time.
The rates the search predicts with are this machine's, calibrated first
(fsdp-opt --calibrate) unless --machine names a file. With --plot, draws
measured step time against budget (SVG).

Models: gpt (bench/scale's GPT: 4 blocks, d_model 128, sequence 64, vocab
512, batch 4 a rank), resnet18 (torchvision, batch 8 of 32x32 a rank),
gpt2 (transformers' GPT2LMHeadModel from a 2-layer config, random weights,
batch 4 of 32 tokens a rank).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "bench", "cost"))

import torch  # noqa: E402

import bench_cost  # noqa: E402
import models  # noqa: E402

# model -> (batch a rank, the block class a user wraps and checkpoints)
MODELS = {"gpt": (4, "GPTBlock"), "resnet18": (8, "BasicBlock"), "gpt2": (4, "GPT2Block")}


def build(name, batch):
    if name == "gpt":
        return models.build("gpt", batch=batch, d_model=128, n_layer=4, n_head=4,
                            max_len=64, vocab=512)
    return bench_cost.build(name, batch)


def export(name, batch, tmp, steps, ranks):
    module, inputs = build(name, batch)
    model = os.path.join(tmp, f"{name}.pt")
    out, gen = bench_cost.export(name, module, inputs, model)
    data_path = os.path.join(tmp, f"{name}.data.pt")
    bench_cost.write_data(inputs, out, gen, steps, ranks, data_path)
    return model, data_path


class Runner:
    def __init__(self, args, tmp, env):
        self.args, self.tmp, self.env = args, tmp, env
        self.opt = os.path.join(args.bin, "fsdp-opt")
        self.run_bin = os.path.join(args.bin, "fsdp-run")
        self.count = 0

    def base(self, model):
        return [self.opt, model, "--loss", "cross_entropy", "--optimizer", "adamw",
                "--lr", "1e-3", "--world-size", str(self.args.ranks),
                "--machine", self.args.machine]

    def compile(self, model, flags):
        """Compiles; returns (plan, memory report JSON, --fsdp-report text)
        or the error's text."""
        self.count += 1
        plan = os.path.join(self.tmp, f"p{self.count}.plan")
        memory = os.path.join(self.tmp, f"p{self.count}.json")
        r = subprocess.run(self.base(model) + flags + ["--fsdp-report", "--emit", "plan",
                                                       "-o", plan, "--memory-report-json",
                                                       memory],
                           capture_output=True, text=True, env=self.env)
        if r.returncode != 0:
            return None, None, r.stderr
        with open(memory) as f:
            return plan, json.load(f), r.stdout

    def train(self, plan, model, data):
        """Median step ms after the warm-up, and the measured peak."""
        metrics = plan + ".jsonl"
        subprocess.run([self.run_bin, plan, "--model", model, "--data", data,
                        "--nproc", str(self.args.ranks), "--steps", str(self.args.steps),
                        "--metrics", metrics], check=True, env=self.env,
                       stdout=subprocess.DEVNULL)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        steps = [m["step_ms"] for m in lines if "step" in m and not m.get("summary")]
        summary = next(m for m in lines if m.get("summary"))
        return statistics.median(steps[self.args.warmup:]), summary["peak_bytes"]


def kib(n):
    return f"{n / 1024:,.0f}"


def chosen_summary(report):
    """The --fsdp-report's chosen line, shortened for the table."""
    m = re.search(r"chosen:\s+(.*?): peak", report)
    text = m.group(1) if m else "?"
    text = re.sub(r" \(min_num_params \d+\)", "", text)
    text = text.replace("limit_all_gathers 2, ", "").replace("checkpointing ", "ckpt ")
    text = re.sub(r"offload optimizer state of \[([^\]]*)\], parameters of \[([^\]]*)\]",
                  lambda g: "offload " + str(len([u for u in g.group(1).split(",") if u]))
                  + " optim, " + str(len([u for u in g.group(2).split(",") if u])) + " params",
                  text)
    # A class by its last component (models.GPTBlock: GPTBlock).
    text = re.sub(r"every ([\w.]+\.)(\w+)", r"every \2", text)
    return text.replace("offload none", "no offload")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--points", type=int, default=6)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", nargs="*", default=list(MODELS))
    p.add_argument("--machine", default=None)
    p.add_argument("--plot", default=None)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.machine is None:
            args.machine = os.path.join(tmp, "machine.json")
            subprocess.run([os.path.join(args.bin, "fsdp-opt"), "--calibrate", "--world-size",
                            str(args.ranks), "-o", args.machine], check=True, env=env,
                           stdout=subprocess.DEVNULL)
        r = Runner(args, tmp, env)
        print(f"{args.ranks} ranks, FULL_SHARD, AdamW, 1 thread a rank; machine "
              f"{'calibrated here' if args.machine.startswith(tmp) else args.machine}; "
              f"median step of {args.warmup + 1}-{args.steps}; KiB\n")
        for name in args.models:
            batch, block = MODELS[name]
            model, data = export(name, batch, tmp, args.steps, args.ranks)
            plain, plain_json, _ = r.compile(model, ["--sharding", "FULL_SHARD"])
            top = plain_json["peak_bytes"]
            _, _, err = r.compile(model, ["--memory-budget", "1"])
            m = re.search(r"smallest predicted peak is .*? \((\d+) bytes\)", err)
            if not m:
                raise SystemExit(f"{name}: no smallest peak in: {err}")
            bottom = int(m.group(1))
            # What a user picks by hand, from the least to the most saving.
            hand = []
            for label, flags in [
                    ("unit per block", []),
                    ("+ ckpt every block", ["--activation-checkpointing"]),
                    ("+ offload everything", ["--activation-checkpointing",
                                              "--offload-params"])]:
                plan, rep, _ = r.compile(model, ["--auto-wrap", "class", "--wrap-class", block,
                                                 *flags])
                ms, peak = r.train(plan, model, data)
                hand.append((label, rep["peak_bytes"], ms, peak, rep["step_seconds"] * 1e3))
            print(f"**{name}** (batch {batch} a rank): without savers {kib(top)}; smallest "
                  f"reachable {kib(bottom)}; by hand: "
                  + "; ".join(f"{h[0]}: peak {kib(h[1])}, {h[4]:.1f} ms predicted, "
                              f"{h[2]:.1f} measured" for h in hand) + "\n")
            print("| budget | chosen | predicted peak | measured peak | predicted ms "
                  "| measured ms | by hand | by hand ms |")
            print("|---:|---|---:|---:|---:|---:|---|---:|")
            rows = []
            for k in range(args.points):
                # From the one down to the other, the last exactly the smallest.
                budget = (bottom if k == args.points - 1 else
                          int(top * (bottom / top) ** (k / max(1, args.points - 1))))
                plan, rep, report = r.compile(model, ["--memory-budget", str(budget)])
                if plan is None:
                    print(f"| {kib(budget)} | error: {report.strip().splitlines()[-1]} |")
                    continue
                ms, peak = r.train(plan, model, data)
                pick = next((h for h in hand if h[1] <= budget), None)
                rows.append((budget, ms, rep["step_seconds"] * 1e3, pick[2] if pick else None))
                print(f"| {kib(budget)} | {chosen_summary(report)} | {kib(rep['peak_bytes'])} | "
                      f"{kib(peak)} | {rep['step_seconds'] * 1e3:.1f} | {ms:.1f} | "
                      f"{pick[0] if pick else 'none fits'} | "
                      f"{f'{pick[2]:.1f}' if pick else '-'} |", flush=True)
            print()
            results[name] = rows
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4))
        axes = [axes] if len(results) == 1 else axes
        for ax, (name, rows) in zip(axes, results.items()):
            x = [b / 1024 for b, *_ in rows]
            ax.plot(x, [m for _, m, _, _ in rows], "o-", label="--memory-budget (measured)")
            ax.plot(x, [q for _, _, q, _ in rows], "o--", alpha=0.6,
                    label="--memory-budget (predicted)")
            hx = [b / 1024 for b, _, _, h in rows if h is not None]
            ax.plot(hx, [h for *_, h in rows if h is not None], "s-",
                    label="by hand (measured)")
            ax.set_title(name)
            ax.set_xlabel("budget (KiB)")
            ax.invert_xaxis()
            ax.set_ylabel("step (ms)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, metadata={"Date": None})
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
