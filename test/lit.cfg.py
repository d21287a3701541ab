# -*- Python -*-
# lit configuration for qopt: FileCheck tests of the frontend, the dialect, each
# pass, the GPU lowering and the PTX itself.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "QOPT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".qopt", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "reference", "unit", "fuzz", "data"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.qopt_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%specs", os.path.join(config.qopt_src_root, "specs")))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.qopt_tools_dir, config.llvm_tools_dir]
tools = ["qopt-opt", ToolSubst("qopt-spec-check", unresolved="ignore")]

# ptxas (CUDA toolkit) assembles the PTX the tests emit; tests that need it say
# `REQUIRES: ptxas` and are reported as unsupported where it is missing.
if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))

llvm_config.add_tool_substitutions(tools, tool_dirs)
