"""Installs the pure-Python package; when the source checkout's build tree has them, also bundles
libqopt_runtime.so (qopt/lib/) and the compiled kernels (qopt/kernels/{fatbin,ptx,host}/), so an
installed package needs no environment variables. QOPT_BUNDLE=0 skips the bundling;
QOPT_BUILD_DIR picks another build tree (default: ../build)."""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyBundling(build_py):
    def run(self):
        super().run()
        if os.environ.get("QOPT_BUNDLE", "1") == "0":
            return
        build = Path(os.environ.get("QOPT_BUILD_DIR", HERE.parent / "build"))
        if not build.is_absolute():
            build = HERE.parent / build
        target = Path(self.build_lib) / "qopt"
        lib = build / "runtime" / "libqopt_runtime.so"
        if lib.is_file():
            (target / "lib").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lib.resolve(), target / "lib" / "libqopt_runtime.so")
        for sub in ("fatbin", "ptx", "host"):
            src = build / "kernels" / sub
            if src.is_dir() and any(src.glob("*.manifest.json")):
                dst = target / "kernels" / sub
                if dst.exists():
                    shutil.rmtree(dst)
                shutil.copytree(src, dst)


setup(cmdclass={"build_py": BuildPyBundling})
