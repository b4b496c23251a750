"""Eager reference of a training-parity run, saved as JSON:

    reference.py NAME MODEL.pt DATA.pt OUT.json --loss LOSS --micro-batches W
        [optimizer flags of train_parity.py]

Loads MODEL.pt with this torch's torch.jit.load (train_parity.reference:
W data-parallel ranks' worth of each step's batch, forwarded with the same
parameters) and writes the per-step losses and the final parameters and
buffers (dtype, shape, values). Runs with torch 1.13 and 2.x: on the GPU
machine it gives the torch 2.x reference of an archive that libtorch 1.13
cannot load.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

import train_parity  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--loss", choices=["cross_entropy", "mse", "none"], required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--micro-batches", type=int, default=1)
    train_parity.add_optimizer_args(p)
    args = p.parse_args()
    losses, module, expected = train_parity.reference(
        args, args.model, args.data, args.micro_batches)
    state = {}
    for n, t in module.state_dict().items():
        t = t.detach()
        state[n] = {"dtype": str(t.dtype).replace("torch.", ""),
                    "shape": list(t.shape),
                    "values": t.double().flatten().tolist() if t.is_floating_point()
                    else t.flatten().tolist()}
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "losses": losses, "state": state,
                   "lr": expected.get("lr"), "grad_norm": expected.get("grad_norm")}, f)
    print(f"reference {args.name}: losses {losses}")


if __name__ == "__main__":
    main()
