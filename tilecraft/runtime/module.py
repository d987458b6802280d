"""Loading a cubin into torch's context of a device and finding its entry function.

A `LoadedKernel` is loaded lazily, once per device (`cuModuleLoadData` into that device's primary
context, then `cuModuleGetFunction`). When the launch needs more than 48 KB of dynamic shared
memory, `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` is raised to what the launch asks for.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from .driver import check, driver_module, ensure_context, require_gpu
from .errors import CudaUnavailableError

DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024


class _PerDevice:
    """One device's loaded module and function, and the dynamic shared memory it allows."""

    __slots__ = ("module", "function", "max_dynamic_smem")

    def __init__(self, module: Any, function: Any,
                 max_dynamic_smem: int = DEFAULT_DYNAMIC_SMEM_LIMIT) -> None:
        self.module = module
        self.function = function
        self.max_dynamic_smem = max_dynamic_smem


class LoadedKernel:
    """One entry function of one cubin, loaded on demand on each device that launches it."""

    def __init__(self, cubin: bytes, name: str, arch: str):
        self.cubin = cubin
        self.name = name
        self.arch = arch
        self._devices: dict[int, _PerDevice] = {}
        self._lock = threading.Lock()

    def _check_arch(self, device: int) -> None:
        """sm_XYa runs only on X.Y; sm_XY runs on X.Z for Z >= Y (SASS compatibility)."""
        from .driver import device_capability

        major, minor = device_capability(device)
        digits = self.arch.removeprefix("sm_").rstrip("a")
        want_major, want_minor = int(digits[:-1]), int(digits[-1])
        exact = self.arch.endswith("a")
        ok = major == want_major and (minor == want_minor if exact else minor >= want_minor)
        if not ok:
            raise CudaUnavailableError(
                f"kernel `{self.name}` was compiled for {self.arch}, but cuda:{device} has compute "
                f"capability {major}.{minor}; recompile for sm_{major}{minor}"
            )

    def on(self, device: int) -> _PerDevice:
        """The loaded module and function on `device` (loading them on first use)."""
        entry = self._devices.get(device)
        if entry is not None:
            return entry
        require_gpu(self.arch)
        with self._lock:
            entry = self._devices.get(device)
            if entry is None:
                self._check_arch(device)
                ensure_context(device)
                drv = driver_module()
                image = ctypes.create_string_buffer(self.cubin, len(self.cubin))
                module = check(drv.cuModuleLoadData(ctypes.addressof(image)), "cuModuleLoadData")
                function = check(
                    drv.cuModuleGetFunction(module, self.name.encode()),
                    f"cuModuleGetFunction({self.name})",
                )
                # static shared memory (e.g. mbarriers) counts against the 48 KB a launch may
                # use without raising the function's limit
                static = check(drv.cuFuncGetAttribute(
                    drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function),
                    "cuFuncGetAttribute(SHARED_SIZE_BYTES)")
                entry = _PerDevice(module, function, DEFAULT_DYNAMIC_SMEM_LIMIT - int(static))
                self._devices[device] = entry
        return entry

    def function(self, device: int, dynamic_smem: int) -> Any:
        """The CUfunction on `device`, with its dynamic shared memory limit raised if needed."""
        entry = self.on(device)
        if dynamic_smem > entry.max_dynamic_smem:
            drv = driver_module()
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(
                drv.cuFuncSetAttribute(entry.function, attr, dynamic_smem),
                f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={dynamic_smem})",
            )
            entry.max_dynamic_smem = dynamic_smem
        return entry.function

    def attribute(self, device: int, name: str) -> int:
        """A CU_FUNC_ATTRIBUTE_* of the loaded function, e.g. "NUM_REGS", "LOCAL_SIZE_BYTES"."""
        drv = driver_module()
        attr = getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return check(
            drv.cuFuncGetAttribute(attr, self.on(device).function), f"cuFuncGetAttribute({name})"
        )

    def unload(self) -> None:
        """Unload from every device (the object can load again later)."""
        drv = driver_module()
        with self._lock:
            for device, entry in self._devices.items():
                ensure_context(device)
                check(drv.cuModuleUnload(entry.module), "cuModuleUnload")
            self._devices.clear()
