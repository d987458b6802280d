"""The launch path: a prebuilt parameter block and cuLaunchKernelEx on torch's current stream.

`ParamBlock` allocates, once per kernel, one ctypes slot per parameter (c_void_p for pointers,
c_int32/c_int64/c_float/... for scalars) and the `void*[]` array of their addresses that
cuLaunchKernelEx reads. A launch writes the new values into the slots and passes the array's
address; the driver copies the values at launch time, so the block is reused immediately.
The `CUlaunchConfig` (with the cluster attribute, when there is one) is also built once.
`DirectLaunch` holds what the fast path's launch (fast_call.py) calls: one untyped ctypes
cuLaunchKernel with the parameter array prebuilt, once a ctypes launch loaded the function.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .cuda_ctypes import CtypesDriver
from .cuda_ctypes import untyped
from .driver import (
    bindings_module,
    check,
    driver_module,
    ensure_context,
    ensure_context_fast,
    primary_context,
)
from .module import LoadedKernel

_UNDECIDED = object()
_MAP_BYTES = 128
_CTYPES: dict[str, type] = {
    "tensormap": ctypes.c_uint64 * (_MAP_BYTES // 8),
    "pointer": ctypes.c_void_p,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "bool": ctypes.c_bool,
    "float16": ctypes.c_uint16,  # the value's bits (the checker encodes them)
    "bfloat16": ctypes.c_uint16,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


class ParamBlock:
    """ctypes storage for a kernel's parameters plus the `void*` array pointing at each.
    A "tensormap" slot holds 128 bytes, filled from the ctypes array tensor_map.py makes."""

    def __init__(self, kinds: Sequence[str]):
        self.kinds = tuple(kinds)
        self._slots = [_CTYPES[k]() for k in self.kinds]
        self._array = (ctypes.c_void_p * max(1, len(self._slots)))(
            *[ctypes.addressof(s) for s in self._slots]
        )
        self.address: int = ctypes.addressof(self._array) if self._slots else 0
        self._maps = tuple(i for i, k in enumerate(self.kinds) if k == "tensormap")
        self._plain = tuple((self._slots[i], i) for i, k in enumerate(self.kinds)
                            if k != "tensormap")
        self._map_in: dict[int, Any] = {}  # map slot -> the blob last copied into it
        #: map slot -> (address, shape) of the map it holds, where the fast path wrote it
        self.map_held: dict[int, tuple] = {}
        #: what the fast path last put in all map slots (its key: the remembered signature and
        #: the maps' tensor addresses); None once anything else wrote one
        self.maps_key: Any = None

    def slot(self, i: int) -> Any:
        """The ctypes object of parameter `i` (write `.value`; the fast path does, under the
        launcher's lock)."""
        return self._slots[i]

    def fill(self, values: Sequence[Any]) -> None:
        if not self._maps:
            for slot, v in zip(self._slots, values):
                slot.value = v
            return
        for slot, i in self._plain:
            slot.value = values[i]
        for i in self._maps:
            if values[i]:  # 0: not made (no launch follows)
                self.set_map(i, values[i])

    def set_map(self, i: int, blob: Any, held: tuple | None = None) -> None:
        """Copy a tensor map's 128 bytes into slot `i`, unless that blob is already there (the
        encoder returns one object per address and shape); `held`: its (address, shape)."""
        if self._map_in.get(i) is not blob:
            ctypes.memmove(self._slots[i], blob, _MAP_BYTES)
            self._map_in[i] = blob
        self.map_held[i] = held
        self.maps_key = None

    def values(self) -> list[Any]:
        return [bytes(s) if k == "tensormap" else s.value or 0
                for s, k in zip(self._slots, self.kinds)]


class Launcher:
    """Launches one LoadedKernel with fixed block and cluster dims; thread-safe."""

    def __init__(
        self,
        kernel: LoadedKernel,
        kinds: Sequence[str],
        block: tuple[int, int, int],
        cluster: tuple[int, int, int] | None = None,
    ):
        self.kernel = kernel
        self.params = ParamBlock(kinds)
        self.block = block
        self.cluster = cluster
        self._config: Any = None
        self._streams: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._call_name = f"cuLaunchKernelEx({kernel.name})"
        self._lib: Any = _UNDECIDED  # the ctypes fast path's libcuda, or None (decided at launch)
        self._ctx = ctypes.c_void_p()
        self._handles: dict[tuple[int, int], int] = {}

    def _fast_path(self) -> Any:
        """libcuda for cuLaunchKernel through ctypes when it applies: the ctypes driver (not
        cuda-bindings, not a test double) and no cluster attribute. Asked at the first launch,
        so that making a kernel touches no driver."""
        drv = driver_module()
        return drv.lib if isinstance(drv, CtypesDriver) and self.cluster is None else None

    @staticmethod
    def _structs() -> Any:
        """Where CUlaunchConfig, CUstream and cuLaunchKernelEx come from: cuda-bindings, unless
        the driver API is a test double (which provides them)."""
        drv = driver_module()
        return bindings_module() if isinstance(drv, CtypesDriver) else drv

    def _make_config(self) -> Any:
        drv = self._structs()
        config = drv.CUlaunchConfig()
        config.blockDimX, config.blockDimY, config.blockDimZ = self.block
        if self.cluster is not None:
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = self.cluster
            config.attrs = [attr]
            config.numAttrs = 1
        else:
            config.numAttrs = 0
        return config

    def _stream(self, handle: int) -> Any:
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self._structs().CUstream(handle)
        return s

    def launch(
        self,
        values: Sequence[int | float],
        grid: tuple[int, int, int],
        smem: int,
        device: int,
        stream: int,
    ) -> None:
        """Launch on `device` and the stream with raw handle `stream` (0: the legacy default)."""
        if self.cluster is not None:
            for g, c, axis in zip(grid, self.cluster, "xyz"):
                if g % c:
                    raise ValueError(f"grid.{axis}={g} is not a multiple of cluster.{axis}={c}")
        if 0 in grid:
            return  # an empty grid launches nothing (the driver would reject it)
        if self._lib is _UNDECIDED:
            self._lib = self._fast_path()
        if self._lib is not None:
            return self._launch_ctypes(values, grid, smem, device, stream)
        function = self.kernel.function(device, smem)
        ensure_context(device)
        drv = self._structs()
        if not isinstance(function, drv.CUfunction):
            function = drv.CUfunction(int(function))
        with self._lock:
            if self._config is None:
                self._config = self._make_config()
            config = self._config
            config.gridDimX, config.gridDimY, config.gridDimZ = grid
            config.sharedMemBytes = smem
            config.hStream = self._stream(stream)
            self.params.fill(values)
            result = drv.cuLaunchKernelEx(config, function, self.params.address, 0)
        if result[0]:  # anything but CUDA_SUCCESS
            check(result, self._call_name)

    def uses_ctypes(self) -> bool:
        """Whether launches go through libcuda by ctypes (False until the first launch)."""
        return self._lib is not _UNDECIDED and self._lib is not None

    def direct(self) -> DirectLaunch | None:
        """The pieces of a one-call launch for the fast path (fast_call.py); None unless
        launches go through ctypes (known after the first launch)."""
        return DirectLaunch(self) if self.uses_ctypes() else None

    def function_on(self, device: int, smem: int) -> tuple[int, int] | None:
        """(function handle, primary context handle) of this kernel on `device` with `smem`
        bytes of dynamic shared memory; None unless a ctypes launch there loaded the function
        and made the context current already."""
        handle = self._handles.get((device, smem)) if self.uses_ctypes() else None
        primary = primary_context(device)
        return None if handle is None or primary is None else (handle, primary)

    def _launch_ctypes(self, values, grid, smem: int, device: int, stream: int) -> None:
        """cuLaunchKernel through ctypes: one foreign call, no driver-binding objects."""
        handle = self._handles.get((device, smem))
        if handle is None:
            handle = self._handles[(device, smem)] = int(self.kernel.function(device, smem))
        ensure_context_fast(device, self._lib, self._ctx)
        bx, by, bz = self.block
        with self._lock:
            self.params.fill(values)
            err = self._lib.cuLaunchKernel(handle, grid[0], grid[1], grid[2], bx, by, bz, smem,
                                           stream or None, self.params.address, None)
        if err:
            check((driver_module().CUresult(err),), f"cuLaunchKernel({self.kernel.name})")


class DirectLaunch:
    """What the fast path's generated call (fast_call.py) needs to launch by one foreign call:
    cuLaunchKernel and cuCtxGetCurrent through untyped ctypes function pointers (every argument
    a ctypes object, None or an int below 2^31: half the conversion cost of typed arguments),
    the parameter array's address, the block whose slots the caller writes while holding
    `lock`, and the stream handles as ctypes objects. The call reads, in this order:

        lock.acquire(); <write the slots>
        if get_ctx(ctx_ref) or ctx.value != primary: ensure_context(device)
        err = cu_launch(function, gx, gy, gz, bx, by, bz, smem, stream_arg(s), params, None)
        lock.release(); if err: failed(err)

    One per Launcher: `ctx` is scratch space written under `lock`."""

    __slots__ = ("block", "ctx", "ctx_ref", "cu_launch", "get_ctx", "lock", "name", "params",
                 "streams")

    def __init__(self, launcher: Launcher):
        lib = launcher._lib
        self.cu_launch = untyped(lib, "cuLaunchKernel")
        self.get_ctx = untyped(lib, "cuCtxGetCurrent")
        self.ctx = ctypes.c_void_p()  # cuCtxGetCurrent writes here
        self.ctx_ref = ctypes.byref(self.ctx)
        self.params = ctypes.c_void_p(launcher.params.address or None)
        #: the parameter block, whose slots the caller writes while holding `lock`
        self.block = launcher.params
        self.lock = launcher._lock
        self.name = launcher.kernel.name
        #: raw stream handle -> the ctypes object cuLaunchKernel takes (0: NULL)
        self.streams: dict[int, Any] = {0: None}

    def stream_arg(self, stream: int) -> Any:
        """The ctypes argument for raw stream handle `stream` (kept: the next call finds it in
        `streams`)."""
        s = self.streams.get(stream)
        if s is None and stream:
            if len(self.streams) > 64:
                self.streams.clear()
                self.streams[0] = None
            s = self.streams[stream] = ctypes.c_void_p(stream)
        return s

    def failed(self, err: int) -> None:
        """Raise the CudaError of a cuLaunchKernel that returned `err`."""
        check((driver_module().CUresult(err),), f"cuLaunchKernel({self.name})")


_raw_stream: Callable[[int], int] | None = None


def current_stream(device: int) -> int:
    """Raw handle of torch's current stream on `device`."""
    return raw_stream_function()(device)


def raw_stream_function() -> Callable[[int], int]:
    """The function `current_stream` calls (found once): device index -> raw stream handle."""
    global _raw_stream
    if _raw_stream is None:
        _raw_stream = _find_raw_stream()
    return _raw_stream


def _find_raw_stream() -> Callable[[int], int]:
    """The cheapest way to ask torch for its current stream: the private
    `torch._C._cuda_getCurrentRawStream` (what Triton's launcher calls: one C call, no Stream
    object), else the public `torch.cuda.current_stream(device).cuda_stream`."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream
