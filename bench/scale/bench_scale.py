"""Step time and per-rank memory of fsdp-run beside PyTorch DDP, FSDP2 and FSDP1 at
1, 2, 4 ranks, CPU.

    .venv/bin/python bench/scale/bench_scale.py [--steps 20] [--warmup 3] [--ranks 1,2,4]
        [--sharding FULL_SHARD,OSS,SHARDED_DDP] [--schedules BACKWARD_PRE]
        [--references ddp,fsdp2,fsdp1] [--threads 1] [--batch 8] [--d-model 128] [--n-layer 4]
        [--n-head 4] [--max-len 64] [--vocab 512] [--model gpt|resnet18 [--image 64]
        [--classes 10]]

Writes --steps random global batches and, for each rank count W: exports
the GPT fixture (traced, its input specs one rank's batch, --batch / W),
compiles its training step with fsdp-opt (AdamW, cross-entropy, each
strategy of --sharding, one FSDP unit per GPTBlock, each schedule of
--schedules: NO_PREFETCH, BACKWARD_PRE or BACKWARD_POST, +FORWARD for
--forward-prefetch, +NOLIMIT for --limit-all-gathers 0, +R0 / +R1 / +R2
for --limit-reductions 0 / 1 / 2, +AC for --activation-checkpointing of every
block, +BF16 for --mixed-precision bf16, +OFFLOAD for --offload-params),
runs it with `fsdp-run --nproc W`, and trains the same steps with W PyTorch
processes over Gloo for each reference of --references (the original
nn.Module with the exported weights, the same AdamW):

  ddp    DistributedDataParallel;
  fsdp2  fully_shard on each GPTBlock, then on the root, on
         init_device_mesh("cpu", (W,)), reshard_after_forward=True (FULL_SHARD);
  fsdp1  FullyShardedDataParallel(device_id=cpu, FULL_SHARD,
         ModuleWrapPolicy({GPTBlock}), use_orig_params=True), its default
         BACKWARD_PRE.

Rank r takes the r-th contiguous slice of each global batch on every side;
every rank uses --threads threads.

Step times are medians over the steps after the warm-up ones, on rank 0
(fsdp-run's --metrics step_ms; the references' forward, backward and
optimizer step timed after a barrier, the optimizer's zero_grad
(set_to_none) before it, untimed: fsdp-run holds no gradients between
steps). So is comm wait: the time rank 0 was blocked waiting for
collectives (fsdp-run's comm_wait_ms; for FSDP2 and FSDP1 the time rank 0's
main thread spent in c10d Work.wait(), which their Python code calls for
every collective: on a CPU both issue them synchronously, so that is each
collective's whole run). DDP's is n/a: its reducer waits for its
all-reduces in C++, where Python cannot time them.

Memory columns: the sharded state (fsdp-run's: parameters, reduced
gradients and optimizer state a rank holds; the references': the same
counted from their tensors after the last step, a rank's local shards for
FSDP2 / FSDP1, everything for DDP), fsdp-opt's predicted peak
(--memory-report-json) beside fsdp-run's measured peak live bytes (the
largest over ranks and steps, its --metrics summary) and whether they are
equal (n/a for the references: PyTorch has no count of live tensor
storages to set beside them), and the allocator peak: what ATen's CPU
allocator had handed out at the step's peak, the largest over ranks
(fsdp-run's allocator_peak_bytes: the state and batch the step begins with
plus the most the allocator handed out beyond what it had at the step's
start), with fsdp-opt's prediction of it before (--measure-workspaces at
--threads: kernels' workspaces measured by running each distinct call
once). The references' is measured with torch.profiler
(profile_memory=True), running from before the model is built through
the first min(--warmup, 2) steps (warm-up steps, left out of the medians),
with c10's FLAGS_caffe2_report_cpu_memory_usage set meanwhile (through
ctypes on libc10) so that the CPU allocator's running total, which the
profiler's allocation events carry, also loses the blocks that threads
without the profiler's state free (Gloo's workers drop a collective's
tensors); its largest value during those steps, the largest over ranks.
That total counts every block allocated since the profiler started: the
parameters, optimizer state and batch the step starts with, as fsdp-run's
does, and also whatever else the reference keeps between steps (DDP's
gradient buckets, FSDP1's sharded flat gradients), not the data or the
loaded TorchScript module, read before the profiler starts. n/a with --warmup 0
(or a torch whose libc10 lacks the flag). Model MiB read: what rank 0 read
of the model file's tensor values (fsdp-run: its shard and the buffers;
every reference rank loads the whole model).

Prints a markdown table, a row per reference and per (strategy, schedule)
at each W, with each fsdp-run step time's ratio to each reference's, and a
warning where fsdp-run's per-step losses (mean over ranks) differ from a
reference's.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
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
from launch import free_port  # noqa: E402
import models  # noqa: E402
import train_parity  # noqa: E402

FIXTURE = "gpt"
WRAP_CLASS = "GPTBlock"  # the FSDP unit: models.GPT's transformer block
INPUT = "idx"
# --model resnet18: torchvision's, its BasicBlock the FSDP unit, input x.
RESNET_UNIT, RESNET_INPUT = "BasicBlock", "x"
TARGET = train_parity.TARGET
# fsdp-run's per-step loss (mean over ranks) must match each reference's to
# this, relative.
LOSS_TOLERANCE = 1e-4
OPTIM = argparse.Namespace(optimizer="adamw", lr=1e-3, beta1=0.9, beta2=0.999,
                           eps=1e-8, weight_decay=None, amsgrad=False, maximize=False)
# The PyTorch references: name in the table, strategy, schedule.
REFERENCES = {"ddp": ("PyTorch DDP", "replicated", "n/a"),
              "fsdp2": ("PyTorch FSDP2", "FULL_SHARD", "default"),
              "fsdp1": ("PyTorch FSDP1", "FULL_SHARD", "BACKWARD_PRE")}
# The references' allocator peak is taken over the first steps up to this many
# (warm-up steps only), under torch.profiler.
MEMORY_STEPS = 2
STEP_MARK = "bench_scale.step"  # the profiler's range around a step



def local(t):
    """A rank's own part of a tensor: its local shard for an FSDP2 DTensor."""
    from torch.distributed.tensor import DTensor
    return t.to_local() if isinstance(t, DTensor) else t


