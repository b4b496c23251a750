"""Predicted against measured memory on real models (torchvision's, a
BERT-style encoder and an LSTM language model, none of them fixtures of the
tests).

    .venv/bin/python bench/memory/bench_memory.py [--models resnet18,vit,...]
        [--world-size 2] [--sharding FULL_SHARD] [--batch 2]

For each model: exports it with one rank's batch (fsdp_export), compiles
the AdamW training step sharded over --world-size ranks with
--memory-report-json and --measure-workspaces, trains 2 steps with fsdp-run
--nproc and --memory-timeline, and prints a markdown table: fsdp-opt's
predicted peak of live tensors, fsdp-run's measured peak (the largest over
ranks and steps), whether the two and rank 0's per-instruction timelines
are equal to the byte; then the same for what ATen's allocator hands out
(allocator_peak_bytes: the live tensors less the constants fsdp-run keeps
for the whole run, plus kernels' own workspaces, which fsdp-opt measures
by running each distinct call once), with its excess over the live peak.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision.models as tvm  # noqa: E402
import torchvision.models.segmentation as tvs  # noqa: E402
import torchvision.models.video as tvv  # noqa: E402

import fsdp_export  # noqa: E402
from fsdp_parity import check_memory  # noqa: E402


class Bert(nn.Module):
    """A BERT-style classifier: embedding, pre-norm encoder, mean pooling."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)).mean(1))


