# -*- Python -*-
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "FSDP"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdp_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "fixtures", "Inputs"]

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.fsdp_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

fixtures = os.path.join(config.fsdp_src_root, "test", "fixtures")
config.substitutions.append(("%fixtures", fixtures))
config.substitutions.append(("%fsdp_bin", config.fsdp_tools_dir))
config.substitutions.append(("%fsdp_src", config.fsdp_src_root))
config.substitutions.append(
    ("%mlir_tblgen", os.path.join(config.llvm_tools_dir, "mlir-tblgen"))
)
config.substitutions.append(
    ("%llvm_include", os.path.join(os.path.dirname(config.llvm_tools_dir), "include"))
)
# LLVM's default substitutions name lit's own python as %python: fixtures need
# the project's (.venv, torch 2.11).
config.substitutions = [s for s in config.substitutions if s[0] != "%python"]
config.substitutions.append(("%python", config.torch_python))
config.substitutions.append(
    ("%export", "%s %s" % (config.torch_python, os.path.join(fixtures, "export.py")))
)
# The importer's tests read source locations relative to the fixture files.
config.environment["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(config.fsdp_src_root, "python"), fixtures]
)

# One thread for every torch in the suite, fsdp-run's and the references':
# a reduction split over threads sums in another order, and AdamW turns the
# rounding noise of a gradient that is zero but for rounding (an attention
# key bias) into lr-sized steps, so bit-level agreement needs the same
# thread count on both sides. Two tests run at once on two cores anyway.
config.environment["OMP_NUM_THREADS"] = "1"

# `scripts/test.sh --full` (lit --param full=1): the exhaustive sweeps too
# (the `%if full %{ ... %}` RUN lines).
if lit_config.params.get("full"):
    config.available_features.add("full")

# Tests that build models need a Python with torch.
def _has_torch(python):
    try:
        return subprocess.run([python, "-c", "import torch"], capture_output=True,
                              timeout=120).returncode == 0
    except Exception:
        return False

if config.torch_python and _has_torch(config.torch_python):
    config.available_features.add("torch")
else:
    lit_config.note("no Python with torch: importer tests are skipped")

# --- GPUs (feature `cuda`) ---------------------------------------------------
# The GPU tests (test/gpu, run by the gpu_*.test files and by
# scripts/gpu-check.sh) need a CUDA device that torch sees and an fsdp-run
# built with CUDA; elsewhere they are reported unsupported, never passed.
def _has_cuda(python):
    try:
        probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"
        return subprocess.run([python, "-c", probe], capture_output=True,
                              timeout=120).returncode == 0
    except Exception:
        return False

if "torch" in config.available_features and _has_cuda(config.torch_python):
    config.available_features.add("cuda")
else:
    lit_config.note("no CUDA device: the GPU tests are unsupported here")

# --- Network namespaces (feature `netns`) -----------------------------------
# e2e/torchrun_nodes.test runs each of two "nodes" in a network namespace of
# its own (ip netns, unshare --uts) with an /etc/netns/NS/hosts: root only.
# Probed by making and removing a throwaway namespace; without it the test
# is reported unsupported.
def _has_netns():
    name = "fsdp-lit-probe-%d" % os.getpid()
    run = lambda *cmd: subprocess.run(list(cmd), capture_output=True, timeout=30)
    etc = "/etc/netns" if os.path.isdir("/etc/netns") else "/etc"
    try:
        if not os.access(etc, os.W_OK):
            return False
        if run("ip", "netns", "add", name).returncode != 0:
            return False
        try:
            return run("ip", "netns", "exec", name, "unshare", "--uts",
                       "true").returncode == 0
        finally:
            run("ip", "netns", "delete", name)
    except Exception:
        return False

if _has_netns():
    config.available_features.add("netns")
else:
    lit_config.note("cannot make network namespaces (root, iproute2, unshare): "
                    "the two-node torchrun test is unsupported")
