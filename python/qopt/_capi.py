"""ctypes binding of the part of libqopt_runtime's C API (runtime/include/qopt/runtime.h) that the
optimizers use. Every call goes through :func:`check`, which raises :class:`QoptError` with
``qopt_last_error()`` on any status other than ``QOPT_SUCCESS``.

The library is found, in this order, at
1. ``$QOPT_RUNTIME_LIBRARY`` (a path to the ``.so``);
2. ``qopt/lib/libqopt_runtime.so`` inside this package (a bundled install, see setup.py);
3. the build tree of the source checkout this file lives in
   (``<repo>/build/runtime/libqopt_runtime.so``, or ``$QOPT_BUILD_DIR/runtime/...``).
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int32, c_int64, c_size_t,
                    c_uint8, c_uint64, c_void_p)
from pathlib import Path
from typing import List, Optional

__all__ = ["QoptError", "lib", "check", "library_path"]

# qopt_status
SUCCESS = 0
ERROR_MANIFEST = 4
ERROR_UNSUPPORTED = 10
STATUS_NAMES = {
    0: "QOPT_SUCCESS", 1: "QOPT_ERROR_INVALID_ARGUMENT", 2: "QOPT_ERROR_OUT_OF_MEMORY",
    3: "QOPT_ERROR_IO", 4: "QOPT_ERROR_MANIFEST", 5: "QOPT_ERROR_NOT_FOUND",
    6: "QOPT_ERROR_NO_DRIVER", 7: "QOPT_ERROR_NO_DEVICE", 8: "QOPT_ERROR_CUDA",
    9: "QOPT_ERROR_MODULE_LOAD", 10: "QOPT_ERROR_UNSUPPORTED", 11: "QOPT_ERROR_VALIDATION",
    12: "QOPT_ERROR_CAPTURE", 13: "QOPT_ERROR_INTERNAL",
}

# qopt_dtype
DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8, DTYPE_UINT8, DTYPE_INT16 = 1, 2, 3, 4, 5, 6
DTYPE_NAMES = {1: "f32", 2: "bf16", 3: "f16", 4: "int8", 5: "uint8", 6: "int16"}
DTYPE_SIZES = {1: 4, 2: 2, 3: 2, 4: 1, 5: 1, 6: 2}

# qopt_stream_role
ROLE_PARAM, ROLE_ERROR_BITS, ROLE_GRAD, ROLE_STATE = 1, 2, 3, 4
ROLE_STATE_CODES, ROLE_STATE_SCALES, ROLE_STATE_ABSMAX = 5, 6, 7

# qopt_stream_per
PER_ELEMENT, PER_GROUP, PER_BLOCK = 1, 2, 3

# qopt_backend
BACKEND_HOST, BACKEND_CUDA = 0, 1

# qopt_init_kind
INIT_CALLER, INIT_FILL, INIT_FROM_MASTER, INIT_CODEBOOK_ZERO = 0, 1, 2, 3


class QoptError(RuntimeError):
    """A qopt runtime call failed. ``status`` is the qopt_status name (e.g. ``QOPT_ERROR_VALIDATION``)."""

    def __init__(self, function: str, status: int, message: str):
        self.function = function
        self.status_code = status
        self.status = STATUS_NAMES.get(status, f"status {status}")
        self.message = message
        super().__init__(f"{function} failed ({self.status}): {message}")


class LaunchInfo(Structure):
    _fields_ = [("threads_per_block", c_int32), ("elements_per_thread", c_int32),
                ("tile_elements", c_int64), ("descriptor_bytes", c_int64),
                ("shared_bytes", c_int64), ("suggested_blocks_per_sm", c_int32), ("waves", c_int32),
                ("min_tiles_per_block", c_int32), ("producer_warps", c_int32)]


class ManifestInfo(Structure):
    _fields_ = [("kernel", c_char_p), ("entry", c_char_p), ("optimizer", c_char_p),
                ("mode", c_char_p), ("arch", c_char_p), ("source", c_char_p),
                ("num_streams", c_size_t), ("num_hypers", c_size_t), ("num_uniforms", c_size_t),
                ("num_tables", c_size_t), ("num_args", c_size_t),
                ("param_dtype", c_int32), ("grad_dtype", c_int32), ("error_bits_dtype", c_int32),
                ("launch", LaunchInfo), ("num_numerics_counters", c_int32),
                ("num_reductions", c_size_t), ("num_step_reductions", c_size_t)]


# qopt_reduction_kind and qopt_reduction_scope
REDUCTION_KINDS = {1: "sum", 2: "mean", 3: "max", 4: "norm", 5: "rms"}
SCOPE_TENSOR, SCOPE_STEP = 0, 1


class ReductionInfo(Structure):
    """qopt_reduction_info: one of a manifest's reductions (kind, scope, index among its scope,
    a step reduction's uniform slot or -1)."""
    _fields_ = [("kind", c_int32), ("scope", c_int32), ("index", c_int64), ("uniform", c_int64)]


