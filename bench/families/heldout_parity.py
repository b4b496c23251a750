"""Training parity on real models outside the repository whose ops no
gradient rule covers (differentiated by libtorch's autograd,
aten.autograd_backward): torchvision's LR-ASPP and DeepLabV3 (bilinear
upsampling), R(2+1)D (3-D adaptive pooling) and a word-level LSTM language
model as in pytorch/examples (bench/memory's models).

    .venv/bin/python bench/families/heldout_parity.py [--models lraspp,...]
        [--ranks 1,2] [--seed N] [--no-dropout] [--mixed-precision bf16]
        [--mode trace|export|both] [--bin build/bin]

For each model and rank count: exports it (2 samples per rank), compiles the
AdamW step (FULL_SHARD with size-based wrapping above one rank), trains 3
steps with fsdp-run --nproc, and compares the per-step loss and the final
parameters and buffers with eager PyTorch (test/fixtures/train_parity.py,
1e-5). Models with dropout (DeepLabV3's ASPP, the LSTM between layers)
draw other masks than eager unless both are seeded: --seed N (fsdp-run
--seed and torch.manual_seed, each rank's micro-batch from that state), or
--no-dropout. --models also takes bench/memory's models (resnet18, vit,
bert, ...). --mixed-precision bf16 compiles with it and compares with the
eager reference doing the same casts. --mode export saves the model with
torch.export (a .pt2) instead of torch.jit.trace; --mode both runs each
way and compares the two runs with each other too: "same bits" where every
loss and every final tensor is bitwise equal, else the largest difference.
Prints a markdown table.
"""

import argparse
import copy
import json
import os
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision.models.segmentation as tvs  # noqa: E402
import torchvision.models.video as tvv  # noqa: E402

import fsdp_export  # noqa: E402
import train_parity  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
import heldout  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench", "memory"))
import bench_memory  # noqa: E402
from bench_memory import LSTMLM, Segmentation  # noqa: E402


MODELS = {
    "lraspp": (lambda: Segmentation(tvs.lraspp_mobilenet_v3_large(
        num_classes=5, weights_backbone=None)),
               lambda b: {"x": torch.randn(b, 3, 32, 32)}),
    "deeplabv3_mnv3": (lambda: Segmentation(tvs.deeplabv3_mobilenet_v3_large(
        num_classes=5, weights_backbone=None)), lambda b: {"x": torch.randn(b, 3, 32, 32)}),
    "r2plus1d_18": (lambda: tvv.r2plus1d_18(num_classes=5),
                    lambda b: {"x": torch.randn(b, 3, 4, 16, 16)}),
    "lstm_lm": (LSTMLM, lambda b: {"x": torch.randint(0, 100, (b, 6))}),
}
# bench/memory's other held-out models (torchvision CNNs, vision and text
# transformers) by name too.
for _name, _entry in bench_memory.MODELS.items():
    MODELS.setdefault(_name, _entry)
