"""Save a PyTorch module as TorchScript for fsdp-opt, with its input shapes.

    import fsdp_export
    fsdp_export.save(model, "model.pt", {"x": torch.randn(8, 3, 32, 32)})

traces (or, with method="script", scripts) the module in training mode and
stores the inputs' static types in the archive's extra file `fsdp_meta.json`,
so that `fsdp-opt model.pt` needs no `--input` flags. Runs with any torch
that has torch.jit (1.13 and 2.x).
"""

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


def save(module, path, inputs, method="trace", targets=None, store_specs=True):
    """Trace or script `module` in training mode and save it to `path`.

    `inputs` maps each forward argument's name to an example tensor, in the
    order of forward's signature. `targets` (optional) maps target names to
    example tensors, recorded for the training-step compiler. With
    store_specs=False the archive is plain TorchScript (fsdp-opt then needs
    --input flags).
    """
    module.train()
    if method == "trace":
        scripted = torch.jit.trace(module, tuple(inputs.values()), check_trace=False)
    elif method == "script":
        scripted = torch.jit.script(module)
    else:
        raise ValueError(f"method must be 'trace' or 'script', not {method!r}")
    meta = {
        "version": 1,
        "inputs": [spec(k, v) for k, v in inputs.items()],
        "targets": [spec(k, v) for k, v in (targets or {}).items()],
        # TorchScript forgets `persistent=False`; a checkpoint must leave
        # these buffers out for load_state_dict to accept it.
        "non_persistent_buffers": non_persistent_buffers(module),
    }
    extra = {META_FILE: json.dumps(meta)} if store_specs else {}
    torch.jit.save(scripted, path, _extra_files=extra)
    return scripted
