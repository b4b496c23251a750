"""What the held-out parity benchmarks (bench/families, bench/audio) share:
running fsdp-opt and fsdp-run, counting a plan's autograd_backward
instructions, and the eager reference's AdamW settings (what they compile
with: lr 0.001, torch.optim's defaults otherwise)."""

import argparse
import json
import os
import subprocess


def run_commands(cmds):
    """Runs each command in turn: None when all succeed, else "TOOL failed:
    LAST LINE OF ITS OUTPUT"."""
    try:
        for cmd in cmds:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        last = (e.stderr or e.stdout).strip().splitlines()
        return f"{os.path.basename(e.cmd[0])} failed: {last[-1] if last else e.returncode}"
    return None


def autograd_instructions(plan):
    """How many of the plan's instructions are autograd_backward."""
    with open(plan) as f:
        return sum(i["kind"] == "autograd_backward" for i in json.load(f)["instructions"])


def adamw_reference(steps, loss, seed=None, mixed_precision=None):
    """train_parity.reference's settings for the compiled AdamW step."""
    return argparse.Namespace(
        optimizer="adamw", lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8,
        weight_decay=None, amsgrad=False, maximize=False, lr_schedule=None,
        warmup_steps=0, total_steps=0, max_grad_norm=None, steps=steps,
        loss=loss, grad_accum=1, seed=seed, mixed_precision=mixed_precision)