DEFAULT_MODELS = "lraspp,deeplabv3_mnv3,r2plus1d_18,lstm_lm"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=DEFAULT_MODELS,
                   help="comma-separated; also any of bench/memory's models")
    p.add_argument("--mixed-precision", choices=["bf16"], default=None,
                   help="compile and compare with --mixed-precision bf16")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-dropout", action="store_true")
    p.add_argument("--mode", choices=["trace", "export", "both"], default="trace")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = p.parse_args()
    steps, batch = 3, 2
    modes = ["trace", "export"] if args.mode == "both" else [args.mode]
    print("| model | ranks | " + " | ".join(
        f"{m} parity (3 steps, AdamW, 1e-5) | {m} autograd_backward instructions"
        for m in modes) + (" | trace vs export |" if len(modes) == 2 else " |"))
    print("|---|---:|" + "---|---:|" * len(modes) + ("---|" if len(modes) == 2 else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            make, inputs_for = MODELS[name]
            d = os.path.join(tmp, name)
            os.makedirs(d)
            torch.manual_seed(0)
            model = make().train()
            if args.no_dropout:
                for m in model.modules():
                    if isinstance(m, nn.Dropout):
                        m.p = 0.0
                    elif isinstance(m, nn.RNNBase):
                        m.dropout = 0.0
            inputs = inputs_for(batch)
            with torch.no_grad():
                out = model(*inputs.values())
            target_shape = tuple(out.shape[:-1])
            targets = {"target": torch.zeros(target_shape, dtype=torch.long)}
            files = {}
            for mode in modes:
                files[mode] = os.path.join(d, "m.pt2" if mode == "export" else "m.pt")
                fsdp_export.save(model, files[mode], inputs, targets=targets, method=mode)
            gen = torch.Generator().manual_seed(1)
            ranks = [int(r) for r in args.ranks.split(",")]
            most = max(ranks)
            full = {n: (torch.randn(steps, most * batch, *t.shape[1:], generator=gen)
                        if t.is_floating_point() else
                        torch.randint(0, 100, (steps, most * batch, *t.shape[1:]), generator=gen))
                    for n, t in inputs.items()}
            full["target"] = torch.randint(0, out.shape[-1],
                                           (steps, most * batch, *target_shape[1:]), generator=gen)
            for w in ranks:
                data = os.path.join(d, f"d{w}.pt")
                torch.save({n: t[:, : w * batch] for n, t in full.items()}, data)
                cells, runs = [], {}
                for mode in modes:
                    cell, run = train_and_compare(args, name, mode, model, files[mode], data,
                                                  w, steps, d)
                    cells.append(cell)
                    if run:
                        runs[mode] = run
                if len(runs) == 2:
                    cells.append(twins(runs["trace"], runs["export"]))
                elif len(modes) == 2:
                    cells.append("")
                print(f"| {name} | {w} | " + " | ".join(cells) + " |", flush=True)


def train_and_compare(args, name, mode, model, model_file, data, w, steps, d):
    """Compiles and trains MODEL_FILE on W ranks and compares with eager:
    the table's two cells for MODE, and the run's metrics and final state
    (None where a tool failed)."""
    plan = os.path.join(d, f"p{w}.{mode}.plan")
    compile_cmd = [os.path.join(args.bin, "fsdp-opt"), model_file,
                   "--loss", "cross_entropy", "--optimizer", "adamw", "--lr", "0.001",
                   "--emit", "plan", "-o", plan]
    if w > 1:
        compile_cmd += ["--world-size", str(w), "--sharding", "FULL_SHARD",
                        "--auto-wrap", "size", "--min-num-params", "20000"]
    if args.mixed_precision:
        compile_cmd += ["--mixed-precision", args.mixed_precision]
    metrics = os.path.join(d, f"m{w}.{mode}.jsonl")
    final = os.path.join(d, f"f{w}.{mode}.pt")
    run_cmd = [os.path.join(args.bin, "fsdp-run"), plan, "--model", model_file,
               "--data", data, "--nproc", str(w), "--metrics", metrics, "--save", final]
    if args.seed is not None:
        run_cmd += ["--seed", str(args.seed)]
    failed = heldout.run_commands([compile_cmd, run_cmd])
    if failed:
        return f"{failed} | ", None
    n_autograd = heldout.autograd_instructions(plan)
    ref_args = heldout.adamw_reference(steps, "cross_entropy", args.seed,
                                       args.mixed_precision)
    # The reference is the nn.Module itself under mixed precision (its
    # code creates tensors in its inputs' dtype where the traced module
    # recorded float32; fsdp-opt does as the code does) and for torch.export
    # (torch.export.load's module unties tied weights).
    reference_model = (copy.deepcopy(model) if args.mixed_precision or mode == "export"
                       else model_file)
    losses, module, expected = train_parity.reference(ref_args, reference_model, data, w)
    bad, compared = train_parity.compare(name, losses, module, metrics, final, expected)
    verdict = ("MISMATCH: " + "; ".join(bad[:3])) if bad else \
        f"{len(losses)} losses and {compared} tensors match"
    return f"{verdict} | {n_autograd}", (metrics, final)


def twins(a, b):
    """"same bits" where runs A and B (metrics, final state) have bitwise
    equal losses and final tensors, else the largest difference."""
    losses = []
    for metrics in (a[0], b[0]):
        with open(metrics) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        losses.append([line["loss"] for line in lines if not line.get("summary")])
    states = [torch.load(final) for final in (a[1], b[1])]
    if sorted(states[0]) != sorted(states[1]):
        return "different state names"
    worst, where = max((abs(x - y), "loss") for x, y in zip(*losses)) if losses[0] else (0.0, "")
    same = losses[0] == losses[1]
    for key in states[0]:
        x, y = states[0][key], states[1][key]
        if not torch.equal(x, y):
            same = False
            diff = (x.double() - y.double()).abs().max().item() if x.numel() else 0.0
            if diff > worst:
                worst, where = diff, key
    return "same bits" if same else f"differ: {worst:.2e} ({where})"

if __name__ == "__main__":
    main()
