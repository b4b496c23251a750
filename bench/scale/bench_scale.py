"""Step time and per-rank memory of fsdp-run beside PyTorch DDP at 1, 2, 4 ranks, CPU.

    /usr/bin/python3 bench/scale/bench_scale.py [--steps 20] [--warmup 3] [--ranks 1,2,4]
        [--sharding FULL_SHARD,OSS,SHARDED_DDP] [--schedules BACKWARD_PRE] [--threads 1] [--batch 8] [--d-model 128] [--n-layer 4] [--n-head 4]
        [--max-len 64] [--vocab 512]

Writes --steps random global batches and, for each rank count W: exports
the GPT fixture (traced, its input specs one rank's batch, --batch / W),
compiles its training step with fsdp-opt (AdamW, cross-entropy, each
strategy of --sharding, one FSDP unit per GPTBlock, each schedule of
--schedules: NO_PREFETCH, BACKWARD_PRE or BACKWARD_POST, +FORWARD for
--forward-prefetch, +NOLIMIT for --limit-all-gathers 0, +R0 / +R1 for
--limit-reductions 0 / 1, +AC for --activation-checkpointing of every
block, +BF16 for --mixed-precision bf16, +OFFLOAD for --offload-params),
runs it with
`fsdp-run --nproc W`, and runs the
same steps with W PyTorch DDP processes over Gloo (the original nn.Module
with the exported weights). Rank r takes the r-th contiguous slice of each
global batch in both; every rank uses --threads threads.

Step times are medians over the steps after the warm-up ones, on rank 0
(fsdp-run's --metrics step_ms; DDP's timed after a barrier), and so is the
time rank 0 was blocked waiting for collectives (comm_wait_ms). Memory columns:
fsdp-run's sharded state, fsdp-opt's predicted peak (--memory-report-json)
beside the measured peak live bytes (the largest over ranks and steps, its
--metrics summary) and whether they are equal, what ATen's allocator handed
out (allocator_peak_bytes: kernels' own workspaces included), and
for DDP the bytes of parameters + gradients + optimizer state that every rank
holds in full (not a measured peak: activations and DDP's gradient buckets
come on top). Prints a markdown table with the ratio fsdp-run / DDP, and a
warning where the two sides' per-step losses (mean over ranks) differ.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import fsdp_export  # noqa: E402
import models  # noqa: E402
import train_parity  # noqa: E402

FIXTURE = "gpt"
WRAP_CLASS = "GPTBlock"  # the FSDP unit: models.GPT's transformer block
INPUT = "idx"
TARGET = train_parity.TARGET
# fsdp-run's per-step loss (mean over ranks) must match DDP's to this, relative.
LOSS_TOLERANCE = 1e-4
OPTIM = argparse.Namespace(optimizer="adamw", lr=1e-3, beta1=0.9, beta2=0.999,
                           eps=1e-8, weight_decay=None, amsgrad=False, maximize=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def state_bytes(module, opt):
    """Bytes of parameters, their gradients and the optimizer state."""
    params = train_parity.unique_parameters(module)
    total = sum(p.numel() * p.element_size() for p in params)
    total += sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    for state in opt.state.values():
        total += sum(t.numel() * t.element_size() for t in state.values()
                     if torch.is_tensor(t))
    return total


def ddp_worker(rank, world, port, model_path, data_path, kw, args, out_dir):
    """One DDP rank: trains on its slice of every global batch, rank 0 reports."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    module, _ = models.build(FIXTURE, batch=args.batch, **kw)
    saved = torch.jit.load(model_path)
    # Bytes of the parameters and buffers (a tied weight once).
    unique = {t.data_ptr(): t for t in saved.state_dict().values()}
    loaded = sum(t.numel() * t.element_size() for t in unique.values())
    module.load_state_dict(saved.state_dict(), strict=False)
    module.train()
    # Gloo cannot broadcast bool tensors: leave the (constant, identical on
    # every rank) causal-mask buffers out of DDP's buffer syncs.
    DDP._set_params_and_buffers_to_ignore_for_model(
        module, [n for n, b in module.named_buffers() if b.dtype == torch.bool])
    ddp = DDP(module)
    opt = train_parity.optimizer_for(train_parity.unique_parameters(module), OPTIM)
    data = torch.load(data_path)
    times, losses = [], []
    for step in range(args.steps):
        idx = data[INPUT][step].chunk(world)[rank]
        target = data[TARGET][step].chunk(world)[rank]
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        loss = train_parity.loss_of(ddp(idx), target, "cross_entropy")
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
        total = loss.detach().clone()  # untimed: the mean loss, for the check
        dist.all_reduce(total)
        losses.append(float(total) / world)
    if rank == 0:
        with open(os.path.join(out_dir, f"ddp{world}.json"), "w") as f:
            json.dump({"step_ms": statistics.median(times[args.warmup:]),
                       "state_bytes": state_bytes(module, opt), "loaded_bytes": loaded,
                       "losses": losses}, f)
    dist.destroy_process_group()


