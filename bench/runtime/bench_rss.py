"""What a CPU rank carries for CUDA: fsdp-run training the GPT fixture on
W local CPU ranks, each rank's resident memory at its start (libraries
loaded, before the plan) and at the end of the run (the largest of the
ranks', `rss_start_bytes`/`rss_end_bytes` in the metrics summary), and
fsdp-opt's peak RSS compiling it; each as built (CUDA's half of torch
loaded only for a GPU run) and with the libraries they linked before
(libtorch, libtorch_cuda, libc10_cuda, NCCL) loaded at start through
LD_PRELOAD, as every process did before fsdp-run loaded its CUDA half on
demand.

    .venv/bin/python bench/runtime/bench_rss.py [--ranks 2] [--steps 10]

Prints a markdown table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data"))

from bench_data import BIN, FIXTURES, PY, peak_rss, run  # noqa: E402


def summary(metrics):
    with open(metrics) as f:
        return [json.loads(line) for line in f if '"summary"' in line][-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seq-len", type=int, default=16)
    a = p.parse_args()
    import torch  # only for where its libraries are
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    nccl = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "nccl",
                        "lib", "libnccl.so.2")
    # What fsdp-run and fsdp-opt linked before (their DT_NEEDED then).
    cuda_lib = " ".join([os.path.join(lib, "libtorch.so"), os.path.join(lib, "libtorch_cuda.so"),
                         os.path.join(lib, "libc10_cuda.so")] + [nccl] * os.path.exists(nccl))
    with tempfile.TemporaryDirectory() as tmp:
        model, plan = os.path.join(tmp, "gpt.pt"), os.path.join(tmp, "gpt.plan")
        corpus = os.path.join(tmp, "train.bin")
        run([PY, os.path.join(FIXTURES, "forward_parity.py"), "make", "gpt", model,
             os.path.join(tmp, "unused.data.pt")], stderr=subprocess.DEVNULL)
        run([PY, os.path.join(FIXTURES, "token_corpus.py"), "make", corpus,
             "100000", "96", "0"])
        compile_cmd = [os.path.join(BIN, "fsdp-opt"), model, "--loss", "cross_entropy",
                       "--target", f"y:4x{a.seq_len}xi64", "--optimizer", "adamw",
                       "--world-size", str(a.ranks), "--emit", "plan", "-o", plan]
        rows = []
        for label, preload in (("CUDA loaded at start (before)", cuda_lib),
                               ("CUDA on demand (now)", None)):
            env = dict(os.environ, OMP_NUM_THREADS="1")
            if preload:
                env["LD_PRELOAD"] = preload
            compile_mib = peak_rss(compile_cmd, env)
            metrics = os.path.join(tmp, "m.jsonl")
            run([os.path.join(BIN, "fsdp-run"), plan, "--model", model, "--data", corpus,
                 "--seq-len", str(a.seq_len), "--token-inputs", "idx,y",
                 "--metrics", metrics, "--nproc", str(a.ranks), "--steps", str(a.steps),
                 "--threads", "1"], env=env)
            s = summary(metrics)
            rows.append((label, s["rss_start_bytes"] / 2**20, s["rss_end_bytes"] / 2**20,
                         compile_mib))
    print(f"GPT fixture, {a.ranks} CPU ranks x 1 thread, AdamW, {a.steps} steps; "
          "RSS of the largest rank\n")
    print("| fsdp-run, fsdp-opt | rank RSS at start (MiB) | rank RSS at end (MiB) | "
          "fsdp-opt peak RSS (MiB) |")
    print("|---|---:|---:|---:|")
    for label, start, end, comp in rows:
        print(f"| {label} | {start:.0f} | {end:.0f} | {comp:.0f} |")


if __name__ == "__main__":
    main()
