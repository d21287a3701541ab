"""The wheel's tag (issue 25, item 6): a wheel that bundles libqopt_runtime.so and the host kernels
(shared objects of this machine) is tagged py3-none-<platform>, with them at the wheel's root; a
wheel without them (QOPT_BUNDLE=0) is py3-none-any. Builds both with pip from a copy of python/."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent


def _build(tmp_path, bundle: bool) -> Path:
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError as e:
        pytest.skip(f"setuptools and wheel are needed to build a wheel: {e}")
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip("pip is not available")
    src = tmp_path / ("src1" if bundle else "src0")
    shutil.copytree(PKG / "qopt", src / "qopt", ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(PKG / f, src / f)
    env = dict(os.environ)
    build = Path(env.get("QOPT_BUILD_DIR", PKG.parent / "build"))
    if not build.is_absolute():
        build = PKG.parent / build
    if bundle and not (build / "runtime" / "libqopt_runtime.so").is_file():
        pytest.skip(f"no runtime library in the build tree {build}")
    env["QOPT_BUILD_DIR"] = str(build)
    env["QOPT_BUNDLE"] = "1" if bundle else "0"
    out = tmp_path / ("w1" if bundle else "w0")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                        "-q", str(src), "-w", str(out)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


def test_bundled_wheel_is_tagged_for_its_platform(tmp_path):
    whl = _build(tmp_path, bundle=True)
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert whl.name == f"qopt-0.1.0-py3-none-{plat}.whl"
    names = zipfile.ZipFile(whl).namelist()
    assert "qopt/lib/libqopt_runtime.so" in names
    assert any(n.startswith("qopt/kernels/host/") and n.endswith(".so") for n in names)
    wheel_meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith("/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in wheel_meta


def test_unbundled_wheel_is_pure(tmp_path):
    whl = _build(tmp_path, bundle=False)
    assert whl.name == "qopt-0.1.0-py3-none-any.whl"
    assert not any(n.endswith(".so") for n in zipfile.ZipFile(whl).namelist())
