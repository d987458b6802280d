"""The launch path's driver calls, checked against a recording fake driver (no GPU needed).

The fake returns cuda-bindings-style `(CUresult, value)` tuples and uses the real cuda-bindings
struct types (CUlaunchConfig, CUstream, ...), which work without a driver.
"""

import ctypes

import pytest
import torch
from cuda.bindings import driver as real

from tilecraft.runtime import (
    CompiledCubin,
    CudaDriverError,
    CudaUnavailableError,
    LaunchArgumentError,
    LaunchSpec,
    Resources,
    RuntimeKernel,
    ScalarParam,
    TensorParam,
)
from tilecraft.runtime import driver as drv_mod
from tilecraft.runtime import launch as launch_mod
from tilecraft.runtime import module as module_mod
from tilecraft.runtime.launch import Launcher
from tilecraft.runtime.module import LoadedKernel

OK = real.CUresult.CUDA_SUCCESS


class FakeDriver:
    def __init__(self):
        self.calls = []
        self.launches = []
        self.current = real.CUcontext(0)
        self.fail_launch = False
        self.static_smem = 0

    def __getattr__(self, name):  # types and enums come from cuda-bindings
        return getattr(real, name)

    def cuInit(self, flags):
        self.calls.append("cuInit")
        return (OK,)

    def cuDeviceGet(self, ordinal):
        return OK, real.CUdevice(ordinal)

    def cuDevicePrimaryCtxRetain(self, dev):
        self.calls.append("retain")
        return OK, real.CUcontext(0x1000)

    def cuCtxGetCurrent(self):
        return OK, self.current

    def cuCtxSetCurrent(self, ctx):
        self.calls.append("setCurrent")
        self.current = ctx
        return (OK,)

    def cuModuleLoadData(self, image):
        assert ctypes.string_at(image, 4) == b"\x7fELF"
        self.calls.append("load")
        return OK, real.CUmodule(0x2000)

    def cuModuleGetFunction(self, module, name):
        self.calls.append(("function", name))
        return OK, real.CUfunction(0x3000)

    def cuFuncGetAttribute(self, attr, fn):
        return OK, self.static_smem if attr.name.endswith("SHARED_SIZE_BYTES") else 0

    def cuFuncSetAttribute(self, fn, attr, value):
        self.calls.append(("setAttribute", attr.name, value))
        return (OK,)

    def cuLaunchKernelEx(self, config, fn, params, extra):
        if self.fail_launch:
            return (real.CUresult.CUDA_ERROR_INVALID_VALUE,)
        ptrs = (ctypes.c_void_p * 2).from_address(params)
        values = (
            ctypes.c_void_p.from_address(ptrs[0]).value,
            ctypes.c_int32.from_address(ptrs[1]).value,
        )
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        block = (config.blockDimX, config.blockDimY, config.blockDimZ)
        self.launches.append(
            (grid, block, config.sharedMemBytes, int(config.hStream), config.numAttrs, values)
        )
        return (OK,)

    def cuGetErrorString(self, err):
        return OK, b"invalid argument"


@pytest.fixture
def fake(monkeypatch):
    f = FakeDriver()
    for mod in (drv_mod, module_mod, launch_mod):
        monkeypatch.setattr(mod, "driver_module", lambda: f)
    monkeypatch.setattr(module_mod, "require_gpu", lambda arch="": None)
    monkeypatch.setattr(drv_mod, "device_capability", lambda device: (9, 0))
    monkeypatch.setattr("torch.cuda.init", lambda: None)
    monkeypatch.setattr(drv_mod, "_primary", {})
    monkeypatch.setattr(drv_mod, "_primary_handle", {})
    return f


CUBIN = b"\x7fELF" + bytes(60)


def test_first_launch_loads_once_then_reuses(fake):
    kernel = LoadedKernel(CUBIN, "k", "sm_90a")
    launcher = Launcher(kernel, ["pointer", "int32"], (128, 1, 1))
    launcher.launch([0xABC0, 7], (4, 1, 1), 0, device=0, stream=0)
    launcher.launch([0xDEF0, 9], (2, 3, 1), 0, device=0, stream=0x55)
    assert fake.calls == ["cuInit", "retain", "setCurrent", "load", ("function", b"k")]
    assert fake.launches == [
        ((4, 1, 1), (128, 1, 1), 0, 0, 0, (0xABC0, 7)),
        ((2, 3, 1), (128, 1, 1), 0, 0x55, 0, (0xDEF0, 9)),
    ]


