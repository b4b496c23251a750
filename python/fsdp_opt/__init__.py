"""fsdp-opt from Python: export a module, compile its sharded training step,
train it on local ranks, read what happened and load the result back.

    import sys; sys.path.insert(0, "python")       # the repository's python/
    import torch, fsdp_opt

    fsdp_opt.export(model, "model.pt", {"x": torch.randn(8, 32)},
                    targets={"y": torch.randint(0, 10, (8,))})
    plan = fsdp_opt.compile("model.pt", "model.plan", loss="cross_entropy",
                            optimizer="adamw", lr=1e-3, world_size=2,
                            sharding="FULL_SHARD", memory_report=True)
    print(plan.world_size, plan.predicted_peak_bytes)
    fsdp_opt.save_batches("data.pt", {"x": xs, "y": ys})   # [steps, 2 * 8, ...]
    run = fsdp_opt.train(plan, "model.pt", "data.pt", save="final.pt")
    print([m["loss"] for m in run.steps], run.summary["peak_bytes"])
    fsdp_opt.load_into(model, "final.pt")

    # Checkpoints: every 100 steps, and resumed up to a total of 300.
    fsdp_opt.train(plan, "model.pt", "data.pt", steps=200, checkpoint_dir="ckpt",
                   checkpoint_every=100)
    fsdp_opt.train(plan, "model.pt", "data.pt", steps=300, resume="ckpt")
    step = fsdp_opt.load_checkpoint("ckpt", model, optimizer)  # a torch.optim one

`compile` takes fsdp-opt's options as keyword arguments: the flag's name
with `_` for `-` (`backward_prefetch="BACKWARD_POST"`, `max_grad_norm=1.0`,
`lr_schedule="cosine"`), True for a flag without a value, a list for a
repeatable flag (`wrap_class=["Block"]`). `train` runs `fsdp-run --nproc`
with the plan's world size. The binaries are FSDP_OPT_BIN's, else the
repository's build/bin, else those on PATH. Errors of either tool raise
FsdpOptError with the tool's message. Needs torch 2.x (the project's .venv
has 2.11).
"""

import errno
import io
import json
import os
import stat
import shutil
import signal
import subprocess
import sys
import tempfile

import torch

import fsdp_export

__all__ = ["FsdpOptError", "Plan", "Run", "Runtime", "export", "compile", "save_batches",
           "train", "load_into", "load_checkpoint", "binary"]

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FsdpOptError(RuntimeError):
    """fsdp-opt or fsdp-run failed; the message is theirs."""


def binary(name):
    """The path of fsdp-opt or fsdp-run."""
    for folder in (os.environ.get("FSDP_OPT_BIN"), os.path.join(_REPO, "build", "bin")):
        if folder and os.access(os.path.join(folder, name), os.X_OK):
            return os.path.join(folder, name)
    found = shutil.which(name)
    if not found:
        raise FsdpOptError(f"{name} not found: build it (scripts/build.sh) or set FSDP_OPT_BIN")
    return found


def _runtime_module():
    """The runtime's Python module (_fsdp_runtime): beside FSDP_OPT_BIN's
    folder (its ../python), else the repository's build/python."""
    folders = [os.path.join(_REPO, "build", "python")]
    if os.environ.get("FSDP_OPT_BIN"):
        folders.insert(0, os.path.join(os.environ["FSDP_OPT_BIN"], "..", "python"))
    for folder in folders:
        if os.path.isdir(folder) and any(f.startswith("_fsdp_runtime.")
                                         for f in os.listdir(folder)):
            if folder not in sys.path:
                sys.path.insert(0, folder)
            import _fsdp_runtime
            return _fsdp_runtime
    raise FsdpOptError("the runtime module _fsdp_runtime is not built: build it "
                       "(scripts/build.sh) or set FSDP_OPT_BIN")


