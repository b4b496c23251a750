"""Draws the main job's training and validation loss against the step and
checks that the model learned something.

    plot.py METRICS.jsonl CORPUS.json OUT.png [--svg OUT.svg] [--below F]

METRICS is fsdp-run's --metrics (each step's `loss`, each evaluation's
`eval_loss` after its `step`), CORPUS prepare.py's corpus.json (the
unigram baseline). Prints the first and last validation loss against the
baseline and exits 1 unless the last is below F (0.8) times the baseline
(a model that learned only byte frequencies reaches the baseline itself).
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics")
    p.add_argument("corpus")
    p.add_argument("png")
    p.add_argument("--svg")
    p.add_argument("--below", type=float, default=0.8,
                   help="the fraction of the baseline the last validation loss must be under")
    args = p.parse_args()
    with open(args.metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    with open(args.corpus) as f:
        corpus = json.load(f)
    train = [(x["step"] + 1, x["loss"]) for x in lines
             if "loss" in x and not x.get("summary")]
    evals = [(x["step"] + 1, x["eval_loss"]) for x in lines
             if "eval_loss" in x and not x.get("summary")]
    if not train or not evals:
        raise SystemExit("plot.py: the metrics hold no training or no evaluation loss")
    baseline = corpus["unigram_baseline_nats"]
    # A running mean over 20 steps shows the trend under the batches' noise.
    smooth, window = [], []
    for _, loss in train:
        window = (window + [loss])[-20:]
        smooth.append(sum(window) / len(window))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([s for s, _ in train], [l for _, l in train], color="tab:blue", alpha=0.25,
            linewidth=0.8)
    ax.plot([s for s, _ in train], smooth, color="tab:blue",
            label="training loss (20-step mean)")
    ax.plot([s for s, _ in evals], [l for _, l in evals], "o-", color="tab:orange",
            label="validation loss")
    ax.axhline(baseline, color="gray", linestyle="--",
               label=f"unigram baseline ({baseline:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    tokens = corpus["tokens"]
    ax.set_title(f"byte-level GPT on Python's standard library "
                 f"({tokens['train'] / 1e6:.0f}M training bytes)", fontsize=10)
    ax.set_ylim(0, max(baseline * 1.6, min(max(l for _, l in train), 7)))
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    if args.svg:
        fig.savefig(args.svg, metadata={"Date": None})
    first, last = evals[0], evals[-1]
    print(f"validation loss {last[1]:.3f} nats/byte after step {last[0]} "
          f"(first evaluation, after step {first[0]}: {first[1]:.3f}); unigram "
          f"baseline {baseline:.3f}: {100 * (1 - last[1] / baseline):.0f}% below it; "
          f"plot {args.png}")
    if not last[1] < args.below * baseline:
        print("plot.py: the validation loss did not fall well below the unigram baseline")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
