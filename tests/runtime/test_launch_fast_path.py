"""The per-call fast path (runtime/fast_call.py) on a CPU machine, over a recording stand-in for
libcuda driven through the ctypes driver, as a GPU machine's launches are.

After a first call that the checker accepted, later calls with the same argument signature skip
the checker; every bad call must still be refused with the checker's own error, and every
launch must carry the pointers, scalars and grid of its own arguments."""

import pytest
import torch
from fake_libcuda import FakeLibcuda
from test_launch_path_fake_driver import CUBIN, on_cuda

from tilecraft.diagnostics import Span
from tilecraft.runtime import (
    ArgChecker,
    CompiledCubin,
    LaunchArgumentError,
    LaunchSpec,
    Resources,
    RuntimeKernel,
    ScalarParam,
    TensorMapParam,
    TensorParam,
)
from tilecraft.runtime import cuda_ctypes
from tilecraft.runtime import driver as drv_mod
from tilecraft.runtime.fast_call import MISS
from tilecraft.runtime import launch as launch_mod
from tilecraft.runtime import module as module_mod
from tilecraft.runtime import native_launch

SPAN = Span(__file__, 12, 4)
STREAM = 0x5500
@pytest.fixture(params=["python", "native"])
def libcuda(request, monkeypatch):
    """The stand-in libcuda; each test runs with the Python fast path alone and with the
    compiled launcher in front of it (native_launch.py)."""
    if request.param == "python":
        monkeypatch.setenv("TILECRAFT_NATIVE_LAUNCH", "0")
    elif native_launch.wait(120) is None:
        pytest.skip(f"no compiled launcher here: {native_launch.status()}")
    return fake_driver(monkeypatch)


def fake_driver(monkeypatch) -> FakeLibcuda:
    """Install a FakeLibcuda as the runtime's ctypes driver (for this test)."""
    lib = FakeLibcuda()
    monkeypatch.setattr(cuda_ctypes.CUresult, "_lib", cuda_ctypes.CUresult._lib)
    drv = cuda_ctypes.CtypesDriver(lib)
    for mod in (drv_mod, module_mod, launch_mod):
        monkeypatch.setattr(mod, "driver_module", lambda: drv)
    monkeypatch.setattr(module_mod, "require_gpu", lambda arch="": None)
    monkeypatch.setattr(drv_mod, "device_capability", lambda device: (9, 0))
    monkeypatch.setattr("torch.cuda.init", lambda: None)
    monkeypatch.setattr(drv_mod, "_primary", {})
    monkeypatch.setattr(drv_mod, "_primary_handle", {})
    monkeypatch.setattr(launch_mod, "_raw_stream", lambda device: STREAM)
    return lib


PARAMS = (
    TensorParam("x", "float32", ("n",), align=16),
    TensorParam("y", "float32", ("n", 4)),
    ScalarParam("alpha", "float32"),
    ScalarParam("n", "int32", dim="n"),
)


def make_kernel(libcuda, params=PARAMS, outputs=(), grid=(lambda d: (d["n"] + 127) // 128,)):
    libcuda.kinds = ["pointer" if isinstance(p, TensorParam) else
                     "tensormap" if isinstance(p, TensorMapParam) else p.kind for p in params]
    writes = tuple(p.name for p in params if isinstance(p, TensorParam))  # every tensor
    checker = ArgChecker(params, kernel="k", span=SPAN, outputs=outputs, writes=writes)
    spec = LaunchSpec(grid=grid, block=(128,))
    compiled = CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8))
    kernel = RuntimeKernel(compiled, params, spec, checker=checker)
    binds = []
    bind = checker.bind
    checker.bind = lambda args, **kw: binds.append(len(args)) or bind(args, **kw)
    return kernel, binds


def good(n=300):
    return on_cuda(torch.zeros(n)), on_cuda(torch.zeros(n, 4)), 2.5


def test_later_calls_skip_the_checker_and_launch_their_own_pointers(libcuda):
    kernel, binds = make_kernel(libcuda)
    calls = [good() for _ in range(5)] + [good(1000)]
    for x, y, alpha in calls:
        assert kernel(x, y, alpha) is None
    assert len(binds) == 2  # one per signature: n=300, then n=1000
    assert libcuda.launches == [
        ((3, 1, 1), STREAM, (x.data_ptr(), y.data_ptr(), 2.5, 300)) for x, y, _ in calls[:5]
    ] + [((8, 1, 1), STREAM, (calls[5][0].data_ptr(), calls[5][1].data_ptr(), 2.5, 1000))]
    x, y, _ = good(1000)
    kernel(x, y, -1.0, stream=0x77)  # a known signature on another stream
    assert libcuda.launches[-1] == ((8, 1, 1), 0x77, (x.data_ptr(), y.data_ptr(), -1.0, 1000))
    assert len(binds) == 2