def test_large_dynamic_smem_raises_the_function_limit_once(fake):
    kernel = LoadedKernel(CUBIN, "k", "sm_90a")
    launcher = Launcher(kernel, ["pointer", "int32"], (256, 1, 1))
    for _ in range(2):
        launcher.launch([0, 1], (1, 1, 1), 100_000, device=0, stream=0)
    sets = [c for c in fake.calls if c[0] == "setAttribute"]
    assert sets == [("setAttribute", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 100_000)]
    assert fake.launches[-1][2] == 100_000


def test_static_shared_memory_counts_against_the_48kb_without_the_attribute(fake):
    fake.static_smem = 32  # e.g. TMA mbarriers
    launcher = Launcher(LoadedKernel(CUBIN, "k", "sm_90a"), ["pointer", "int32"], (128, 1, 1))
    launcher.launch([0, 1], (1, 1, 1), 48 * 1024, device=0, stream=0)
    sets = [c for c in fake.calls if c[0] == "setAttribute"]
    assert sets == [("setAttribute", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 48 * 1024)]


def test_cluster_dims_become_a_launch_attribute(fake):
    launcher = Launcher(
        LoadedKernel(CUBIN, "k", "sm_90a"), ["pointer", "int32"], (128, 1, 1), cluster=(2, 1, 1)
    )
    launcher.launch([0, 0], (8, 1, 1), 0, device=0, stream=0)
    assert fake.launches[0][4] == 1
    with pytest.raises(ValueError, match="not a multiple of cluster"):
        launcher.launch([0, 0], (7, 1, 1), 0, device=0, stream=0)


def test_driver_failures_name_the_call(fake):
    fake.fail_launch = True
    launcher = Launcher(LoadedKernel(CUBIN, "k", "sm_90a"), ["pointer", "int32"], (32, 1, 1))
    with pytest.raises(
        CudaDriverError, match=r"cuLaunchKernelEx\(k\) failed: CUDA_ERROR_INVALID_VALUE"
    ):
        launcher.launch([0, 0], (1, 1, 1), 0, device=0, stream=0)


def test_wrong_device_arch_is_refused_before_loading(fake, monkeypatch):
    monkeypatch.setattr(drv_mod, "device_capability", lambda device: (8, 0))
    with pytest.raises(CudaUnavailableError, match="compiled for sm_90a"):
        LoadedKernel(CUBIN, "k", "sm_90a").on(0)
    assert "load" not in fake.calls
    monkeypatch.setattr(drv_mod, "device_capability", lambda device: (8, 6))
    LoadedKernel(CUBIN, "k", "sm_80").on(0)  # sm_80 machine code runs on 8.6
    assert "load" in fake.calls


class FakeCudaTensor(torch.Tensor):
    """A CPU tensor that says it lives on a CUDA device (for the checker's device test)."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    index = 0

    @property
    def device(self):
        return torch.device("cuda", self.index)

    @property
    def is_cuda(self):
        return True

    def get_device(self):
        return self.index


def on_cuda(t, index=0):
    fake = torch.Tensor._make_subclass(FakeCudaTensor, t)
    fake.index = index
    return fake


def test_a_kernel_call_checks_once_then_launches_the_pointers_and_grid(fake):
    params = (TensorParam("x", "float32", ("n",)), ScalarParam("n", "int32", dim="n"))
    launch = LaunchSpec(grid=(lambda d: (d["n"] + 127) // 128,), block=(128,))
    compiled = CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8))
    kernel = RuntimeKernel(compiled, params, launch)
    x = on_cuda(torch.zeros(1000))
    assert kernel(x, stream=0x77) is None
    assert fake.launches == [((8, 1, 1), (128, 1, 1), 0, 0x77, 0, (x.data_ptr(), 1000))]
    with pytest.raises(LaunchArgumentError) as info:
        kernel(on_cuda(torch.zeros(10, dtype=torch.float64)), stream=0)
    assert info.value.code == "TC303" and len(fake.launches) == 1


def test_tensors_on_two_devices_are_refused_before_launch(fake):
    params = (TensorParam("a", "float32", (4,)), TensorParam("b", "float32", (4,)))
    compiled = CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8))
    kernel = RuntimeKernel(compiled, params, LaunchSpec(grid=(1,), block=(32,)))
    with pytest.raises(LaunchArgumentError, match="`b` is on cuda:1, expected cuda:0"):
        kernel(on_cuda(torch.zeros(4)), on_cuda(torch.zeros(4), index=1), stream=0)
    with pytest.raises(LaunchArgumentError, match="`b` is on cpu"):
        kernel(on_cuda(torch.zeros(4)), torch.zeros(4), stream=0)
    assert fake.launches == []
