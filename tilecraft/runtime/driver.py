"""Thin access to the CUDA driver API (ctypes on libcuda, else cuda-bindings) on torch's context.

tilecraft shares torch's context: on first use for a device it initialises torch's CUDA state,
retains that device's primary context (the one the CUDA runtime, hence torch, uses) and makes it
current on the calling thread. Every driver call goes through `check`, which turns a CUresult other
than CUDA_SUCCESS into a `CudaDriverError` naming the call.
"""

from __future__ import annotations

import functools
import threading
from types import ModuleType
from typing import Any

from .errors import CudaDriverError, CudaUnavailableError

_primary: dict[int, Any] = {}
_primary_handle: dict[int, int] = {}
_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def driver_module() -> Any:
    """The driver API: libcuda through ctypes (cuda_ctypes.py) where it loads, else
    cuda-bindings' module (whose import costs 20-55 ms)."""
    from .cuda_ctypes import CtypesDriver, load_libcuda

    lib = load_libcuda()
    return CtypesDriver(lib) if lib is not None else bindings_module()


@functools.lru_cache(maxsize=1)
def bindings_module() -> ModuleType:
    """`cuda.bindings.driver` (or `cuda.cuda` from older cuda-python): for what the ctypes
    driver does not offer (cuLaunchKernelEx with its config structs)."""
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found]

        return driver
    except ImportError:
        try:
            from cuda import cuda as driver  # type: ignore[import-not-found,no-redef]

            return driver
        except ImportError as exc:
            raise CudaUnavailableError(
                "cuda-bindings is not installed; run `pip install cuda-bindings`"
            ) from exc


def check(result: tuple | Any, call: str) -> Any:
    """Unwrap a cuda-bindings return `(CUresult, *values)`; raise CudaDriverError on failure."""
    if isinstance(result, tuple):
        err, *values = result
    else:
        err, values = result, []
    if int(err) != 0:
        raise CudaDriverError(call, err, _error_string(err))
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _error_string(err: Any) -> str:
    """The driver's description of `err`, or "" when it cannot give one."""
    try:
        _, text = driver_module().cuGetErrorString(err)
    except Exception:  # noqa: BLE001 - the description is a nicety, the error name is enough
        return ""
    return text.decode() if isinstance(text, bytes) else str(text or "")


def gpu_available() -> bool:
    """True when torch sees at least one CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def require_gpu(arch: str = "") -> None:
    """Raise CudaUnavailableError with a clear message when this machine cannot launch kernels."""
    if not gpu_available():
        what = f"compiled for {arch}, " if arch else ""
        raise CudaUnavailableError(f"this machine has no CUDA GPU; {what}cannot launch")


def ensure_context(device: int) -> None:
    """Make torch's primary context of `device` current on this thread.

    The first call per device initialises torch's CUDA state and retains the primary context;
    later calls cost one cuCtxGetCurrent (torch may have switched devices on this thread since).
    """
    drv = driver_module()
    ctx = _primary.get(device)
    if ctx is None:
        import torch

        torch.cuda.init()
        with _lock:
            ctx = _primary.get(device)
            if ctx is None:
                check(drv.cuInit(0), "cuInit")
                dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
                ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                _primary[device] = ctx
                _primary_handle[device] = int(ctx)
    cur = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if cur is None or int(cur) != _primary_handle[device]:
        check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def ensure_context_fast(device: int, lib: Any, scratch: Any) -> None:
    """ensure_context through ctypes once the primary context is known (`scratch`: a
    ctypes.c_void_p the caller owns)."""
    handle = _primary_handle.get(device)
    if handle is None:
        ensure_context(device)
        return
    if lib.cuCtxGetCurrent(scratch) or scratch.value != handle:
        ensure_context(device)


def primary_context(device: int) -> int | None:
    """The handle of `device`'s primary context, once `ensure_context` has retained it."""
    return _primary_handle.get(device)


def device_capability(device: int) -> tuple[int, int]:
    """Compute capability of `device` as (major, minor)."""
    import torch

    return torch.cuda.get_device_capability(device)
