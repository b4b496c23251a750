"""Save a PyTorch module as TorchScript for fsdp-opt, with its input shapes.

    import fsdp_export
    fsdp_export.save(model, "model.pt", {"x": torch.randn(8, 3, 32, 32)})

traces (or, with method="script", scripts) the module in training mode and
stores the inputs' static types in the archive's extra file `fsdp_meta.json`,
so that `fsdp-opt model.pt` needs no `--input` flags. Runs with any torch
that has torch.jit (1.13 and 2.x).

A model too large for this machine is saved without weights:

    with fsdp_export.empty_init():          # or torch 2.x's torch.device("meta")
        model = GPT(n_layer=32, d_model=4096)
    fsdp_export.save(model, "gpt7b.pt", {"idx": torch.zeros(1, 2048, dtype=torch.long)},
                     weights=False)

The archive records every parameter's and buffer's shape and dtype and no
values (a few hundred KB): `fsdp-opt` compiles it and `--memory-report`
predicts each rank's memory; `fsdp-run` refuses to train it.
"""

import contextlib
import json

import torch

META_FILE = "fsdp_meta.json"
_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "i1",
}


def spec(name, tensor):
    """The `--input` spec of a tensor: NAME:DIMSxDTYPE."""
    if tensor.dtype not in _DTYPES:
        raise ValueError(f"input {name!r} has unsupported dtype {tensor.dtype}")
    dims = "".join(f"{d}x" for d in tensor.shape)
    return f"{name}:{dims}{_DTYPES[tensor.dtype]}"


def non_persistent_buffers(module):
    """FQNs of the buffers registered with persistent=False."""
    names = []
    for prefix, m in module.named_modules():
        for b in sorted(getattr(m, "_non_persistent_buffers_set", ())):
            names.append(f"{prefix}.{b}" if prefix else b)
    return names


@contextlib.contextmanager
def empty_init():
    """Within it, modules are built without materialising their parameters:
    every parameter a module registers moves to the meta device (its shape
    and dtype, no values), so initialisers cost nothing. Ties made by
    assignment (`head.weight = embed.weight`) are kept. Works with torch 1.13,
    which has no `torch.device("meta")` context; buffers stay as created."""
    register = torch.nn.Module.register_parameter

    def register_on_meta(module, name, param):
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            module._parameters[name] = torch.nn.Parameter(
                param.to("meta"), requires_grad=param.requires_grad)

    torch.nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def _placeholder(tensor):
    """A tensor with `tensor`'s shape and dtype that stores one element."""
    stub = torch.zeros((), dtype=tensor.dtype).expand(tensor.shape).detach()
    return stub.requires_grad_(tensor.requires_grad)


def _strip_values(scripted):
    """Replaces every parameter and buffer of `scripted` by a placeholder
    (tied tensors by one placeholder), and the meta device constants that
    tracing on meta recorded by the CPU."""
    made = {}
    for _, sub in scripted.named_modules():
        named = list(sub.named_parameters(recurse=False)) + \
            list(sub.named_buffers(recurse=False))
        for name, t in named:
            key = id(t)
            if key not in made:
                made[key] = (t, _placeholder(t))
            sub._c.setattr(name, made[key][1])
        try:
            graph = sub._c._get_method("forward").graph
        except RuntimeError:  # a container without forward
            continue
        for node in graph.findAllNodes("prim::Constant"):
            if node.output().type().kind() == "DeviceObjType" and node.s("value") == "meta":
                node.s_("value", "cpu")


def save(module, path, inputs, method="trace", targets=None, store_specs=True,
         weights=True, eval_path=None):
    """Trace or script `module` in training mode and save it to `path`.

    `inputs` maps each forward argument's name to an example tensor, in the
    order of forward's signature. `targets` (optional) maps target names to
    example tensors, recorded for the training-step compiler. With
    store_specs=False the archive is plain TorchScript (fsdp-opt then needs
    --input flags).

    With weights=False the archive keeps every parameter's and buffer's shape
    and dtype but no values: `module` (its parameters may be on the meta
    device, see empty_init) moves to the meta device and is traced there, so
    nothing is computed or materialised. Such an archive compiles and its
    memory can be predicted; it cannot be trained.

    eval_path: also save the module in evaluation mode (`module.eval()`:
    dropout off, BatchNorm reading its running statistics) there, the same
    way, for `fsdp-opt --eval-model` (the plan's evaluation step); the
    module is left in training mode.
    """
    saved = _save(module, path, inputs, method, targets, store_specs, weights,
                  training=True)
    if eval_path is not None:
        try:
            _save(module, eval_path, inputs, method, targets, store_specs,
                  weights, training=False)
        finally:
            module.train()
    return saved


