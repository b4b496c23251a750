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
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "fixtures"]

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.fsdp_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

fixtures = os.path.join(config.fsdp_src_root, "test", "fixtures")
config.substitutions.append(("%fixtures", fixtures))
config.substitutions.append(("%fsdp_bin", config.fsdp_tools_dir))
config.substitutions.append(("%python", config.torch_python))
config.substitutions.append(
    ("%export", "%s %s" % (config.torch_python, os.path.join(fixtures, "export.py")))
)
# The importer's tests read source locations relative to the fixture files.
config.environment["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(config.fsdp_src_root, "python"), fixtures]
)

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