class Runtime:
    """One rank of a compiled plan, driven from your own training loop:
    under torchrun (or Slurm's variables, as fsdp-run reads them) every
    process makes one, and each step takes that rank's own batch, as a
    DataLoader with a DistributedSampler gives it.

        rt = fsdp_opt.Runtime("model.plan", "model.pt2")
        for x, y in loader:                 # this rank's batches
            loss = rt.step({"x": x, "y": y})  # the global batch's loss
        val = rt.evaluate({"x": vx, "y": vy})  # where the plan has an eval step
        model.load_state_dict(rt.state_dict())  # every rank calls it
        rt.save("final.pt")                     # fsdp-run --save's file
        rt.lr = 3e-4    # your schedule (a plan compiled with lr_schedule="external")

    It reads this rank's shard of `model`, meets the other ranks and checks
    that every one loaded the same plan, as fsdp-run does; the executor,
    collectives and files are fsdp-run's, so the same batches give the
    same bits. `seed`: torch.manual_seed on every rank (fsdp-run's --seed);
    `device` ("cpu", "cuda") and `backend` ("gloo", "nccl") as fsdp-run's;
    `resume`: a checkpoint directory (`checkpoint()`'s, or fsdp-run
    --checkpoint-dir's) to go on from.
    An error raises FsdpOptError on this rank and stops the others with its
    message; Ctrl-C (KeyboardInterrupt) on one rank makes the others' step
    raise FsdpOptError (a rank stopped), so every rank ends. `metrics`: the last step's time, its time blocked on
    collectives and its peak bytes of live tensors."""

    def __init__(self, plan, model, seed=None, device=None, backend=None, resume=None):
        module = _runtime_module()
        try:
            self._session = module.Session(_path(getattr(plan, "path", plan)), _path(model),
                                           seed, device or "", backend or "",
                                           _path(resume) if resume else "")
        except RuntimeError as e:
            raise FsdpOptError(str(e)) from None

    def _call(self, name, *args):
        try:
            return getattr(self._session, name)(*args)
        except RuntimeError as e:
            raise FsdpOptError(str(e)) from None

    def step(self, batch):
        """One training step on this rank's `batch` (input name -> tensor);
        returns the global batch's loss."""
        return self._call("step", dict(batch))

    def evaluate(self, batch):
        """The plan's evaluation step on this rank's `batch`; returns the
        global batch's loss. The state is unchanged."""
        return self._call("evaluate", dict(batch))

    def state_dict(self):
        """Parameters and persistent buffers by FQN, whole (CPU tensors), as
        `load_state_dict` takes them; every rank must call it."""
        return self._call("state_dict")

    def save(self, path):
        """fsdp-run --save's file, written by rank 0; every rank must call it."""
        self._call("save", _path(path))

    def checkpoint(self, directory, state_dict_type=None):
        """A checkpoint after the steps taken, in fsdp-run's format, under
        `directory` (DIR/step-N, DIR/latest): state, optimizer state, step
        count and random generator; `Runtime(..., resume=directory)` goes on
        from it (your loop skips the batches already taken: `steps` says
        how many). Every rank must call it; returns the checkpoint's path."""
        return self._call("checkpoint", _path(directory), state_dict_type or "")

    @property
    def lr(self):
        """The learning rate, as `optimizer.param_groups[0]["lr"]`: the next
        step's where the plan fixes it or keeps it as state; under a
        compiled schedule (lr_schedule="cosine", ...) the last step's."""
        try:
            return self._session.lr
        except RuntimeError as e:
            raise FsdpOptError(str(e)) from None

    @lr.setter
    def lr(self, value):
        """Sets the rate of the steps that follow: your own schedule, set
        the same on every rank. The plan must be compiled with
        lr_schedule="external" (fsdp-opt --lr-schedule external), which
        keeps the rate as state starting at `lr`; checkpoints save it."""
        try:
            self._session.lr = float(value)
        except RuntimeError as e:
            raise FsdpOptError(str(e)) from None

    @property
    def steps(self):
        """Steps taken, those before a resumed checkpoint included."""
        return self._session.steps

    @property
    def rank(self):
        return self._session.rank

    @property
    def world_size(self):
        return self._session.world_size

    @property
    def metrics(self):
        s = self._session
        return {"steps": s.steps, "step_ms": s.step_ms, "comm_wait_ms": s.comm_wait_ms,
                "peak_bytes": s.peak_bytes}


