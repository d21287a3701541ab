"""Kernel directories, manifests, contexts and loaded kernels, cached for the process.

Kernel directories, searched in order for ``<spec>.manifest.json`` (spec = the file stem in specs/,
e.g. ``flash_adamw``):
1. ``$QOPT_KERNEL_DIR`` (one directory, or several separated by ``os.pathsep``), for both backends;
   it replaces the default search path (2 or 3), so list the shipped kernels' directories in it too
   (``qopt.default_kernel_dirs()``) to keep them;
2. otherwise the directories bundled in the package (``qopt/kernels/{fatbin,ptx}`` for CUDA,
   ``qopt/kernels/host`` then the CUDA ones for the host backend, which takes the first manifest
   with a ``host`` field);
3. otherwise the build tree of the source checkout (``<repo>/build/kernels/...``, same sub-folders).

For the host backend a CUDA manifest is still found (it describes the streams, so state can be
created), but stepping with it fails with QOPT_ERROR_UNSUPPORTED until a manifest with a ``host``
field (the host backend, docs/abi.md) is in one of the directories.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from ctypes import byref, c_void_p
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import _capi as C

_lock = threading.RLock()


def default_kernel_dirs(backend: int) -> List[Path]:
    """The kernel directories searched when $QOPT_KERNEL_DIR is not set: the package's bundled
    ones, else the build tree's (whether they exist or not)."""
    sub = ["fatbin", "ptx"] if backend == C.BACKEND_CUDA else ["host", "fatbin", "ptx"]
    bundled = Path(__file__).resolve().parent / "kernels"
    dirs = [bundled / s for s in sub if (bundled / s).is_dir()]
    if dirs:
        return dirs
    build = C.build_dir() / "kernels"
    return [build / s for s in sub]


def kernel_dirs(backend: int) -> List[Path]:
    """The kernel directories searched, in order: $QOPT_KERNEL_DIR's (which replace the default
    ones, not add to them), else default_kernel_dirs(backend)."""
    env = os.environ.get("QOPT_KERNEL_DIR")
    if env:
        return [Path(d) for d in env.split(os.pathsep) if d]
    return default_kernel_dirs(backend)