def state_bytes(params, opt):
    """Bytes of parameters, their gradients and the optimizer state that this
    rank holds (its local shards for FSDP2; FSDP1's use_orig_params
    parameters are already views of its shard)."""
    def size(t):
        t = local(t)
        return t.numel() * t.element_size()
    total = sum(size(p) for p in params)
    total += sum(size(p.grad) for p in params if p.grad is not None)
    for state in opt.state.values():
        total += sum(size(t) for t in state.values() if torch.is_tensor(t))
    return total


# Milliseconds rank 0's main thread spent in c10d Work.wait() since the last
# reset (see time_waits).
WAITED = [0.0]


def time_waits():
    """Times every c10d Work.wait() called from Python on this thread.
    FSDP2 and FSDP1 call it for each of their collectives (dist.all_gather_
    into_tensor and dist.reduce_scatter_tensor wait for their work unless
    async_op); DDP's reducer waits in C++, unseen here."""
    work = dist.distributed_c10d.Work
    if getattr(work.wait, "bench_timed", False):
        return
    inner, thread = work.wait, threading.get_ident()

    def wait(self, *args, **kwargs):
        if threading.get_ident() != thread:
            return inner(self, *args, **kwargs)
        start = time.perf_counter()
        try:
            return inner(self, *args, **kwargs)
        finally:
            WAITED[0] += (time.perf_counter() - start) * 1e3
    wait.bench_timed = True
    work.wait = wait


def cpu_memory_accounting():
    """c10's flag (a bool in libc10) that makes ATen's CPU allocator keep its
    running total of allocated bytes over every thread, or None where this
    torch does not export it. Without it the total the profiler reports
    misses blocks that a thread with no profiler state frees (Gloo's worker
    threads drop their last reference to a collective's tensors after it
    completes), and only grows."""
    import ctypes
    try:
        c10 = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
        return ctypes.c_bool.in_dll(c10, "FLAGS_caffe2_report_cpu_memory_usage")
    except (OSError, ValueError):
        return None