def _misaligned():
    x = on_cuda(torch.zeros(301))
    return on_cuda(x[1:]), good()[1], 1.0  # 4 bytes past a 16-byte boundary


def _overlapping():
    base = torch.zeros(1500)  # y's first row is x's last four elements
    return on_cuda(base[:300]), on_cuda(base[296:1496].view(300, 4)), 1.0


BAD_CALLS = {
    "count": (lambda: good()[:2], "TC301"),
    "shape": (lambda: (good()[0], on_cuda(torch.zeros(300, 5)), 1.0), "TC302"),
    "dtype": (lambda: (on_cuda(torch.zeros(300, dtype=torch.float64)), *good()[1:]), "TC303"),
    "not-a-tensor": (lambda: ([0.0] * 300, *good()[1:]), "TC303"),
    "scalar": (lambda: (*good()[:2], "2.5"), "TC303"),
    "host-tensor": (lambda: (torch.zeros(300), *good()[1:]), "TC304"),
    "other-device": (lambda: (on_cuda(torch.zeros(300), index=1), *good()[1:]), "TC304"),
    "dims-disagree": (lambda: (good()[0], on_cuda(torch.zeros(299, 4)), 1.0), "TC305"),
    "non-contiguous": (lambda: (good()[0], on_cuda(torch.zeros(4, 300).t()), 1.0), "TC306"),
    "misaligned": (_misaligned, "TC308"),
    "overlapping": (_overlapping, "TC317"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_a_bad_call_after_good_ones_is_refused_as_on_a_first_call(libcuda, case):
    make_args, code = BAD_CALLS[case]
    fresh, _ = make_kernel(libcuda)
    with pytest.raises(LaunchArgumentError) as first:
        fresh(*make_args())
    kernel, _ = make_kernel(libcuda)
    kernel(*good())
    kernel(*good())  # the fast path now knows n=300
    with pytest.raises(LaunchArgumentError) as later:
        kernel(*make_args())
    assert later.value.code == first.value.code == code
    assert later.value.line == SPAN.line and str(later.value) == str(first.value)
    assert len(libcuda.launches) == 2
    kernel(*good())  # and the kernel still launches good calls
    assert len(libcuda.launches) == 3


def test_outputs_are_allocated_per_call_with_the_bound_shape(libcuda):
    params = (TensorParam("x", "float32", ("n",)), TensorParam("out", "float32", ("n",)),
              ScalarParam("n", "int32", dim="n"))
    kernel, binds = make_kernel(libcuda, params, outputs=("out",))
    kernel.checker.empty = lambda *shape, dtype, device: on_cuda(torch.empty(*shape, dtype=dtype))
    outs = []
    for n in (100, 100, 100, 7):
        x = on_cuda(torch.zeros(n))
        outs.append((x, kernel(x)))
    assert len(binds) == 2
    assert [o.shape for _, o in outs] == [(100,)] * 3 + [(7,)]
    assert [launch[2] for launch in libcuda.launches] == [
        (x.data_ptr(), o.data_ptr(), o.shape[0]) for x, o in outs
    ]


def test_outputs_of_every_rank_are_allocated_on_the_fast_path(libcuda):
    params = (TensorParam("x", "float32", ("n", 3)), TensorParam("total", "float32", ()),
              TensorParam("out", "float16", (2, "n", 3)), ScalarParam("n", "int32", dim="n"))
    kernel, binds = make_kernel(libcuda, params, outputs=("total", "out"))
    kernel.checker.empty = lambda *shape, dtype, device: on_cuda(torch.empty(*shape, dtype=dtype))
    for n in (5, 5, 5):
        total, out = kernel(on_cuda(torch.zeros(n, 3)))
        assert total.shape == () and total.dtype == torch.float32
        assert out.shape == (2, n, 3) and out.dtype == torch.float16
    assert len(binds) == 1 and len(libcuda.launches) == 3
    assert libcuda.launches[-1][2][1:] == (total.data_ptr(), out.data_ptr(), 5)


def test_a_strided_parameter_binds_its_stride_on_every_known_signature(libcuda):
    params = (TensorParam("x", "float32", (4, 8), strides=("s", 1)),
              ScalarParam("s", "int32", dim="s"))
    kernel, binds = make_kernel(libcuda, params, grid=(1,))
    views = [on_cuda(torch.zeros(4, w)[:, :8]) for w in (16, 32, 16, 32, 8)]
    for x in views:
        kernel(x)
    assert len(binds) == 3  # row strides 16, 32 and 8 (contiguous): one signature each
    assert [launch[2] for launch in libcuda.launches] == [
        (x.data_ptr(), x.stride(0)) for x in views]


def test_tensor_maps_follow_their_tensors_address(libcuda):
    params = (TensorParam("A", "float16", (64, 64)),
              TensorMapParam("A_tmap", "A", box=(64, 64), swizzle=128))
    kernel, binds = make_kernel(libcuda, params, grid=(1,))
    tensors = [on_cuda(torch.zeros(64, 64, dtype=torch.float16)) for _ in range(3)]
    order = [0, 1, 1, 2, 0, 0, 2]
    for i in order:
        kernel(tensors[i])
    assert len(binds) == 1
    assert [launch[2] for launch in libcuda.launches] == [
        (tensors[i].data_ptr(), tensors[i].data_ptr()) for i in order
    ]


def double_kernel():
    import tilecraft.language as T

    @T.prim_func
    def double(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    return double


def test_jit_kernel_errors_after_the_fast_path_point_at_the_parameter(libcuda, monkeypatch):
    import tilecraft

    double = double_kernel()
    kernel = tilecraft.compile(double, target="auto", arch="sm_90a")
    libcuda.kinds = ["pointer", "pointer"]
    for _ in range(3):
        a, b = on_cuda(torch.zeros(256)), on_cuda(torch.zeros(256))
        kernel(a, b)
        assert libcuda.launches[-1] == ((2, 1, 1), STREAM, (a.data_ptr(), b.data_ptr()))
    with pytest.raises(tilecraft.TilecraftError) as info:
        kernel(a, on_cuda(torch.zeros(255)))
    assert info.value.code == "TC302"
    assert info.value.line == double.params[1].span.line
    monkeypatch.setenv("TILECRAFT_INTERPRET", "1")  # the interpreter, even for known calls
    a, b = torch.ones(256), torch.zeros(256)
    kernel(a, b)
    assert b[0] == 2.0 and len(libcuda.launches) == 3


def test_a_kernel_without_tensor_arguments_always_asks_the_checker(libcuda):
    from tilecraft.runtime.fast_call import MISS, FastCall

    params = (ScalarParam("n", "int32"),)
    kernel, _ = make_kernel(libcuda, params, grid=(1,))
    fast = FastCall(kernel.checker, kernel._launcher, 0)
    assert fast.call((5,), None) is MISS


def test_a_tensor_changed_in_place_after_good_calls_is_checked_again(libcuda):
    kernel, _ = make_kernel(libcuda)
    x, y, alpha = good()
    kernel(x, y, alpha)
    kernel(x, y, alpha)
    y.resize_(300, 5)
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, y, alpha)
    assert info.value.code == "TC302" and info.value.line == SPAN.line
    x.set_(torch.zeros(301)[1:].untyped_storage(), 1, (300,), (1,))  # now 4 bytes off 16
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, on_cuda(torch.zeros(300, 4)), alpha)
    assert info.value.code == "TC308"
    assert len(libcuda.launches) == 2


def test_tensors_the_kernel_only_reads_may_share_memory_on_the_fast_path(libcuda):
    params = (TensorParam("a", "float32", ("n",)), TensorParam("b", "float32", ("n",)),
              TensorParam("out", "float32", ("n",)), ScalarParam("n", "int32", dim="n"))
    libcuda.kinds = ["pointer", "pointer", "pointer", "int32"]
    checker = ArgChecker(params, kernel="k", span=SPAN, writes=("out",))
    spec = LaunchSpec(grid=(1,), block=(128,))
    compiled = CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8))
    kernel = RuntimeKernel(compiled, params, spec, checker=checker)
    x, out = on_cuda(torch.zeros(300)), on_cuda(torch.zeros(300))
    for _ in range(3):
        kernel(x, x, out)
    assert kernel.fast_call is not None
    assert kernel.fast_call((x, x, out), STREAM) is None  # launched without the checker
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, out, out)
    assert info.value.code == "TC317" and "writes `out`" in info.value.message
    base = torch.zeros(600)
    low, high, shifted = on_cuda(base[:300]), on_cuda(base[300:]), on_cuda(base[299:599])
    assert kernel.fast_call((x, x, low), STREAM) is None
    assert kernel.fast_call((high, x, low), STREAM) is None  # disjoint halves: launched
    assert kernel.fast_call((shifted, x, low), STREAM) is MISS  # one element shared
    assert len(libcuda.launches) == 6


def test_jit_in_place_call_after_fast_calls_points_at_the_written_parameter(libcuda):
    import tilecraft

    double = double_kernel()
    kernel = tilecraft.compile(double, target="auto", arch="sm_90a")
    libcuda.kinds = ["pointer", "pointer"]
    for _ in range(3):
        kernel(on_cuda(torch.zeros(256)), on_cuda(torch.zeros(256)))
    assert kernel._fast is not None
    a = on_cuda(torch.zeros(256))
    with pytest.raises(tilecraft.TilecraftError) as info:
        kernel(a, a)
    assert info.value.code == "TC317" and info.value.line == double.params[1].span.line
    assert len(libcuda.launches) == 3
