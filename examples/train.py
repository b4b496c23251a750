"""Your own training loop over a compiled plan: fsdp_opt.Runtime under
torchrun, fed by a DataLoader with a DistributedSampler.

    .venv/bin/python examples/train.py prepare                  # once: export, compile
    .venv/bin/torchrun --nproc-per-node 2 examples/train.py     # train on 2 CPU ranks

`prepare` exports a small classifier (with dropout, so in evaluation mode
too) and compiles its training and evaluation steps fully sharded over 2
ranks. The training script is an ordinary PyTorch loop: every rank takes
its own batches, sets the learning rate from its own schedule (`rt.lr`, the
plan compiled with lr_schedule="external"), calls `rt.step(batch)` (the
global batch's loss), runs
the evaluation step every 100 steps, writes a checkpoint after each epoch
(run it again and it goes on from the last one), and at the end loads the
trained parameters into the original `nn.Module` and measures its accuracy
in eager PyTorch. Files go to build/example/ (OUT to change).
"""

import math
import os
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fsdp_opt  # noqa: E402

OUT = os.environ.get("OUT", os.path.join("build", "example"))
BATCH = 32  # one rank's
WORLD = 2
EPOCHS = 3
LR = 2e-3


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 4)

    def forward(self, x):
        return self.head(self.body(x))


def model():
    torch.manual_seed(0)
    return Classifier()


def data():
    """4 classes of 20 features: a noisy linear rule, split 8:1."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9216, 20, generator=g)
    y = (x @ torch.randn(20, 4, generator=g) + 0.5 * torch.randn(9216, 4, generator=g)).argmax(1)
    return TensorDataset(x[:8192], y[:8192]), TensorDataset(x[8192:], y[8192:])


def prepare():
    os.makedirs(OUT, exist_ok=True)
    fsdp_opt.export(model(), os.path.join(OUT, "model.pt2"), {"x": torch.randn(BATCH, 20)},
                    method="export", eval_path=os.path.join(OUT, "model.eval.pt2"))
    plan = fsdp_opt.compile(os.path.join(OUT, "model.pt2"), os.path.join(OUT, "model.plan"),
                            eval_model=os.path.join(OUT, "model.eval.pt2"),
                            loss="cross_entropy", target=f"y:{BATCH}xi64", optimizer="adamw",
                            lr=LR, lr_schedule="external",  # the rate: set by train()
                            world_size=WORLD, memory_report=True)
    print(f"compiled {plan.path} for {plan.world_size} ranks: predicted peak "
          f"{plan.predicted_peak_bytes} bytes a rank")


def train():
    checkpoints = os.path.join(OUT, "checkpoints")
    resume = checkpoints if os.path.exists(os.path.join(checkpoints, "latest")) else None
    rt = fsdp_opt.Runtime(os.path.join(OUT, "model.plan"), os.path.join(OUT, "model.pt2"),
                          seed=0, resume=resume)
    train_set, val_set = data()
    sampler = DistributedSampler(train_set, num_replicas=rt.world_size, rank=rt.rank,
                                 shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(train_set, batch_size=BATCH, sampler=sampler, drop_last=True)
    val = DataLoader(val_set, batch_size=BATCH,
                     sampler=DistributedSampler(val_set, num_replicas=rt.world_size,
                                                rank=rt.rank, shuffle=False),
                     drop_last=True)
    per_epoch = len(loader)
    total = per_epoch * EPOCHS
    step = rt.steps  # where a checkpoint left off
    for epoch in range(step // per_epoch, EPOCHS):
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            if epoch * per_epoch + i < step:
                continue  # taken before the checkpoint
            # Our own schedule: cosine decay from LR to 0 over the run.
            rt.lr = LR * 0.5 * (1 + math.cos(math.pi * step / total))
            loss = rt.step({"x": x, "y": y})
            step += 1
            if step % 100 == 0:
                val_loss = sum(rt.evaluate({"x": vx, "y": vy}) for vx, vy in val) / len(val)
                if rt.rank == 0:
                    print(f"epoch {epoch} step {step}: loss {loss:.4f}, validation loss "
                          f"{val_loss:.4f} ({rt.metrics['step_ms']:.1f} ms a step)")
        rt.checkpoint(checkpoints)
    state = rt.state_dict()  # every rank takes part
    if rt.rank == 0:
        m = model()
        m.load_state_dict(state)
        m.eval()
        with torch.no_grad():
            x, y = val_set.tensors
            accuracy = (m(x).argmax(1) == y).float().mean().item()
        print(f"trained {step} steps; the nn.Module with the trained parameters: "
              f"validation accuracy {accuracy:.3f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:
        prepare()
    elif not sys.argv[1:]:
        train()
    else:
        sys.exit(__doc__)