class StreamInfo(Structure):
    _fields_ = [("name", c_char_p), ("state", c_char_p), ("role", c_int32), ("dtype", c_int32),
                ("per", c_int32), ("per_size", c_int64), ("access", c_int32)]


class HyperInfo(Structure):
    _fields_ = [("name", c_char_p), ("default_value", c_double), ("has_default", c_int32),
                ("is_bool", c_int32)]


class TableInfo(Structure):
    _fields_ = [("name", c_char_p), ("state", c_char_p), ("dtype", c_int32), ("count", c_int64)]


class Hyper(Structure):
    _fields_ = [("name", c_char_p), ("value", c_double)]


class BufferLayout(Structure):
    _fields_ = [("name", c_char_p), ("role", c_int32), ("dtype", c_int32), ("per", c_int32),
                ("per_size", c_int64), ("count", c_int64), ("bytes", c_uint64), ("init", c_int32),
                ("fill_bits", c_uint64), ("fill_value", c_double)]


class DeviceInfo(Structure):
    _fields_ = [("backend", c_int32), ("ordinal", c_int32), ("cc_major", c_int32),
                ("cc_minor", c_int32), ("multiprocessors", c_int32), ("driver_version", c_int32),
                ("arch", c_char * 16), ("name", c_char * 256)]


class KernelInfo(Structure):
    _fields_ = [("backend", c_int32), ("format", c_int32), ("arch", c_char_p), ("origin", c_char_p),
                ("jit_log", c_char_p), ("max_blocks", c_int32)]


class TensorList(Structure):
    _fields_ = [("num_tensors", c_size_t), ("num_streams", c_size_t), ("numels", POINTER(c_int64)),
                ("data", POINTER(c_void_p)), ("bytes", POINTER(c_uint64)),
                ("dtypes", POINTER(c_int32)), ("names", POINTER(c_char_p))]


class Launch(Structure):
    """qopt_launch: one launch of qopt_step_many."""
    _fields_ = [("kernel", c_void_p), ("tensors", POINTER(TensorList)), ("hypers", POINTER(Hyper)),
                ("num_hypers", c_size_t), ("step", c_int64), ("device_uniforms", c_void_p),
                ("tables", POINTER(c_void_p)), ("num_tables", c_size_t),
                ("numerics_counters", c_void_p)]


# qopt_numerics_counter: the slots of a kernel's numerics counters (QOPT_NUMERICS_COUNTERS int64)
NUMERICS_COUNTERS = 2
COUNTER_SATURATED_GROUPS, COUNTER_NONFINITE_GROUPS = 0, 1


_P = c_void_p
_SIGNATURES = {
    "qopt_get_version": [POINTER(c_int32), POINTER(c_int32)],
    "qopt_cuda_device_count": [POINTER(c_int32)],
    "qopt_context_create": [c_int32, c_int32, POINTER(_P)],
    "qopt_context_get_device_info": [_P, POINTER(DeviceInfo)],
    "qopt_manifest_destroy": [_P],
    "qopt_manifest_get_info": [_P, POINTER(ManifestInfo)],
    "qopt_manifest_get_stream": [_P, c_size_t, POINTER(StreamInfo)],
    "qopt_manifest_get_hyper": [_P, c_size_t, POINTER(HyperInfo)],
    "qopt_manifest_get_table": [_P, c_size_t, POINTER(TableInfo)],
    "qopt_manifest_get_reduction": [_P, c_size_t, POINTER(ReductionInfo)],
    "qopt_manifest_evaluate_uniforms": [_P, POINTER(Hyper), c_size_t, c_int64, POINTER(ctypes.c_float),
                                        c_size_t],
    "qopt_manifest_state_layout": [_P, c_int64, POINTER(POINTER(ctypes.c_float)), c_size_t,
                                   POINTER(BufferLayout), c_size_t],
    "qopt_codebook_zero_code": [POINTER(ctypes.c_float), POINTER(c_uint8)],
    "qopt_error_bits_init": [c_int32, c_int32, c_void_p, c_int64, c_void_p, c_void_p],
    "qopt_error_bits_decode": [c_int32, c_int32, c_void_p, c_void_p, c_int64, c_void_p],
    "qopt_registry_create": [POINTER(_P)],
    "qopt_registry_destroy": [_P],
    "qopt_registry_add_manifest_file": [_P, c_char_p],
    "qopt_registry_get_manifest": [_P, c_char_p, POINTER(_P)],
    "qopt_kernel_create": [_P, _P, c_char_p, POINTER(_P)],
    "qopt_kernel_get_info": [_P, POINTER(KernelInfo)],
    "qopt_kernel_destroy": [_P],
    "qopt_validate": [_P, POINTER(TensorList), POINTER(c_void_p), c_size_t],
    "qopt_step": [_P, POINTER(TensorList), POINTER(Hyper), c_size_t, c_int64, POINTER(c_void_p),
                  c_size_t, c_void_p],
    "qopt_step_device_uniforms": [_P, POINTER(TensorList), c_void_p, POINTER(c_void_p), c_size_t,
                                  c_void_p],
    "qopt_step_many": [POINTER(Launch), c_size_t, c_void_p],
    "qopt_step_partials_shape": [POINTER(Launch), c_size_t, POINTER(c_int64), POINTER(c_int64)],
    "qopt_step_many_partials": [POINTER(Launch), c_size_t, c_void_p, c_void_p],
    "qopt_step_many_from_partials": [POINTER(Launch), c_size_t, c_void_p, c_void_p],
    "qopt_context_forget_allocations": [_P],
}


