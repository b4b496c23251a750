"""Plot a step's memory, predicted and measured, to a PNG.

    .venv/bin/python python/plot_memory.py -o memory.png \\
        --predicted prefetch.json:BACKWARD_PRE --predicted none.json:NO_PREFETCH \\
        --measured timeline.json:measured

--predicted FILE[:LABEL] is what `fsdp-opt --memory-report-json FILE` writes,
--measured FILE[:LABEL] what `fsdp-run --memory-timeline FILE` writes (rank
0's last step); each may be repeated. Each file's live bytes after every
instruction are drawn as a line, the most bytes during each instruction as a
shaded band above it, and each predicted peak is marked with its op. Needs
matplotlib (in the project's .venv: scripts/setup.sh).
"""

import argparse
import json
import sys


def series(spec):
    path, _, label = spec.partition(":")
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        sys.exit(f"plot_memory: cannot read {path}: {e.strerror}")
    except ValueError:
        data = None
    if not isinstance(data, dict) or any(
            key not in data for key in ("timeline", "instruction_peak", "peak_bytes")):
        sys.exit(f"plot_memory: {path} is not a memory report (fsdp-opt "
                 "--memory-report-json or fsdp-run --memory-timeline)")
    return label or path, data


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, help="the PNG to write")
    p.add_argument("--predicted", action="append", default=[], metavar="FILE[:LABEL]")
    p.add_argument("--measured", action="append", default=[], metavar="FILE[:LABEL]")
    p.add_argument("--title", default="live tensor bytes on one rank during a step")
    args = p.parse_args()
    if not args.predicted and not args.measured:
        p.error("give at least one --predicted or --measured file")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_memory: needs matplotlib (scripts/setup.sh installs it in .venv)")

    fig, ax = plt.subplots(figsize=(10, 4.5))
    mib = float(1 << 20)
    for kind, specs, style in (("predicted", args.predicted, "-"),
                               ("measured", args.measured, "--")):
        for spec in specs:
            label, data = series(spec)
            after = [b / mib for b in data["timeline"]]
            during = [b / mib for b in data["instruction_peak"]]
            xs = range(len(after))
            line, = ax.plot(xs, after, style, linewidth=1.2,
                            label=f"{label} ({kind}, peak {data['peak_bytes'] / mib:.2f} MiB)")
            ax.fill_between(xs, after, during, color=line.get_color(), alpha=0.2, step=None)
            if kind == "predicted" and data.get("peak_instruction", -1) >= 0:
                i = data["peak_instruction"]
                ax.annotate(data.get("peak_op", ""), (i, data["peak_bytes"] / mib),
                            textcoords="offset points", xytext=(4, 6), fontsize=8,
                            color=line.get_color())
    ax.set_xlabel("instruction")
    ax.set_ylabel("MiB")
    ax.set_title(args.title)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"plot_memory: wrote {args.output}")


if __name__ == "__main__":
    main()