def allocator_peak(prof):
    """The most bytes ATen's CPU allocator had handed out during the profiled
    steps (its total at each allocation and free the profiler recorded),
    counting the blocks allocated since the profiler started."""
    from torch._C._profiler import _EventType
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        events.append(e)
        stack.extend(e.children)
    steps = [(e.start_time_ns, e.end_time_ns) for e in events if e.name == STEP_MARK]
    memory = sorted(((e.start_time_ns, e.typed[1].alloc_size, e.typed[1].total_allocated)
                     for e in events if e.typed[0] == _EventType.Allocation
                     and e.typed[1].device.type == "cpu"), key=lambda m: m[0])
    peak = None
    for start, end in steps:
        during = [m for m in memory if start <= m[0] <= end]
        if during:
            # What the step starts with (the total before its first event),
            # then the total after each event.
            peak = max(peak or 0, during[0][2] - during[0][1], *(m[2] for m in during))
    return peak


def is_resnet(kw):
    return kw.get("model") == "resnet18"


def build(kw, batch):
    """The module and example inputs of one rank's `batch`: the GPT fixture
    (kw: its sizes), or torchvision's ResNet-18 (kw: model, classes, image);
    seeded, so every batch size gets the same weights."""
    if is_resnet(kw):
        import torchvision
        torch.manual_seed(0)
        module = torchvision.models.resnet18(num_classes=kw["classes"])
        gen = torch.Generator().manual_seed(0)
        return module, {RESNET_INPUT: torch.randn(batch, 3, kw["image"], kw["image"],
                                                  generator=gen)}
    return models.build(FIXTURE, batch=batch, **kw)


def unit_class(kw):
    """The FSDP unit's class, and its name for fsdp-opt --wrap-class."""
    if is_resnet(kw):
        import torchvision
        return torchvision.models.resnet.BasicBlock, RESNET_UNIT
    return getattr(models, WRAP_CLASS), WRAP_CLASS


def model_kw(args):
    """The model's keywords from the command line (build's kw)."""
    if getattr(args, "model", "gpt") == "resnet18":
        return {"model": "resnet18", "classes": args.classes, "image": args.image}
    return {"d_model": args.d_model, "n_layer": args.n_layer, "n_head": args.n_head,
            "max_len": args.max_len, "vocab": args.vocab}


def wrap(kind, module, world, kw):
    """`module` wrapped as reference `kind`, and the parameters to optimize."""
    block, _ = unit_class(kw)
    if kind == "ddp":
        # Gloo cannot broadcast bool tensors: leave the (constant, identical
        # on every rank) causal-mask buffers out of DDP's buffer syncs.
        DDP._set_params_and_buffers_to_ignore_for_model(
            module, [n for n, b in module.named_buffers() if b.dtype == torch.bool])
        return DDP(module), train_parity.unique_parameters(module)
    if kind == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for m in module.modules():
            if isinstance(m, block):
                fully_shard(m, mesh=mesh, reshard_after_forward=True)
        fully_shard(module, mesh=mesh, reshard_after_forward=True)
        # DTensor parameters, the tied weight one object: parameters() gives
        # each once (train_parity.unique_parameters' storage key cannot tell
        # DTensors apart).
        return module, list(module.parameters())
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    model = FSDP(module, device_id=torch.device("cpu"),
                 sharding_strategy=ShardingStrategy.FULL_SHARD,
                 auto_wrap_policy=ModuleWrapPolicy({block}), use_orig_params=True)
    # Views of the local shard, empty where a parameter lies on other ranks.
    return model, list(model.parameters())