def _repo_root() -> Path:
    # python/qopt/_capi.py -> the repository root
    return Path(__file__).resolve().parent.parent.parent


def build_dir() -> Path:
    env = os.environ.get("QOPT_BUILD_DIR")
    if env:
        p = Path(env)
        return p if p.is_absolute() else _repo_root() / p
    return _repo_root() / "build"


def library_candidates() -> List[Path]:
    env = os.environ.get("QOPT_RUNTIME_LIBRARY")
    if env:
        return [Path(env)]
    here = Path(__file__).resolve().parent
    return [here / "lib" / "libqopt_runtime.so", build_dir() / "runtime" / "libqopt_runtime.so"]


_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[Path] = None

# The runtime release whose structs the classes above mirror (QOPT_RUNTIME_VERSION / 100: while the
# major version is 0 each minor release may change them; 0.3 added min_tiles_per_block, 0.4 qopt_launch,
# 0.5 the numerics counters, 0.6 step reductions and the split step API, 0.7 launch.producer_warps).
RUNTIME_ABI = 7


def library_path() -> Path:
    lib()
    assert _lib_path is not None
    return _lib_path


def lib() -> ctypes.CDLL:
    """The loaded runtime library (loaded on first use)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    candidates = library_candidates()
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        tried = ", ".join(str(c) for c in candidates)
        raise ImportError(
            f"qopt: libqopt_runtime.so not found (tried {tried}); build it with "
            f"`ninja -C build qopt_runtime` or set QOPT_RUNTIME_LIBRARY to its path")
    handle = ctypes.CDLL(str(path))
    handle.qopt_last_error.restype = c_char_p
    handle.qopt_last_error.argtypes = []
    handle.qopt_status_string.restype = c_char_p
    handle.qopt_status_string.argtypes = [c_int32]
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.restype = c_int32
        fn.argtypes = argtypes
    rt, mf = c_int32(), c_int32()
    handle.qopt_get_version(ctypes.byref(rt), ctypes.byref(mf))
    if rt.value // 100 != RUNTIME_ABI:
        raise ImportError(
            f"qopt: {path} is runtime {rt.value // 10000}.{rt.value // 100 % 100}.{rt.value % 100}, "
            f"but this package's structs mirror the 0.{RUNTIME_ABI} ABI; use the runtime built from "
            f"the same source (ninja -C build qopt_runtime) or set QOPT_RUNTIME_LIBRARY to it")
    _lib, _lib_path = handle, path
    return handle


def last_error() -> str:
    return lib().qopt_last_error().decode("utf-8", "replace")


def check(status: int, function: str) -> None:
    """Raises QoptError for a failed call (status != QOPT_SUCCESS) with the runtime's message."""
    if status != SUCCESS:
        raise QoptError(function, status, last_error())


def call(name: str, *args) -> None:
    check(getattr(lib(), name)(*args), name)


def version() -> tuple:
    rt, mf = c_int32(), c_int32()
    call("qopt_get_version", ctypes.byref(rt), ctypes.byref(mf))
    return rt.value, mf.value
