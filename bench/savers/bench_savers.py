"""The memory savers on the GPT benchmark: each alone and together, beside
none, with fsdp-run at W ranks (CPU, Gloo).

    .venv/bin/python bench/savers/bench_savers.py [--ranks 2] [--steps 12] [--warmup 3]
        [--sharding FULL_SHARD] [--threads 1] [--batch 8] [--d-model 128] [--n-layer 4]
        [--n-head 4] [--max-len 64] [--vocab 512]

The model, data and compilation are bench/scale's (its GPT, one FSDP unit
per block, AdamW, BACKWARD_PRE); the savers are fsdp-opt's flags:
activation checkpointing (--activation-checkpointing: every block) and
mixed precision (--mixed-precision bf16: parameters gathered and computed
in bf16, gradients reduced in bf16, fp32 master shards and optimizer
state) and CPU offload (--offload-params: shards, gradient shards and
optimizer state in host memory, the optimizer on the host). For each: the
median step time on rank 0 after the warm-up steps, the predicted peak
device bytes per rank (fsdp-opt --memory-report-json) beside the measured
one (fsdp-run --metrics: the largest over ranks and steps) and whether they
are equal, the predicted and measured host peak, what ATen's allocator
handed out (fsdp-run's allocator_peak_bytes; on this CPU runtime the
allocator cannot tell host memory from device memory), the bytes one
rank's all-gathers receive per step (from the plan), and the last step's
loss; beside them PyTorch DDP over Gloo on the same batches (fp32, the
original nn.Module: its step time, and the bytes of parameters, gradients
and optimizer state every rank holds). Prints a markdown table.
"""

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scale"))

import bench_scale  # noqa: E402

SAVERS = [("none", "BACKWARD_PRE"),
          ("activation checkpointing", "BACKWARD_PRE+AC"),
          ("bf16 mixed precision", "BACKWARD_PRE+BF16"),
          ("CPU offload", "BACKWARD_PRE+OFFLOAD"),
          ("all three", "BACKWARD_PRE+AC+BF16+OFFLOAD")]
BYTES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2}


def gathered_bytes(plan_path):
    """Bytes a rank receives from its all-gathers in one step: each gather's
    waited buffer (the wait of an all_gather start), by its shape and dtype."""
    with open(plan_path) as f:
        plan = json.load(f)
    # Slots are reused: what a future slot holds is its latest start's.
    started = {}
    total = 0
    for i in plan["instructions"]:
        if i["kind"] in ("all_gather", "reduce_scatter", "all_reduce"):
            started[i["result"]] = i["kind"]
        if i["kind"] == "wait" and started.get(i["future"]) == "all_gather":
            n = 1
            for d in i["shape"]:
                n *= d
            total += n * BYTES[i["dtype"]]
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--sharding", default="FULL_SHARD")
    bench_scale.add_model_args(p)
    args = p.parse_args()
    w = args.ranks
    if args.batch % w:
        sys.exit(f"--batch {args.batch} does not divide into {w} ranks")
    kw = dict(vocab=args.vocab, d_model=args.d_model, n_head=args.n_head,
              n_layer=args.n_layer, max_len=args.max_len)
    with tempfile.TemporaryDirectory() as tmp:
        data = bench_scale.write_data(args, os.path.join(tmp, "data.pt"))
        model = bench_scale.export(kw, args.batch // w, os.path.join(tmp, f"gpt{w}.pt"))
        rows = []
        for name, schedule in SAVERS:
            r = bench_scale.run_fsdp(w, args.sharding, schedule, model, data, args, tmp)
            plan = os.path.join(tmp, f"gpt{w}.{args.sharding}.{schedule}.plan")
            rows.append((name, r, gathered_bytes(plan)))
        ddp = bench_scale.run_ddp(w, model, data, kw, args, tmp)
    print(f"GPT d_model {args.d_model}, {args.n_layer} layers, sequence {args.max_len}, "
          f"global batch {args.batch}, {args.sharding} on {w} ranks, {args.threads} "
          f"thread(s) per rank, AdamW; medians of steps {args.warmup + 1}-{args.steps}")
    print()
    print("| saver | step (ms) | device peak per rank, predicted (MiB) | measured (MiB) "
          "| host peak, predicted (MiB) | measured (MiB) | equal "
          "| allocator peak (MiB) | all-gathered per step (MiB) | last loss |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for name, r, gathered in rows:
        equal = (r['predicted_bytes'] == r['peak_bytes']
                 and r['predicted_host_bytes'] == r['host_bytes'])
        print(f"| {name} | {r['step_ms']:.1f} | {bench_scale.mib(r['predicted_bytes'])} "
              f"| {bench_scale.mib(r['peak_bytes'])} "
              f"| {bench_scale.mib(r['predicted_host_bytes'])} "
              f"| {bench_scale.mib(r['host_bytes'])} | {'yes' if equal else 'NO'} "
              f"| {bench_scale.mib(r['allocator_bytes'])} | {bench_scale.mib(gathered)} "
              f"| {r['losses'][-1]:.4f} |")
    print(f"| PyTorch DDP (fp32, no saver; parameters + gradients + optimizer state, "
          f"not a peak) | {ddp['step_ms']:.1f} | | {bench_scale.mib(ddp['state_bytes'])} "
          f"| | | | | | {ddp['losses'][-1]:.4f} |")


if __name__ == "__main__":
    main()