def _run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        # The first error line (MLIR may follow it with the whole module).
        text = done.stderr.strip() or done.stdout.strip()
        errors = [line for line in text.splitlines() if "error:" in line]
        message = errors[0] if errors else text
        if done.returncode < 0:
            try:
                name = signal.Signals(-done.returncode).name
            except ValueError:
                name = f"signal {-done.returncode}"
            raise FsdpOptError(f"{os.path.basename(cmd[0])} was killed by {name}"
                               + (f": {message}" if message else ""))
        raise FsdpOptError(f"{os.path.basename(cmd[0])} failed (status {done.returncode}): "
                           f"{message or 'no message'}")
    return done.stdout


def _path(path):
    """`path` as an argument no tool reads as an option ("-model.pt" is
    "./-model.pt")."""
    path = os.fspath(path)
    return os.path.join(".", path) if path.startswith("-") else path


def export(module, path, inputs, targets=None, method="trace", weights=True,
           eval_path=None):
    """Saves `module` with its input (and loss target) specs:
    python/fsdp_export.py's save. method="trace" or "script": TorchScript
    (`.pt`); method="export": torch.export.export in training mode, saved
    with torch.export.save (`.pt2`). weights=False saves shapes only
    (TorchScript). eval_path: the module in evaluation mode saved there
    too (compile(..., eval_model=eval_path) gives the plan its evaluation
    step where dropout or BatchNorm make the modes differ)."""
    return fsdp_export.save(module, path, inputs, method=method, targets=targets,
                            weights=weights, eval_path=eval_path)


def _flags(options):
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                flags += [flag, str(item)]
        else:
            flags += [flag, repr(value) if isinstance(value, float) else str(value)]
    return flags


class Plan:
    """A compiled plan: its file, what it was compiled for, and (with
    memory_report=True) the predicted memory of one rank."""

    def __init__(self, path, memory=None):
        self.path = path
        with open(path) as f:
            header = json.load(f)
        self.world_size = header["world_size"]
        self.shard_group_size = header["shard_group_size"]
        self.sharding = header["sharding"]
        self.function = header["function"]
        self.metrics = [m["name"] for m in header.get("metrics", [])]
        self.memory = memory

    @property
    def predicted_peak_bytes(self):
        """The predicted peak of one rank (compile with memory_report=True)."""
        if self.memory is None:
            raise FsdpOptError("compiled without memory_report=True")
        return self.memory["peak_bytes"]

    def __repr__(self):
        return (f"Plan({self.path!r}, {self.sharding or 'unsharded'} on "
                f"{self.world_size} ranks)")


def compile(model, plan, memory_report=False, **options):
    """Compiles `model` (a TorchScript archive) into the plan file `plan`
    with fsdp-opt's options as keyword arguments; returns a Plan."""
    cmd = [binary("fsdp-opt"), _path(model), *_flags(options), "--emit", "plan", "-o", plan]
    memory = None
    with tempfile.TemporaryDirectory() as tmp:
        if memory_report:
            report = os.path.join(tmp, "memory.json")
            cmd += ["--memory-report-json", report]
        _run(cmd)
        if memory_report:
            with open(report) as f:
                memory = json.load(f)
    return Plan(plan, memory)


