"""The CUDA driver entry points a launch needs, through ctypes on libcuda.

Importing cuda-bindings' driver module costs 20-55 ms a process; a process that finds its kernels
in the cache should not pay that to load a cubin and launch it. `CtypesDriver` offers the few calls
the runtime makes (context, module load, function attributes, cuLaunchKernel) with cuda-bindings'
calling convention: each returns `(CUresult, *values)`, handles are ints. Launches with a cluster
attribute (cuLaunchKernelEx and its config structs) still go through cuda-bindings.
"""

from __future__ import annotations

import ctypes
from typing import Any

_c = ctypes
_ptr = _c.c_void_p


class CUresult(int):
    """A driver status code that also knows its name (as cuda-bindings' enum does)."""

    _lib: Any = None

    @property
    def name(self) -> str:
        text = _c.c_char_p()
        if self._lib is None or self._lib.cuGetErrorName(int(self), _c.byref(text)) or not text:
            return f"CUresult({int(self)})"
        return text.value.decode()


class CUfunction_attribute:  # noqa: N801 - cuda-bindings' name (values from cuda.h)
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_FUNC_ATTRIBUTE_PTX_VERSION = 5
    CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6
    CU_FUNC_ATTRIBUTE_CACHE_MODE_CA = 7
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9


# entry point -> argument types (all return CUresult, an int)
_SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [_c.c_uint],
    "cuDeviceGet": [_c.POINTER(_c.c_int), _c.c_int],
    "cuDevicePrimaryCtxRetain": [_c.POINTER(_ptr), _c.c_int],
    "cuCtxGetCurrent": [_c.POINTER(_ptr)],
    "cuCtxSetCurrent": [_ptr],
    "cuModuleLoadData": [_c.POINTER(_ptr), _ptr],
    "cuModuleGetFunction": [_c.POINTER(_ptr), _ptr, _c.c_char_p],
    "cuModuleUnload": [_ptr],
    "cuFuncSetAttribute": [_ptr, _c.c_int, _c.c_int],
    "cuFuncGetAttribute": [_c.POINTER(_c.c_int), _c.c_int, _ptr],
    "cuLaunchKernel": [_ptr, *[_c.c_uint] * 7, _ptr, _ptr, _ptr],
    "cuGetErrorName": [_c.c_int, _c.POINTER(_c.c_char_p)],
    "cuGetErrorString": [_c.c_int, _c.POINTER(_c.c_char_p)],
    # map, data type, rank, address, dims, strides (bytes), box, element strides, interleave,
    # swizzle, L2 promotion, out-of-bounds fill
    "cuTensorMapEncodeTiled": [_c.POINTER(_c.c_uint64), _c.c_int, _c.c_uint, _ptr,
                               _c.POINTER(_c.c_uint64), _c.POINTER(_c.c_uint64),
                               _c.POINTER(_c.c_uint32), _c.POINTER(_c.c_uint32), _c.c_int,
                               _c.c_int, _c.c_int, _c.c_int],
}


def load_libcuda() -> Any:
    """libcuda with the entry points above typed, or None where it cannot be loaded."""
    try:
        lib = _c.CDLL("libcuda.so.1")
    except OSError:
        return None
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = _c.c_int
    return lib


def untyped(lib: Any, name: str) -> Any:
    """A second, untyped function pointer to entry point `name` of `lib` (returning int): ctypes
    converts its arguments by their Python type (a ctypes object as itself, None as NULL, an int
    as a C int), which costs half of what typed `argtypes` conversions do. For the launch path
    only, with every argument a ctypes object, None or an int below 2^31."""
    fn = lib[name] if isinstance(lib, _c.CDLL) else getattr(lib, name)
    if isinstance(lib, _c.CDLL):
        fn.restype = _c.c_int
    return fn


class CtypesDriver:
    """The subset of `cuda.bindings.driver` the runtime uses, on libcuda through ctypes."""

    CUfunction_attribute = CUfunction_attribute

    def __init__(self, lib: Any):
        self.lib = lib
        CUresult._lib = lib

    def CUresult(self, err: int) -> CUresult:  # noqa: N802 - cuda-bindings' name
        return CUresult(err)

    def _out(self, err: int, value: Any) -> tuple:
        return CUresult(err), value

    def cuInit(self, flags: int) -> tuple:  # noqa: N802
        return (CUresult(self.lib.cuInit(flags)),)

    def cuDeviceGet(self, ordinal: int) -> tuple:  # noqa: N802
        dev = _c.c_int()
        return self._out(self.lib.cuDeviceGet(_c.byref(dev), ordinal), dev.value)

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple:  # noqa: N802
        ctx = _ptr()
        return self._out(self.lib.cuDevicePrimaryCtxRetain(_c.byref(ctx), dev), ctx.value or 0)

    def cuCtxGetCurrent(self) -> tuple:  # noqa: N802
        ctx = _ptr()
        err = self.lib.cuCtxGetCurrent(_c.byref(ctx))
        return self._out(err, ctx.value)  # None when no context is current

    def cuCtxSetCurrent(self, ctx: int) -> tuple:  # noqa: N802
        return (CUresult(self.lib.cuCtxSetCurrent(int(ctx))),)

    def cuModuleLoadData(self, image: int) -> tuple:  # noqa: N802
        module = _ptr()
        return self._out(self.lib.cuModuleLoadData(_c.byref(module), image), module.value or 0)

    def cuModuleGetFunction(self, module: int, name: bytes) -> tuple:  # noqa: N802
        fn = _ptr()
        err = self.lib.cuModuleGetFunction(_c.byref(fn), int(module), name)
        return self._out(err, fn.value or 0)

    def cuModuleUnload(self, module: int) -> tuple:  # noqa: N802
        return (CUresult(self.lib.cuModuleUnload(int(module))),)

    def cuFuncSetAttribute(self, fn: int, attr: int, value: int) -> tuple:  # noqa: N802
        return (CUresult(self.lib.cuFuncSetAttribute(int(fn), int(attr), value)),)

    def cuFuncGetAttribute(self, attr: int, fn: int) -> tuple:  # noqa: N802
        value = _c.c_int()
        return self._out(self.lib.cuFuncGetAttribute(_c.byref(value), int(attr), int(fn)),
                         value.value)

    def cuGetErrorString(self, err: int) -> tuple:  # noqa: N802
        text = _c.c_char_p()
        return self._out(self.lib.cuGetErrorString(int(err), _c.byref(text)), text.value or b"")