def read_manifest(path: Path) -> dict:
    """A manifest's JSON object; a file that is not one is a QoptError (QOPT_ERROR_MANIFEST, as
    the runtime's own reading of it would be) naming the file and where its JSON went wrong."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise C.QoptError("reading a kernel manifest", C.ERROR_MANIFEST,
                          f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg} (character "
                          f"{e.pos})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("kernel"), str):
        raise C.QoptError("reading a kernel manifest", C.ERROR_MANIFEST,
                          f"{path}: not a kernel manifest (a JSON object with a \"kernel\" "
                          f"name)")
    return doc


def _has_host(path: Path) -> bool:
    try:
        return "host" in json.loads(path.read_text())
    except (OSError, ValueError, TypeError):
        return False


def _has_cuda_binary(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict):
            return False
    except (OSError, ValueError):
        return False
    listed = [path.parent / b["path"] for b in doc.get("binaries", []) if "path" in b]
    stem = doc.get("kernel", "")
    beside = [path.parent / f"{stem}.{ext}" for ext in ("cubin", "fatbin", "ptx")]
    spec = path.name[: -len(".manifest.json")]
    beside += [path.parent / f"{spec}.{ext}" for ext in ("cubin", "fatbin", "ptx")]
    return any(p.is_file() for p in listed + beside)


def find_manifest(spec: str, backend: int) -> Path:
    """The first `<spec>.manifest.json` in kernel_dirs(backend); for the host backend the first
    one with a "host" field and for CUDA the first with a binary beside it, if there is one."""
    dirs = kernel_dirs(backend)
    found = [d / f"{spec}.manifest.json" for d in dirs if (d / f"{spec}.manifest.json").is_file()]
    if backend == C.BACKEND_HOST:
        with_host = [p for p in found if _has_host(p)]
        if with_host:
            return with_host[0]
    else:
        with_binary = [p for p in found if _has_cuda_binary(p)]
        if with_binary:
            return with_binary[0]
    if found:
        return found[0]
    tried = ", ".join(str(d) for d in dirs) or "no directory"
    variant = _missing_variant(spec, backend, tried)
    if variant:
        raise FileNotFoundError(variant)
    if os.environ.get("QOPT_KERNEL_DIR"):
        default = os.pathsep.join(str(d) for d in default_kernel_dirs(backend))
        raise FileNotFoundError(
            f"qopt: no kernel '{spec}' ({spec}.manifest.json) in the directories of "
            f"QOPT_KERNEL_DIR: {tried}. QOPT_KERNEL_DIR replaces the default search path; to "
            f"keep the shipped kernels, list their directories too (qopt.default_kernel_dirs(): "
            f"{default})")
    raise FileNotFoundError(
        f"qopt: no kernel '{spec}' ({spec}.manifest.json); searched {tried}. Build the kernels "
        f"(ninja -C build), or set QOPT_KERNEL_DIR to the directories that hold them "
        f"('{os.pathsep}'-separated; it replaces this search path)")


#: file name suffixes of a spec's kernel variants (docs/abi.md, "Kernel variants")
_TYPE_SUFFIXES = ("bf16", "f16", "f32")
_TYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def _missing_variant(spec: str, backend: int, tried: str) -> Optional[str]:
    """The message for a missing kernel variant `<stem>.f32`, `<stem>.scaled`, ... whose spec's
    own kernel `<stem>` is there: which variant, and the qopt-opt command that makes it beside
    the spec's kernel. None where `spec` is no variant or its spec's kernel is missing too."""
    parts = spec.split(".")
    i = len(parts)
    while i > 1 and parts[i - 1] in _TYPE_SUFFIXES + ("scaled",):
        i -= 1
    stem, suffixes = ".".join(parts[:i]), parts[i:]
    if not suffixes:
        return None
    try:
        base = find_manifest(stem, backend)
    except FileNotFoundError:
        return None
    flags, what = [], []
    for sfx in suffixes:
        if sfx == "scaled":
            flags.append("--grad-scaling")
            what.append("with GradScaler's unscale and inf/NaN skip fused (a step under "
                        "torch.amp.GradScaler asks for it)")
        else:
            flags.append(f"--param-type={sfx}")
            what.append(f"for {_TYPE_NAMES[sfx]} parameters and gradients")
    try:
        if json.loads(base.read_text()).get("mode") == "fast":
            flags.append("--mode=fast")
    except (OSError, ValueError, AttributeError):
        pass
    emit, ext = (("host-library", "so") if backend == C.BACKEND_HOST else ("fatbin", "fatbin"))
    out = base.parent / f"{spec}.{ext}"
    return (f"qopt: no kernel variant '{spec}' ({spec}.manifest.json), the kernel of spec "
            f"'{stem}' {' and '.join(what)}; searched {tried}. The spec's own kernel is "
            f"{base}; make the variant beside it with\n    qopt-opt {stem}.qopt "
            f"{' '.join(flags)} --emit={emit} -o {out}\n(python/README.md, \"Your own spec\", "
            f"builds every variant an optimizer may ask for)")


class StreamSpec:
    __slots__ = ("index", "name", "state", "role", "dtype", "per", "per_size")

    def __init__(self, index, info: C.StreamInfo):
        self.index = index
        self.name = info.name.decode()
        self.state = (info.state or b"").decode()
        self.role = info.role
        self.dtype = info.dtype
        self.per = info.per
        self.per_size = info.per_size


class KernelSpec:
    """What the optimizers need from one manifest: streams, hyperparameters, tables, uniforms
    (``num_uniforms`` counts the step reductions' slots after the evaluated ones, whose
    expressions are ``uniform_exprs``), the kinds of its step reductions."""

    def __init__(self, path: Path):
        self.path = path
        self.registry = _registry_for(path.parent)
        doc = read_manifest(path)
        name = doc["kernel"]
        manifest = c_void_p()
        with _lock:
            if name not in _registry_kernels[path.parent]:
                C.call("qopt_registry_add_manifest_file", self.registry, str(path).encode())
                _registry_kernels[path.parent].add(name)
        C.call("qopt_registry_get_manifest", self.registry, name.encode(), byref(manifest))
        self.manifest = manifest  # kept for the process's life
        info = C.ManifestInfo()
        C.call("qopt_manifest_get_info", manifest, byref(info))
        self.kernel = info.kernel.decode()
        self.num_streams = info.num_streams
        self.num_uniforms = info.num_uniforms
        self.param_dtype = info.param_dtype
        self.grad_dtype = info.grad_dtype
        self.error_bits_dtype = info.error_bits_dtype
        self.tile_elements = info.launch.tile_elements
        self.streams = []
        for i in range(info.num_streams):
            s = C.StreamInfo()
            C.call("qopt_manifest_get_stream", manifest, i, byref(s))
            self.streams.append(StreamSpec(i, s))
        self.hypers: Dict[str, Tuple[float, bool, bool]] = {}
        for i in range(info.num_hypers):
            h = C.HyperInfo()
            C.call("qopt_manifest_get_hyper", manifest, i, byref(h))
            self.hypers[h.name.decode()] = (h.default_value, bool(h.has_default), bool(h.is_bool))
        self.tables = []
        for i in range(info.num_tables):
            t = C.TableInfo()
            C.call("qopt_manifest_get_table", manifest, i, byref(t))
            self.tables.append((t.name.decode(), t.state.decode()))
        # Reductions: a step reduction's value is the uniform slot after the evaluated ones; its
        # kind picks the all-reduce of its rows between the split step's phases (sum, norm: SUM;
        # max: MAX).
        self.step_kinds: List[str] = []
        for i in range(info.num_reductions):
            r = C.ReductionInfo()
            C.call("qopt_manifest_get_reduction", manifest, i, byref(r))
            if r.scope == C.SCOPE_STEP:
                self.step_kinds.append(C.REDUCTION_KINDS[r.kind])
        self.num_step_reductions = info.num_step_reductions
        # The uniform expressions (not in the C API): for evaluating them on the device.
        uniforms = doc.get("uniforms", [])
        self.uniform_exprs = [None] * len(uniforms)
        for pos, u in enumerate(uniforms):
            self.uniform_exprs[u.get("index", pos)] = u["expr"]
        self.param_stream = next(s.index for s in self.streams if s.role == C.ROLE_PARAM)
        self.grad_stream = next(s.index for s in self.streams if s.role == C.ROLE_GRAD)

    def state_layout(self, numel: int, host_tables: Optional[List[ctypes.Array]] = None):
        out = (C.BufferLayout * self.num_streams)()
        if host_tables:
            arr = (ctypes.POINTER(ctypes.c_float) * len(host_tables))(
                *[ctypes.cast(t, ctypes.POINTER(ctypes.c_float)) for t in host_tables])
            C.call("qopt_manifest_state_layout", self.manifest, numel, arr, len(host_tables), out,
                   self.num_streams)
        else:
            C.call("qopt_manifest_state_layout", self.manifest, numel, None, 0, out,
                   self.num_streams)
        return list(out)

    def evaluate_uniforms(self, hypers: "ctypes.Array", num_hypers: int, step: int) -> List[float]:
        out = (ctypes.c_float * max(1, self.num_uniforms))()
        C.call("qopt_manifest_evaluate_uniforms", self.manifest, hypers, num_hypers, step, out,
               self.num_uniforms)
        return list(out)[: self.num_uniforms]


_registries: Dict[Path, c_void_p] = {}
_registry_kernels: Dict[Path, set] = {}
_specs: Dict[Tuple[str, int], KernelSpec] = {}
_contexts: Dict[Tuple[int, int], c_void_p] = {}
_kernels: Dict[Tuple[int, int, str], c_void_p] = {}


def _registry_for(directory: Path) -> c_void_p:
    with _lock:
        reg = _registries.get(directory)
        if reg is None:
            reg = c_void_p()
            C.call("qopt_registry_create", byref(reg))
            _registries[directory] = reg
            _registry_kernels[directory] = set()
        return reg


def kernel_spec(spec: str, backend: int) -> KernelSpec:
    with _lock:
        key = (spec, backend)
        ks = _specs.get(key)
        if ks is None:
            ks = KernelSpec(find_manifest(spec, backend))
            _specs[key] = ks
        return ks


def context(backend: int, device: int) -> c_void_p:
    with _lock:
        ctx = _contexts.get((backend, device))
        if ctx is None:
            ctx = c_void_p()
            C.call("qopt_context_create", backend, device, byref(ctx))
            _contexts[(backend, device)] = ctx
        return ctx


def kernel(ks: KernelSpec, backend: int, device: int) -> c_void_p:
    """A loaded kernel, kept for the process's life (graphs captured with it stay replayable)."""
    with _lock:
        key = (backend, device, str(ks.path))
        k = _kernels.get(key)
        if k is None:
            ctx = context(backend, device)
            k = c_void_p()
            C.call("qopt_kernel_create", ctx, ks.registry, ks.kernel.encode(), byref(k))
            _kernels[key] = k
        return k


def create_kernel(ks: KernelSpec, backend: int, device: int) -> c_void_p:
    """A new kernel handle of its own (its own staging buffers: a CUDA graph may capture one
    step of each handle, so every launch of an optimizer step gets its own handle)."""
    ctx = context(backend, device)
    k = c_void_p()
    C.call("qopt_kernel_create", ctx, ks.registry, ks.kernel.encode(), byref(k))
    return k


def destroy_kernels(handles) -> None:
    """Destroys kernel handles (qopt_kernel_destroy waits for their in-flight copies)."""
    for k in list(handles):
        try:
            C.lib().qopt_kernel_destroy(k)
        except Exception:  # never raise from a finalizer
            pass


def cuda_device_count() -> int:
    n = ctypes.c_int32(0)
    if C.lib().qopt_cuda_device_count(byref(n)) != C.SUCCESS:
        return 0
    return n.value