def save_batches(path, batches):
    """Writes fsdp-run's data file: name -> tensor whose first dimension is
    the step, then the global batch (every rank's samples)."""
    for name, t in batches.items():
        if not isinstance(t, torch.Tensor) or t.dim() < 1:
            raise ValueError(f"batch {name!r} must be a tensor with a leading [steps] dimension")
    torch.save(dict(batches), path)


class Run:
    """What fsdp-run wrote to --metrics: one dict per step (`loss`,
    `step_ms`, `peak_bytes`, and `lr` / `grad_norm` where the plan has
    them), each evaluation's line (`eval_loss` after `step`) and the
    summary."""

    def __init__(self, lines, output):
        self.steps = [line for line in lines
                      if not line.get("summary") and "eval_loss" not in line]
        self.evals = [line for line in lines
                      if not line.get("summary") and "eval_loss" in line]
        summaries = [line for line in lines if line.get("summary")]
        self.summary = summaries[-1] if summaries else {}
        self.output = output

    @property
    def losses(self):
        return [line["loss"] for line in self.steps]

    @property
    def eval_losses(self):
        """(step, eval_loss) of each evaluation: after step `step` (1-based)."""
        return [(line["step"] + 1, line["eval_loss"]) for line in self.evals]

    def __repr__(self):
        return f"Run({len(self.steps)} steps, losses {self.losses})"


def train(plan, model, data, steps=None, save=None, threads=None, nproc=None,
          checkpoint_dir=None, checkpoint_every=None, state_dict_type=None, resume=None,
          seed=None, seq_len=None, token_inputs=None, data_order=None, token_dtype=None,
          eval_data=None, eval_every=None, eval_steps=None):
    """Runs `plan` (a Plan or a path) with fsdp-run on local ranks
    (`nproc`: the plan's world size by default) and returns a Run. `save`:
    where rank 0 writes the final parameters and buffers (FQN -> tensor).
    `checkpoint_dir`, `checkpoint_every`, `state_dict_type`
    ("FULL_STATE_DICT", "SHARDED_STATE_DICT") and `resume` are fsdp-run's
    checkpoint flags (`steps` counts every step, those before the
    checkpoint too). `seed`: torch.manual_seed(seed) on every rank before
    the first step (dropout's masks). A token corpus as `data` (.bin or
    .npy) takes `seq_len`, `token_inputs` ("IDS,TARGETS" or a pair),
    `data_order` ("shuffle", "sequential") and `token_dtype` ("uint16",
    "uint32"), fsdp-run's --seq-len, --token-inputs, --data-order and
    --token-dtype. `eval_data` (any form `data` takes), `eval_every` and
    `eval_steps`: the plan's evaluation step on that data every N steps
    and after the last (fsdp-run's --eval-data, --eval-every,
    --eval-steps; Run.eval_losses)."""
    if isinstance(token_inputs, (list, tuple)):
        token_inputs = ",".join(token_inputs)
    if not isinstance(plan, Plan):
        plan = Plan(plan)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [binary("fsdp-run"), _path(plan.path), "--model", model, "--data", data,
               "--metrics", metrics, "--nproc", str(nproc or plan.world_size)]
        if steps is not None:
            cmd += ["--steps", str(steps)]
        if threads is not None:
            cmd += ["--threads", str(threads)]
        if save is not None:
            cmd += ["--save", save]
        for flag, value in (("--checkpoint-dir", checkpoint_dir),
                            ("--checkpoint-every", checkpoint_every),
                            ("--state-dict-type", state_dict_type),
                            ("--resume", resume), ("--seed", seed),
                            ("--seq-len", seq_len), ("--token-inputs", token_inputs),
                            ("--data-order", data_order), ("--token-dtype", token_dtype),
                            ("--eval-data", eval_data), ("--eval-every", eval_every),
                            ("--eval-steps", eval_steps)):
            if value is not None:
                cmd += [flag, str(value)]
        output = _run(cmd)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    return Run(lines, output)


