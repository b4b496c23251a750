"""GPT-2-shaped training on one GPU: fsdp-run (with and without --cuda-graph)
beside eager PyTorch and FSDP2's fully_shard at world size 1.

    bench_gpu.py plans DIR [--sizes small,medium] [--batch 8] [--seq 1024] [--backend nccl]
        (where fsdp-opt is: the plans, compiled from weightless skeletons)
    bench_gpu.py run DIR [--fsdp-run BIN] [--steps 20] [--warmup 5] [--timeout S]
        (on the GPU machine: the models with weights, the runs, the table;
        scripts/gpu-check.sh runs 10 steps after 3 of warm-up)

The model is test/fixtures/models.py's GPT (token and learned position
embeddings, pre-LN causal blocks with GELU MLPs, tied LM head) at GPT-2's
shapes: small (12 layers, d_model 768, 12 heads, 124M parameters) and
medium (24, 1024, 16: 350M), vocabulary 50257, sequence --seq. A plan
depends on shapes only, so `plans` compiles it from the skeleton
(fsdp_export.save(weights=False): a few kB that travel, where the weights
would not), and `run` builds the same module with weights from the same
code and seed on the GPU machine.

Every side trains with AdamW (lr 3e-4), cross-entropy, bf16 mixed
precision (bf16 compute, fp32 parameters and optimizer state, gradients
reduced in fp32):
  fsdp-run     fsdp-opt --mixed-precision bf16, one FSDP unit per GPTBlock;
  eager        the nn.Module on the GPU under torch.autocast(bfloat16);
  FSDP2        fully_shard on each GPTBlock and the root, on a one-rank
               NCCL mesh, MixedPrecisionPolicy(param_dtype=bf16,
               reduce_dtype=fp32).
Step time: the median over the steps after --warmup, each timed between
device synchronisations. Tokens/s: batch x seq / step time. MFU: model
FLOPs per token (6 N + 12 L d T, PaLM's count with attention) x tokens/s
over 989 TFLOP/s (H100 SXM, dense bf16). Peak memory: the caching
allocator's peak (torch.cuda.max_memory_allocated; fsdp-run's
allocator_peak_bytes), with fsdp-run's predicted and measured live peak.
Prints a markdown table.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fsdp_export  # noqa: E402
import models  # noqa: E402

SIZES = {"small": dict(n_layer=12, d_model=768, n_head=12),
         "medium": dict(n_layer=24, d_model=1024, n_head=16),
         # A smoke test of this script (CPU: run --device cpu).
         "tiny": dict(n_layer=2, d_model=64, n_head=4)}
VOCAB = 50257
PEAK_FLOPS = 989e12


def config(size, seq):
    return dict(SIZES[size], vocab=VOCAB, max_len=seq)


def build(size, seq, batch):
    module, inputs = models.build("gpt", batch=batch, **config(size, seq))
    return module, inputs


def plans(args):
    os.makedirs(args.dir, exist_ok=True)
    described = {"batch": args.batch, "seq": args.seq, "sizes": {}}
    for size in args.sizes.split(","):
        with fsdp_export.empty_init():
            module, inputs = build(size, args.seq, args.batch)
        target = torch.zeros(args.batch, args.seq, dtype=torch.long)
        skeleton = os.path.join(args.dir, f"{size}.skeleton.pt")
        fsdp_export.save(module, skeleton, inputs, targets={"target": target},
                         weights=False)
        plan = os.path.join(args.dir, f"{size}.plan")
        memory = os.path.join(args.dir, f"{size}.memory.json")
        cmd = [args.fsdp_opt, skeleton, "--loss", "cross_entropy", "--optimizer", "adamw",
               "--lr", "3e-4", "--mixed-precision", "bf16", "--auto-wrap", "class",
               "--wrap-class", "GPTBlock", "--world-size", "1", "--backend", args.backend,
               "--emit", "plan", "-o", plan,
               "--memory-report-json", memory]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench_gpu: {' '.join(cmd)}:\n{done.stderr}")
        os.remove(skeleton)
        described["sizes"][size] = {"plan": os.path.basename(plan),
                                    "memory": os.path.basename(memory)}
        print(f"{size}: {plan} ({os.path.getsize(plan) / 1e3:.0f} kB)")
    with open(os.path.join(args.dir, "bench.json"), "w") as f:
        json.dump(described, f, indent=1)


def flops_per_token(module, size, seq):
    params = sum(p.numel() for p in module.parameters())
    c = SIZES[size]
    return 6 * params + 12 * c["n_layer"] * c["d_model"] * seq, params


def timed_steps(step, steps, device):
    times = []
    for _ in range(steps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def peak_memory(device):
    return torch.cuda.max_memory_allocated() if device.type == "cuda" else None


def train(module, data, args, device, autocast):
    """--steps AdamW steps of `module` (on `device` already), cycling
    through the batches: each step's times and the allocator's peak."""
    opt = torch.optim.AdamW(module.parameters(), lr=3e-4)
    batches = data["idx"].shape[0]

    def step(i=[0]):
        k = i[0] % batches
        i[0] += 1
        idx, target = data["idx"][k].to(device), data["target"][k].to(device)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            out = module(idx)
        loss = F.cross_entropy(out.float().reshape(-1, out.shape[-1]), target.reshape(-1))
        loss.backward()
        opt.step()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    return timed_steps(step, args.steps, device), peak_memory(device)


def train_eager(module, data, args, device):
    return train(module.to(device).train(), data, args, device, autocast=True)


def train_fsdp2(module, data, args, device):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=0, world_size=1)
    try:
        mesh = init_device_mesh(device.type, (1,))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        module = module.to(device).train()
        for block in module.blocks:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(module, mesh=mesh, mp_policy=policy)
        return train(module, data, args, device, autocast=False)
    finally:
        dist.destroy_process_group()


def train_fsdp_run(args, size, described, model_path, data_path, device, graph):
    metrics = os.path.join(args.dir, f"{size}{'.graph' if graph else ''}.jsonl")
    cmd = [args.fsdp_run, os.path.join(args.dir, described["plan"]), "--model", model_path,
           "--data", data_path, "--device", device.type, "--metrics", metrics]
    if graph:
        cmd.append("--cuda-graph")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"bench_gpu: {' '.join(cmd)} did not finish within {args.timeout:g} s",
              file=sys.stderr)
        return None, None, None
    if done.returncode != 0:
        print(f"bench_gpu: {' '.join(cmd)} failed:\n{done.stderr.strip()}", file=sys.stderr)
        return None, None, None
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    steps = [l["step_ms"] for l in lines if "step" in l]
    summary = next(l for l in lines if l.get("summary"))
    return steps, summary["allocator_peak_bytes"], summary["peak_bytes"]


def run(args):
    with open(os.path.join(args.dir, "bench.json")) as f:
        bench = json.load(f)
    device = torch.device(args.device)
    batch, seq = bench["batch"], bench["seq"]
    rows = []
    for size, described in bench["sizes"].items():
        module, _ = build(size, seq, batch)
        fpt, params = flops_per_token(module, size, seq)
        gen = torch.Generator().manual_seed(1)
        steps = args.steps
        data = {"idx": torch.randint(0, VOCAB, (steps, batch, seq), generator=gen),
                "target": torch.randint(0, VOCAB, (steps, batch, seq), generator=gen)}
        model_path = os.path.join(args.dir, f"{size}.pt")
        data_path = os.path.join(args.dir, f"{size}.data.pt")
        # fsdp-run reads the weights only: one sequence traces the module.
        fsdp_export.save(module, model_path, {"idx": data["idx"][0][:1]},
                         targets={"target": data["target"][0][:1]})
        torch.save(data, data_path)
        predicted = json.load(open(os.path.join(args.dir, described["memory"])))["peak_bytes"]
        results = []
        for graph in (False, True) if device.type == "cuda" else (False,):
            times, peak, live = train_fsdp_run(args, size, described, model_path, data_path,
                                               device, graph)
            results.append((f"fsdp-run{' --cuda-graph' if graph else ''}", times, peak,
                            f"{predicted / 2**30:.2f} / {live / 2**30:.2f}" if live else "n/a"))
        fresh = lambda: build(size, seq, batch)[0]  # noqa: E731
        times, peak = train_eager(fresh(), data, args, device)
        results.append(("eager (autocast bf16)", times, peak, "n/a"))
        times, peak = train_fsdp2(fresh(), data, args, device)
        results.append(("FSDP2 fully_shard", times, peak, "n/a"))
        for name, times, peak, live in results:
            if not times:
                rows.append((size, params, name, None, None, None, None, live))
                continue
            ms = statistics.median(times[args.warmup:] or times)
            tokens = batch * seq / (ms / 1e3)
            rows.append((size, params, name, ms, tokens, fpt * tokens / PEAK_FLOPS, peak, live))
    print(f"\nGPT-2 shapes, batch {batch} x seq {seq}, AdamW, bf16 mixed precision, "
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}\n")
    print("| model | params | system | step ms | tokens/s | MFU | peak GiB (allocator) "
          "| fsdp-run live GiB predicted / measured |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for size, params, name, ms, tokens, mfu, peak, live in rows:
        cell = lambda v, f: "failed" if ms is None else "n/a" if v is None else f.format(v)  # noqa: E731
        print(f"| {size} | {params / 1e6:.0f}M | {name} | {cell(ms, '{:.1f}')} | "
              f"{cell(tokens, '{:,.0f}')} | {cell(mfu and 100 * mfu, '{:.1f}%')} | "
              f"{cell(peak and peak / 2**30, '{:.2f}')} | {live} |")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["plans", "run"])
    p.add_argument("dir")
    p.add_argument("--sizes", default="small,medium")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--fsdp-opt", default=os.path.join(ROOT, "build", "bin", "fsdp-opt"))
    p.add_argument("--fsdp-run", default=os.path.join(ROOT, "build-rt", "bin", "fsdp-run"))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl",
                   help="plans: the communicator they are compiled for (gloo: a CPU "
                        "smoke test of this script)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="run: seconds each fsdp-run may take")
    args = p.parse_args()
    plans(args) if args.action == "plans" else run(args)


if __name__ == "__main__":
    main()