def _save(module, path, inputs, method, targets, store_specs, weights,
          training):
    module.train(training)
    example = tuple(inputs.values())
    if not weights:
        module.to("meta")
        example = tuple(v.to("meta") for v in example)
    if method == "export":
        return _save_exported(module, path, inputs, targets, store_specs,
                              weights)
    if method == "trace":
        # Tracing runs forward once in training mode, which would move
        # BatchNorm's statistics: the module, and the archive (which shares
        # its tensors), keep the state they had, as torch.export leaves it.
        # strict=False: a model returning a dict (a Hugging Face
        # ModelOutput, transformers 5.x has no torchscript=True) traces to
        # one, whose `loss` entry fsdp-opt's --loss none takes.
        before = {n: b.detach().clone() for n, b in module.named_buffers()}
        scripted = torch.jit.trace(module, example, check_trace=False, strict=False)
        with torch.no_grad():
            for n, b in module.named_buffers():
                b.copy_(before[n])
    elif method == "script":
        scripted = torch.jit.script(module)
    else:
        raise ValueError(
            f"method must be 'trace', 'script' or 'export', not {method!r}")
    if not weights:
        _strip_values(scripted)
    meta = {
        "version": 1,
        "inputs": [spec(k, v) for k, v in inputs.items()],
        "targets": [spec(k, v) for k, v in (targets or {}).items()],
        # TorchScript forgets `persistent=False`; a checkpoint must leave
        # these buffers out for load_state_dict to accept it.
        "non_persistent_buffers": non_persistent_buffers(module),
        # False: shapes and dtypes only (fsdp-run refuses to train it).
        "weights": bool(weights),
    }
    extra = {META_FILE: json.dumps(meta)} if store_specs else {}
    torch.jit.save(scripted, path, _extra_files=extra)
    return scripted


def data_dependent_message(error):
    """What to say when torch.export stops at a branch on tensor data
    (GuardOnDataDependentSymNode): where, and what to change."""
    import re
    text = str(error)
    where = re.search(r"Caused by: \((.*?)\)", text)
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    message = ("torch.export stopped at a branch on tensor data"
               + (f" ({where.group(1)})" if where else "") + f": {first}. "
               "A static training step needs shapes and control flow that do "
               "not depend on tensor values: compute on the whole tensor "
               "instead (mask by multiplying or with torch.where)")
    if where and "transformers/" in where.group(1):
        message += (". For a Hugging Face model given labels=, set the "
                    "config's problem_type (\"single_label_classification\", "
                    "\"multi_label_classification\" or \"regression\") so "
                    "that its loss does not choose itself from the labels' "
                    "values")
    return message


def _save_exported(module, path, inputs, targets, store_specs, weights):
    """torch.export.export in the module's mode (training: dropout and
    BatchNorm as in training), saved with torch.export.save: a `.pt2` archive that fsdp-opt
    reads as it reads TorchScript. Needs torch 2.x."""
    if not hasattr(torch, "export"):
        raise RuntimeError("method='export' needs torch 2.x (torch.export)")
    if not weights:
        raise ValueError("method='export' saves the weights; for a model "
                         "too large to build, save it with method='trace' "
                         "and weights=False")
    try:
        program = torch.export.export(module, tuple(inputs.values()), strict=False)
    except Exception as e:
        if "DataDependent" not in type(e).__name__:
            raise
        raise ValueError(data_dependent_message(e)) from e
    meta = {
        "version": 1,
        "inputs": [spec(k, v) for k, v in inputs.items()],
        "targets": [spec(k, v) for k, v in (targets or {}).items()],
        "weights": True,
    }
    extra = {META_FILE: json.dumps(meta)} if store_specs else None
    torch.export.save(program, path, extra_files=extra)
    return program