def reference_worker(rank, world, port, kind, model_path, data_path, kw, args, out_dir):
    """One rank of reference `kind` (ddp, fsdp2, fsdp1): trains on its slice
    of every global batch; rank 0 reports."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # no profiler chatter
    warnings.filterwarnings("ignore")  # FSDP's and the profiler's notices
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    saved = torch.jit.load(model_path)
    # Bytes of the parameters and buffers (a tied weight once).
    unique = {t.data_ptr(): t for t in saved.state_dict().values()}
    loaded = sum(t.numel() * t.element_size() for t in unique.values())
    data = torch.load(data_path)
    # The allocator's bytes from here on: the model, the wrapper's state, the
    # optimizer's, the batches, the steps (not the data or the loaded file).
    accounting = cpu_memory_accounting()
    memory_steps = min(args.warmup, MEMORY_STEPS) if accounting is not None else 0
    prof = None
    if memory_steps:
        accounting.value = True
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                      profile_memory=True)
        prof.start()
    module, _ = build(kw, args.batch)
    module.load_state_dict(saved.state_dict(), strict=False)
    module.train()
    model, params = wrap(kind, module, world, kw)
    opt = train_parity.optimizer_for(params, OPTIM)
    time_waits()
    times, waits, losses, peak = [], [], [], None
    for step in range(args.steps):
        # Copies, as fsdp-run's: the step holds its own batch.
        idx = data[RESNET_INPUT if is_resnet(kw) else INPUT][step].chunk(world)[rank].clone()
        target = data[TARGET][step].chunk(world)[rank].clone()
        opt.zero_grad(set_to_none=True)
        dist.barrier()
        with (torch.profiler.record_function(STEP_MARK) if prof
              else contextlib.nullcontext()):
            WAITED[0] = 0.0
            start = time.perf_counter()
            loss = train_parity.loss_of(model(idx), target, "cross_entropy")
            loss.backward()
            opt.step()
            times.append((time.perf_counter() - start) * 1e3)
            waits.append(WAITED[0])
        total = loss.detach().clone()  # untimed: the mean loss, for the check
        dist.all_reduce(total)
        losses.append(float(total) / world)
        del loss, total
        if prof and step + 1 == memory_steps:
            prof.stop()
            accounting.value = False  # the timed steps run without it
            peak = allocator_peak(prof)
            prof = None
    # The largest allocator peak over the ranks.
    peaks = torch.tensor([-1 if peak is None else peak], dtype=torch.int64)
    dist.all_reduce(peaks, op=dist.ReduceOp.MAX)
    if rank == 0:
        with open(os.path.join(out_dir, f"{kind}{world}.json"), "w") as f:
            json.dump({"step_ms": statistics.median(times[args.warmup:]),
                       "wait_ms": (None if kind == "ddp"
                                   else statistics.median(waits[args.warmup:])),
                       "state_bytes": state_bytes(params, opt), "loaded_bytes": loaded,
                       "allocator_bytes": None if peaks.item() < 0 else peaks.item(),
                       "losses": losses}, f)
    dist.destroy_process_group()


def run_reference(kind, world, model_path, data_path, kw, args, tmp):
    """PyTorch reference `kind` at `world` ranks: median step ms, comm wait
    ms (None for DDP), state, loaded and allocator peak bytes, per-step
    losses."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    out = os.path.join(tmp, f"{kind}{world}.json")
    if os.path.exists(out):
        os.remove(out)
    mp.spawn(reference_worker, nprocs=world,
             args=(world, free_port(), kind, model_path, data_path, kw, args, tmp))
    with open(out) as f:
        return json.load(f)


def run_ddp(world, model_path, data_path, kw, args, tmp):
    return run_reference("ddp", world, model_path, data_path, kw, args, tmp)


def schedule_flags(schedule):
    """fsdp-opt's flags for a schedule name such as BACKWARD_PRE+FORWARD."""
    prefetch, *extra = schedule.split("+")
    flags = ["--backward-prefetch", prefetch]
    for e in extra:
        flags += {"FORWARD": ["--forward-prefetch"], "NOLIMIT": ["--limit-all-gathers", "0"],
                  "R0": ["--limit-reductions", "0"], "R1": ["--limit-reductions", "1"],
                  "R2": ["--limit-reductions", "2"],
                  "AC": ["--activation-checkpointing"],
                  "BF16": ["--mixed-precision", "bf16"],
                  "OFFLOAD": ["--offload-params"]}[e]
    return flags