def run_ddp(world, model_path, data_path, kw, args, tmp):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(ddp_worker, nprocs=world,
             args=(world, free_port(), model_path, data_path, kw, args, tmp))
    with open(os.path.join(tmp, f"ddp{world}.json")) as f:
        return json.load(f)


def schedule_flags(schedule):
    """fsdp-opt's flags for a schedule name such as BACKWARD_PRE+FORWARD."""
    prefetch, *extra = schedule.split("+")
    flags = ["--backward-prefetch", prefetch]
    for e in extra:
        flags += {"FORWARD": ["--forward-prefetch"], "NOLIMIT": ["--limit-all-gathers", "0"],
                  "R0": ["--limit-reductions", "0"], "R1": ["--limit-reductions", "1"],
                  "AC": ["--activation-checkpointing"],
                  "BF16": ["--mixed-precision", "bf16"],
                  "OFFLOAD": ["--offload-params"]}[e]
    return flags


def run_fsdp(world, sharding, schedule, model_path, data_path, args, tmp):
    """fsdp-opt + fsdp-run at `world` ranks: median step ms, sharded state
    bytes and peak bytes (None where the metrics lack them), per-step losses."""
    plan = os.path.join(tmp, f"gpt{world}.{sharding}.{schedule}.plan")
    metrics = os.path.join(tmp, f"gpt{world}.{sharding}.{schedule}.jsonl")
    compile_cmd = [os.path.join(args.bin, "fsdp-opt"), model_path, "--loss", "cross_entropy",
                   "--optimizer", OPTIM.optimizer, "--lr", str(OPTIM.lr),
                   "--world-size", str(world), "--sharding", sharding,
                   "--auto-wrap", "class", "--wrap-class", WRAP_CLASS,
                   *schedule_flags(schedule)]
    run_cmd = [os.path.join(args.bin, "fsdp-run"), plan, "--model", model_path,
               "--data", data_path, "--steps", str(args.steps), "--metrics", metrics,
               "--threads", str(args.threads), "--nproc", str(world)]
    memory = os.path.join(tmp, f"gpt{world}.{sharding}.{schedule}.memory.json")
    subprocess.run(compile_cmd + ["--emit", "plan", "-o", plan,
                                  "--memory-report-json", memory], check=True)
    with open(memory) as f:
        report = json.load(f)
    predicted = report["peak_bytes"]
    predicted_host = report.get("host_peak_bytes", 0)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    subprocess.run(run_cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    steps = [m for m in lines if not m.get("summary")]
    summary = next((m for m in lines if m.get("summary")), {})
    peak = summary.get("peak_bytes")
    if peak is None and all("peak_bytes" in m for m in steps):
        peak = max(m["peak_bytes"] for m in steps)
    timed = steps[args.warmup:]
    wait = (statistics.median(m["comm_wait_ms"] for m in timed)
            if all("comm_wait_ms" in m for m in timed) else None)
    return {"step_ms": statistics.median(m["step_ms"] for m in timed), "wait_ms": wait,
            "sharded_bytes": summary.get("sharded_state_bytes"), "peak_bytes": peak,
            "predicted_bytes": predicted,
            "predicted_host_bytes": predicted_host,
            "host_bytes": summary.get("host_peak_bytes", 0),
            "allocator_bytes": summary.get("allocator_peak_bytes"),
            "read_bytes": summary.get("model_bytes_read"),
            "losses": [m["loss"] for m in steps]}


def loss_mismatch(ours, ddp):
    """The first step whose losses differ, as a message, or None."""
    if len(ours) != len(ddp):
        return f"{len(ours)} steps in fsdp-run's metrics, {len(ddp)} in DDP"
    for step, (a, b) in enumerate(zip(ours, ddp)):
        if abs(a - b) > LOSS_TOLERANCE * max(abs(b), 1e-6):
            return f"loss at step {step + 1} is {a} in fsdp-run, {b} in DDP"
    return None


def export(kw, batch, path):
    """Saves the GPT fixture as TorchScript with input and target specs of
    `batch` (a rank's batch); models.build seeds, so every batch size gets the
    same weights."""
    module, inputs = models.build(FIXTURE, batch=batch, **kw)
    module.train()
    with torch.no_grad():
        out = module(*inputs.values())
    target = train_parity.target_for(out, "cross_entropy", torch.Generator().manual_seed(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        fsdp_export.save(module, path, inputs, targets={TARGET: target})
    return path


def write_data(args, path):
    """--steps random global batches of tokens and next-token targets."""
    gen = torch.Generator().manual_seed(1)
    shape = (args.steps, args.batch, args.max_len)
    torch.save({INPUT: torch.randint(0, args.vocab, shape, generator=gen),
                TARGET: torch.randint(0, args.vocab, shape, generator=gen)}, path)
    return path


def add_model_args(p):
    """The GPT's size, the threads per rank, and where the binaries are."""
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--batch", type=int, default=8, help="global batch")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))


def mib(n):
    return "n/a" if n is None else f"{n / 2**20:.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--ranks", default="1,2,4", help="rank counts, comma-separated")
    p.add_argument("--sharding", default="FULL_SHARD,OSS,SHARDED_DDP",
                   help="fsdp-run's strategies, comma-separated")
    p.add_argument("--schedules", default="BACKWARD_PRE",
                   help="all-gather schedules, comma-separated (e.g. NO_PREFETCH,"
                   "BACKWARD_PRE+FORWARD)")
    add_model_args(p)
    args = p.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    for w in ranks:
        if w < 1 or args.batch % w:
            p.error(f"--batch {args.batch} does not divide into {w} ranks")
    if args.steps <= args.warmup:
        p.error("--steps must exceed --warmup")
    for tool in ("fsdp-opt", "fsdp-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit(f"{os.path.join(args.bin, tool)} not found: build the project first "
                     "(or pass --bin)")
    kw = {"d_model": args.d_model, "n_layer": args.n_layer, "n_head": args.n_head,
          "max_len": args.max_len, "vocab": args.vocab}

    with tempfile.TemporaryDirectory() as tmp:
        data_path = write_data(args, os.path.join(tmp, "gpt.data.pt"))
        print(f"gpt {kw}, global batch {args.batch}, AdamW, {args.threads} thread(s) per rank "
              f"on {os.cpu_count()} cores, median of steps {args.warmup + 1}-{args.steps} "
              "on rank 0")
        print("\n| ranks | strategy | schedule | fsdp-run step ms | fsdp-run comm wait ms | "
              "DDP step ms | ratio | fsdp-run "
              "sharded state MiB/rank | fsdp-opt predicted peak MiB/rank | fsdp-run peak "
              "MiB/rank | predicted = measured | fsdp-run allocator peak MiB/rank | "
              "DDP params+grads+optim "
              "MiB/rank | fsdp-run model MiB read/rank | DDP model MiB loaded/rank |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
        notes = []
        for w in ranks:
            # fsdp-opt's input specs are one rank's batch; the data holds all ranks'.
            model_path = export(kw, args.batch // w, os.path.join(tmp, f"gpt{w}.pt"))
            ddp = run_ddp(w, model_path, data_path, kw, args, tmp)
            for sharding, schedule in [(s, c) for s in args.sharding.split(",")
                                       for c in args.schedules.split(",")]:
                ours = {}
                try:
                    ours = run_fsdp(w, sharding, schedule, model_path, data_path, args, tmp)
                except subprocess.CalledProcessError as e:
                    notes.append(f"{w} ranks, {sharding}: {os.path.basename(e.cmd[0])} "
                                 f"exited {e.returncode}")
                # Both sides must train the same thing for their times to compare.
                mismatch = ours and loss_mismatch(ours["losses"], ddp["losses"])
                if mismatch:
                    notes.append(f"{w} ranks, {sharding}: {mismatch}")
                ms = "n/a" if not ours else f"{ours['step_ms']:.2f}"
                ratio = "n/a" if not ours else f"{ours['step_ms'] / ddp['step_ms']:.2f}"
                wait = "n/a" if not ours or ours["wait_ms"] is None else f"{ours['wait_ms']:.2f}"
                print(f"| {w} | {sharding} | {schedule} | {ms} | {wait} | {ddp['step_ms']:.2f} | {ratio} | "
                      f"{mib(ours.get('sharded_bytes'))} | {mib(ours.get('predicted_bytes'))} | "
                      f"{mib(ours.get('peak_bytes'))} | "
                      f"{'yes' if ours and ours['predicted_bytes'] == ours['peak_bytes'] else 'no'} | "
                      f"{mib(ours.get('allocator_bytes'))} | "
                      f"{mib(ddp['state_bytes'])} | {mib(ours.get('read_bytes'))} | "
                      f"{mib(ddp['loaded_bytes'])} |", flush=True)
    for note in notes:
        print(f"\nWARNING: {note}")


if __name__ == "__main__":
    main()