def load_into(module, saved, strict=True):
    """Loads what fsdp-run --save wrote (parameters and persistent buffers,
    by FQN) into `module` with load_state_dict; returns its result."""
    state = torch.load(saved)
    return module.load_state_dict(state, strict=strict)


def _read_checkpoint_file(path, limit):
    """A checkpoint's file, as fsdp-run reads it: a regular file (not a
    symbolic link, a pipe or a device, which could point outside the
    checkpoint, block or never end) of at most `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        why = ("it is a symbolic link, which a checkpoint's files are not"
               if e.errno == errno.ELOOP else e.strerror)
        raise FsdpOptError(f"cannot read '{path}': {why}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FsdpOptError(f"cannot read '{path}': not a regular file")
        if info.st_size > limit:
            raise FsdpOptError(f"cannot read '{path}': {info.st_size} bytes, "
                               f"more than the {limit} it may hold")
        return f.read()


def _checkpoint_dir(path):
    """The checkpoint `path` names: itself, or the one its `latest` names,
    by fsdp-run's rules: `latest` a regular file of at most 4 KiB naming a
    directory of `path` (one name, no `/`), which holds a meta.json."""
    if os.path.exists(os.path.join(path, "meta.json")):
        return path
    latest = os.path.join(path, "latest")
    if os.path.lexists(latest):
        name = _read_checkpoint_file(latest, 4096).decode("utf-8", "replace")
        name = name.rstrip("\n ")
        if (not name or name in (".", "..")
                or not all(32 <= ord(c) < 127 and c != "/" for c in name)):
            raise FsdpOptError(f"checkpoint directory '{path}': 'latest' does not "
                               "name a checkpoint in it (a name like step-00000004)")
        found = os.path.join(path, name)
        if not os.path.exists(os.path.join(found, "meta.json")):
            raise FsdpOptError(f"checkpoint directory '{path}': latest names "
                               f"'{name}', which is not a checkpoint there")
        return found
    raise FsdpOptError(f"{path} is not a checkpoint and holds none (no latest)")


def load_checkpoint(path, module, optimizer=None, strict=True):
    """Loads an fsdp-run FULL_STATE_DICT checkpoint (a checkpoint directory,
    or the --checkpoint-dir whose `latest` names one) into `module`
    (load_state_dict) and, if given, into the torch.optim `optimizer` built
    over module.parameters() (its state is keyed by parameter FQN, as FSDP's
    full optim state dict; mapped onto the optimizer's parameters by name).
    Returns the step the checkpoint was written after."""
    path = _checkpoint_dir(path)
    meta = json.loads(_read_checkpoint_file(os.path.join(path, "meta.json"), 1 << 30))
    if meta.get("state_dict_type") != "FULL_STATE_DICT":
        raise FsdpOptError(f"{path} is a {meta.get('state_dict_type')} checkpoint: "
                           "only a FULL_STATE_DICT one loads into a module")
    def load(name):
        data = _read_checkpoint_file(os.path.join(path, name), sys.maxsize)
        return torch.load(io.BytesIO(data))

    module.load_state_dict(load("model.pt"), strict=strict)
    if optimizer is not None:
        saved = load("optim.pt")
        by_tensor = {}
        for name, p in module.named_parameters():
            by_tensor.setdefault(id(p), name)
        groups = optimizer.param_groups
        if len(groups) != 1:
            raise FsdpOptError("load_checkpoint takes an optimizer with one param group")
        names = [by_tensor.get(id(p)) for p in groups[0]["params"]]
        missing = [n for n in names if n not in saved["param_groups"][0]["params"]]
        if None in names or missing:
            raise FsdpOptError(f"the optimizer's parameters are not the checkpoint's: {missing}")
        group = dict(saved["param_groups"][0])
        group["params"] = list(range(len(names)))
        state = {i: saved["state"][n] for i, n in enumerate(names) if n in saved["state"]}
        optimizer.load_state_dict({"state": state, "param_groups": [group]})
    return meta["step"]