def run_fsdp(world, sharding, schedule, model_path, data_path, args, tmp):
    """fsdp-opt + fsdp-run at `world` ranks: median step ms, sharded state
    bytes and peak bytes (None where the metrics lack them), per-step losses."""
    plan = os.path.join(tmp, f"model{world}.{sharding}.{schedule}.plan")
    metrics = os.path.join(tmp, f"model{world}.{sharding}.{schedule}.jsonl")
    compile_cmd = [os.path.join(args.bin, "fsdp-opt"), model_path, "--loss", "cross_entropy",
                   "--optimizer", OPTIM.optimizer, "--lr", str(OPTIM.lr),
                   "--world-size", str(world), "--sharding", sharding,
                   "--auto-wrap", "class", "--wrap-class", unit_class(model_kw(args))[1],
                   *schedule_flags(schedule)]
    run_cmd = [os.path.join(args.bin, "fsdp-run"), plan, "--model", model_path,
               "--data", data_path, "--steps", str(args.steps), "--metrics", metrics,
               "--threads", str(args.threads), "--nproc", str(world)]
    memory = os.path.join(tmp, f"model{world}.{sharding}.{schedule}.memory.json")
    subprocess.run(compile_cmd + ["--emit", "plan", "-o", plan,
                                  "--memory-report-json", memory,
                                  "--measure-workspaces", "--workspace-threads",
                                  str(args.threads)], check=True)
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
            "predicted_allocator_bytes": report["allocator_peak_bytes"],
            "read_bytes": summary.get("model_bytes_read"),
            "losses": [m["loss"] for m in steps]}


def loss_mismatch(ours, ddp, name="DDP"):
    """The first step whose losses differ from reference `name`'s, as a
    message, or None."""
    if len(ours) != len(ddp):
        return f"{len(ours)} steps in fsdp-run's metrics, {len(ddp)} in {name}"
    for step, (a, b) in enumerate(zip(ours, ddp)):
        if abs(a - b) > LOSS_TOLERANCE * max(abs(b), 1e-6):
            return f"loss at step {step + 1} is {a} in fsdp-run, {b} in {name}"
    return None


def export(kw, batch, path):
    """Saves the model (build's) as TorchScript with input and target specs
    of `batch` (a rank's batch)."""
    module, inputs = build(kw, batch)
    module.train()
    with torch.no_grad():
        out = module(*inputs.values())
    target = train_parity.target_for(out, "cross_entropy", torch.Generator().manual_seed(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        fsdp_export.save(module, path, inputs, targets={TARGET: target})
    return path


def write_data(args, path):
    """--steps random global batches of tokens and next-token targets (of
    images and classes for --model resnet18)."""
    gen = torch.Generator().manual_seed(1)
    if getattr(args, "model", "gpt") == "resnet18":
        torch.save({RESNET_INPUT: torch.randn(args.steps, args.batch, 3, args.image, args.image,
                                              generator=gen),
                    TARGET: torch.randint(0, args.classes, (args.steps, args.batch),
                                          generator=gen)}, path)
        return path
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
    p.add_argument("--model", choices=["gpt", "resnet18"], default="gpt",
                   help="the GPT fixture (sizes above), or torchvision's ResNet-18")
    p.add_argument("--image", type=int, default=64, help="ResNet-18's image side")
    p.add_argument("--classes", type=int, default=10, help="ResNet-18's classes")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))


def mib(n):
    return "n/a" if n is None else f"{n / 2**20:.2f}"


