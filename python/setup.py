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


def _bundled():
    """What the package bundles from the build tree: (runtime library or None, kernel dirs)."""
    if os.environ.get("QOPT_BUNDLE", "1") == "0":
        return None, []
    build = Path(os.environ.get("QOPT_BUILD_DIR", HERE.parent / "build"))
    if not build.is_absolute():
        build = HERE.parent / build
    lib = build / "runtime" / "libqopt_runtime.so"
    kernels = [build / "kernels" / sub for sub in ("fatbin", "ptx", "host")]
    kernels = [d for d in kernels if d.is_dir() and any(d.glob("*.manifest.json"))]
    return (lib if lib.is_file() else None), kernels


class BuildPyBundling(build_py):
    def run(self):
        super().run()
        lib, kernels = _bundled()
        target = Path(self.build_lib) / "qopt"
        if lib is not None:
            (target / "lib").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lib.resolve(), target / "lib" / "libqopt_runtime.so")
        for src in kernels:
            dst = target / "kernels" / src.name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst)


cmdclass = {"build_py": BuildPyBundling}
try:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

    class BdistWheelPlatform(_bdist_wheel):
        """A wheel that bundles libqopt_runtime.so or the host kernels (shared objects of this
        machine) is tagged for this platform, py3-none-<platform> (the libraries are loaded
        through ctypes, so any Python 3 and ABI serves); without them it is py3-none-any."""

        def finalize_options(self):
            lib, kernels = _bundled()
            if lib is not None or any(d.name == "host" for d in kernels):
                # platlib: the files go to the wheel's root, tagged for this platform
                self.distribution.has_ext_modules = lambda: True
            super().finalize_options()

        def get_tag(self):
            python, abi, plat = super().get_tag()
            if not self.root_is_pure:
                python, abi = "py3", "none"
            return python, abi, plat

    cmdclass["bdist_wheel"] = BdistWheelPlatform
except ImportError:   # no wheel package: pip builds no wheel either
    pass

setup(cmdclass=cmdclass)