class Segmentation(nn.Module):
    """A torchvision segmentation model's `out` map, pooled to class scores."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"].mean((2, 3))


class LSTMLM(nn.Module):
    """A word-level LSTM language model, as pytorch/examples' word_language_model
    (sequence first inside; batch first at the boundary), scored on its last
    step."""

    def __init__(self, ntoken=100, ninp=32, nhid=32, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, 10)

    def forward(self, x):
        out, _ = self.rnn(self.encoder(x).transpose(0, 1))
        return self.decoder(out[-1])


def image(size):
    return lambda b: {"x": torch.randn(b, 3, size, size)}


MODELS = {
    "resnet18": (lambda: tvm.resnet18(num_classes=10), image(32)),
    "resnext50": (lambda: tvm.resnext50_32x4d(num_classes=10), image(32)),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10), image(32)),
    "shufflenet_v2": (lambda: tvm.shufflenet_v2_x0_5(num_classes=10), image(32)),
    "squeezenet": (lambda: tvm.squeezenet1_1(num_classes=10), image(64)),
    "densenet121": (lambda: tvm.densenet121(num_classes=10), image(32)),
    "convnext_tiny": (lambda: tvm.convnext_tiny(num_classes=10), image(32)),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(num_classes=10), image(32)),
    "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(num_classes=10), image(32)),
    "mnasnet": (lambda: tvm.mnasnet0_5(num_classes=10), image(32)),
    "googlenet": (lambda: tvm.googlenet(num_classes=10, aux_logits=False,
                                        init_weights=False), image(64)),
    "swin_t": (lambda: tvm.swin_t(num_classes=10), image(64)),
    "vit": (lambda: tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                          num_heads=4, hidden_dim=64, mlp_dim=128,
                                          num_classes=10), image(32)),
    "bert": (Bert, lambda b: {"x": torch.randint(0, 100, (b, 8))}),
    # Ops differentiated by libtorch's autograd (aten.autograd_backward):
    # bilinear upsampling, 3-D adaptive pooling, an LSTM.
    "lraspp": (lambda: Segmentation(tvs.lraspp_mobilenet_v3_large(
        num_classes=10, weights_backbone=None)), image(32)),
    "deeplabv3_mnv3": (lambda: Segmentation(tvs.deeplabv3_mobilenet_v3_large(
        num_classes=10, weights_backbone=None)), image(32)),
    "r2plus1d_18": (lambda: tvv.r2plus1d_18(num_classes=10),
                    lambda b: {"x": torch.randn(b, 3, 4, 16, 16)}),
    "lstm_lm": (LSTMLM, lambda b: {"x": torch.randint(0, 100, (b, 8))}),
}


def mb(n):
    return "n/a" if n is None else f"{n / 1e6:.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--sharding", default="FULL_SHARD")
    p.add_argument("--batch", type=int, default=2, help="one rank's batch")
    p.add_argument("--min-num-params", type=int, default=20000,
                   help="size-based auto-wrap threshold")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = p.parse_args()
    torch.manual_seed(0)
    w, b = args.world_size, args.batch
    print(f"{args.sharding} on {w} ranks, {b} samples per rank, AdamW, 2 steps; MB = 1e6 bytes\n")
    print("| model | live peak MB predicted | measured | equal (peak and timeline) "
          "| allocator peak MB predicted | measured | equal (peak and timeline) "
          "| allocator excess over live |")
    print("|---|---:|---:|---|---:|---:|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            make, inputs_for = MODELS[name]
            d = os.path.join(tmp, name)
            os.makedirs(d)
            model, data = os.path.join(d, "m.pt"), os.path.join(d, "d.pt")
            inputs = inputs_for(b)
            fsdp_export.save(make().train(), model, inputs,
                             targets={"target": torch.randint(0, 10, (b,))})
            batches = {n: (torch.randn(2, w * b, *t.shape[1:]) if t.is_floating_point()
                           else torch.randint(0, 100, (2, w * b, *t.shape[1:])))
                       for n, t in inputs.items()}
            batches["target"] = torch.randint(0, 10, (2, w * b))
            torch.save(batches, data)
            plan, memory = os.path.join(d, "p.plan"), os.path.join(d, "memory.json")
            metrics, timeline = os.path.join(d, "m.jsonl"), os.path.join(d, "timeline.json")
            try:
                subprocess.run([os.path.join(args.bin, "fsdp-opt"), model, "--loss",
                                "cross_entropy", "--optimizer", "adamw", "--world-size", str(w),
                                "--sharding", args.sharding, "--auto-wrap", "size",
                                "--min-num-params", str(args.min_num_params), "--emit", "plan",
                                "-o", plan, "--memory-report-json", memory,
                                "--measure-workspaces"],
                               check=True, capture_output=True, text=True)
                subprocess.run([os.path.join(args.bin, "fsdp-run"), plan, "--model", model,
                                "--data", data, "--nproc", str(w), "--metrics", metrics,
                                "--memory-timeline", timeline],
                               check=True, capture_output=True, text=True)
            except subprocess.CalledProcessError as e:
                print(f"| {name} | {os.path.basename(e.cmd[0])} failed: "
                      f"{e.stderr.strip().splitlines()[-1] if e.stderr.strip() else e.returncode} |"
                      " | | | | | |", flush=True)
                continue
            bad = check_memory(plan, memory, timeline, metrics, allocator=False)
            with open(memory) as f:
                report = json.load(f)
            with open(metrics) as f:
                summary = [json.loads(line) for line in f][-1]
            measured, allocator = summary["peak_bytes"], summary["allocator_peak_bytes"]
            with open(timeline) as f:
                measured_timeline = json.load(f)["allocator_instruction_peak"]
            predicted_timeline = report["allocator_instruction_peak"]
            differ = [i for i, (a, b) in enumerate(zip(measured_timeline, predicted_timeline))
                      if a != b]
            if report["allocator_peak_bytes"] != allocator:
                equal = f"NO: {100 * (allocator / report['allocator_peak_bytes'] - 1):+.2f}%"
            elif differ:
                equal = f"peak; {len(differ)} instructions differ, the first #{differ[0]}"
            else:
                equal = "yes"
            if report["workspace_unmeasured"]:
                equal += f" ({len(report['workspace_unmeasured'])} not measured)"
            print(f"| {name} | {mb(report['peak_bytes'])} | {mb(measured)} | "
                  f"{'yes' if not bad else 'NO: ' + bad[0]} | "
                  f"{mb(report['allocator_peak_bytes'])} | {mb(allocator)} | {equal} | "
                  f"{100 * (allocator / measured - 1):+.0f}% |", flush=True)


if __name__ == "__main__":
    main()
