"""What streaming the data costs and saves: fsdp-run training the GPT
fixture at W ranks (CPU, Gloo) on token corpora of growing size, each
rank's peak resident memory beside the corpus's size (shuffled, the
default: it should stay flat), and the median step time on the corpus in
order beside the same batches in a torch.save data file (both read per
step).

    .venv/bin/python bench/data/bench_data.py [--ranks 2] [--steps 20]
        [--sizes-mb 40,400,4000] [--seq-len 16] [--keep DIR]

Prints a markdown table. The corpora are random uint16 tokens written to a
temporary directory (4 GB needs the disk space).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIXTURES = os.path.join(ROOT, "test", "fixtures")
BIN = os.path.join(ROOT, "build", "bin")
PY = sys.executable


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def peak_rss(cmd, env=None):
    """Peak RSS (MiB) of the largest process `cmd` started (in `env`, or
    this one's), as test/fixtures/peak_rss.py measures it."""
    out = tempfile.mktemp()
    run([PY, os.path.join(FIXTURES, "peak_rss.py"), out, "--"] + cmd, env=env)
    with open(out) as f:
        value = float(f.read())
    os.unlink(out)
    return value


def step_ms(metrics):
    with open(metrics) as f:
        lines = [json.loads(line) for line in f]
    times = [j["step_ms"] for j in lines if "step_ms" in j][3:]
    return statistics.median(times), lines[-1].get("data_bytes_read")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sizes-mb", default="40,400,4000")
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--keep")
    a = p.parse_args()
    tmp = a.keep or tempfile.mkdtemp()
    os.makedirs(tmp, exist_ok=True)
    model, plan = os.path.join(tmp, "gpt.pt"), os.path.join(tmp, "gpt.plan")
    run([PY, os.path.join(FIXTURES, "forward_parity.py"), "make", "gpt", model,
         os.path.join(tmp, "unused.data.pt")], stderr=subprocess.DEVNULL)
    run([os.path.join(BIN, "fsdp-opt"), model, "--loss", "cross_entropy",
         "--target", f"y:4x{a.seq_len}xi64", "--optimizer", "adamw",
         "--world-size", str(a.ranks), "--emit", "plan", "-o", plan])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    common = ["--nproc", str(a.ranks), "--steps", str(a.steps), "--threads", "1"]
    rows = []
    for mb in [int(s) for s in a.sizes_mb.split(",")]:
        corpus = os.path.join(tmp, f"train{mb}.bin")
        if not os.path.exists(corpus):
            run([PY, os.path.join(FIXTURES, "token_corpus.py"), "make", corpus,
                 str(mb * 1000 * 1000 // 2), "96", "0"])
        metrics = os.path.join(tmp, f"c{mb}.jsonl")
        rss = peak_rss([os.path.join(BIN, "fsdp-run"), plan, "--model", model,
                        "--data", corpus, "--seq-len", str(a.seq_len),
                        "--token-inputs", "idx,y", "--metrics", metrics] + common)
        # (shuffled, the default: the peak and the bytes read)
        _, read = step_ms(metrics)
        # In order, beside the same batches as a torch.save data file.
        ordered = os.path.join(tmp, f"q{mb}.jsonl")
        run([os.path.join(BIN, "fsdp-run"), plan, "--model", model,
             "--data", corpus, "--seq-len", str(a.seq_len), "--token-inputs",
             "idx,y", "--data-order", "sequential", "--metrics", ordered] + common,
            env=env)
        ms, _ = step_ms(ordered)
        data = os.path.join(tmp, f"c{mb}.data.pt")
        run([PY, os.path.join(FIXTURES, "token_corpus.py"), "expand", corpus,
             str(a.seq_len), str(4 * a.ranks), str(a.steps), "0", "sequential",
             "idx", "y", data])
        saved = os.path.join(tmp, f"s{mb}.jsonl")
        run([os.path.join(BIN, "fsdp-run"), plan, "--model", model, "--data", data,
             "--metrics", saved] + common, env=env)
        ms_saved, _ = step_ms(saved)
        rows.append((mb, rss, read, ms, ms_saved))
        os.unlink(data)
    print(f"GPT fixture, {a.ranks} ranks x 1 thread, batch 4 a rank, "
          f"seq {a.seq_len}, {a.steps} steps (median step after 3)\n")
    print("| corpus | peak RSS a rank (MiB) | data bytes rank 0 read | "
          "step ms, token corpus in order | step ms, same batches in a torch.save file |")
    print("|---:|---:|---:|---:|---:|")
    for mb, rss, read, ms, ms_saved in rows:
        size = f"{mb / 1000:g} GB" if mb >= 1000 else f"{mb} MB"
        print(f"| {size} | {rss:.0f} | {read} | {ms:.2f} | {ms_saved:.2f} |")


if __name__ == "__main__":
    main()