def ms(x):
    return "n/a" if x is None else f"{x:.2f}"


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
    p.add_argument("--references", default=",".join(REFERENCES),
                   help="PyTorch references to train beside fsdp-run, comma-separated, "
                   f"of {','.join(REFERENCES)} (empty: none)")
    add_model_args(p)
    args = p.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    for w in ranks:
        if w < 1 or args.batch % w:
            p.error(f"--batch {args.batch} does not divide into {w} ranks")
    if args.steps <= args.warmup:
        p.error("--steps must exceed --warmup")
    references = [r for r in args.references.split(",") if r]
    for r in references:
        if r not in REFERENCES:
            p.error(f"unknown reference {r!r}: --references takes {','.join(REFERENCES)}")
    for tool in ("fsdp-opt", "fsdp-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit(f"{os.path.join(args.bin, tool)} not found: build the project first "
                     "(or pass --bin)")
    kw = model_kw(args)
    names = {r: REFERENCES[r][0].split()[-1] for r in references}  # DDP, FSDP2, FSDP1

    with tempfile.TemporaryDirectory() as tmp:
        data_path = write_data(args, os.path.join(tmp, "gpt.data.pt"))
        memory_steps = min(args.warmup, MEMORY_STEPS)
        print(f"{getattr(args, 'model', 'gpt')} {kw}, global batch {args.batch}, AdamW, {args.threads} thread(s) per rank "
              f"on {os.cpu_count()} cores, median of steps {args.warmup + 1}-{args.steps} "
              "on rank 0" + (f"; references' allocator peaks over steps 1-{memory_steps} "
                             "(torch.profiler)" if references and memory_steps else ""))
        print("\n| ranks | trainer | strategy | schedule | step ms | comm wait ms | "
              + "".join(f"ratio vs {names[r]} | " for r in references)
              + "sharded state MiB/rank | fsdp-opt predicted peak MiB/rank | peak MiB/rank | "
              "predicted = measured | fsdp-opt predicted allocator peak MiB/rank | "
              "allocator peak MiB/rank | model MiB read/rank |")
        print("|---:|---|---|---|---:|---:|" + "---:|" * len(references)
              + "---:|---:|---:|---|---:|---:|---:|")
        notes = []
        for w in ranks:
            # fsdp-opt's input specs are one rank's batch; the data holds all ranks'.
            model_path = export(kw, args.batch // w, os.path.join(tmp, f"gpt{w}.pt"))
            refs = {}
            for r in references:
                name, strategy, schedule = REFERENCES[r]
                try:
                    refs[r] = run_reference(r, w, model_path, data_path, kw, args, tmp)
                except Exception as e:  # a reference's failure leaves its row n/a
                    notes.append(f"{w} ranks, {name}: {type(e).__name__}: "
                                 f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
                ref = refs.get(r, {})
                print(f"| {w} | {name} | {strategy} | {schedule} | {ms(ref.get('step_ms'))} | "
                      f"{ms(ref.get('wait_ms'))} | " + "| " * len(references)
                      + f"{mib(ref.get('state_bytes'))} | n/a | n/a | n/a | n/a | "
                      f"{mib(ref.get('allocator_bytes'))} | {mib(ref.get('loaded_bytes'))} |",
                      flush=True)
            for sharding, schedule in [(s, c) for s in args.sharding.split(",")
                                       for c in args.schedules.split(",")]:
                ours = {}
                try:
                    ours = run_fsdp(w, sharding, schedule, model_path, data_path, args, tmp)
                except subprocess.CalledProcessError as e:
                    notes.append(f"{w} ranks, {sharding} {schedule}: "
                                 f"{os.path.basename(e.cmd[0])} exited {e.returncode}")
                # Both sides must train the same thing for their times to compare.
                for r, ref in refs.items():
                    mismatch = ours and loss_mismatch(ours["losses"], ref["losses"], names[r])
                    if mismatch:
                        notes.append(f"{w} ranks, {sharding} {schedule}: {mismatch}")
                ratios = "".join(
                    "n/a | " if not ours or r not in refs
                    else f"{ours['step_ms'] / refs[r]['step_ms']:.2f} | " for r in references)
                equal = "n/a" if not ours else \
                    "yes" if ours["predicted_bytes"] == ours["peak_bytes"] else "no"
                print(f"| {w} | fsdp-run | {sharding} | {schedule} | {ms(ours.get('step_ms'))} | "
                      f"{ms(ours.get('wait_ms'))} | {ratios}"
                      f"{mib(ours.get('sharded_bytes'))} | {mib(ours.get('predicted_bytes'))} | "
                      f"{mib(ours.get('peak_bytes'))} | {equal} | "
                      f"{mib(ours.get('predicted_allocator_bytes'))} | "
                      f"{mib(ours.get('allocator_bytes'))} | {mib(ours.get('read_bytes'))} |",
                      flush=True)
    for note in notes:
        print(f"\nWARNING: {note}")


if __name__ == "__main__":
    main()
