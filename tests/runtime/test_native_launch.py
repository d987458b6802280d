"""The compiled launcher (runtime/native_launch.py, launch_native.c) in front of the Python fast
path, over the recording stand-in for libcuda.

Once a call's signature is primed, the launcher takes calls with that signature alone: the
Python path and the checker do not run (its dictionary of signatures is emptied to show it).
Anything that differs from the primed signature is a miss, and the Python path, then the
checker, decide as they would without it."""

import numpy as np
import pytest
import torch
from test_launch_fast_path import SPAN, STREAM, fake_driver, make_kernel
from test_launch_path_fake_driver import on_cuda

from tilecraft.runtime import (
    LaunchArgumentError,
    ScalarParam,
    TensorMapParam,
    TensorParam,
    native_launch,
)
from tilecraft.runtime.fast_call import MISS


@pytest.fixture
def libcuda(monkeypatch):
    """The stand-in libcuda, with the compiled launcher built (skips where it cannot be)."""
    if native_launch.wait(120) is None:
        pytest.skip(f"no compiled launcher here: {native_launch.status()}")
    return fake_driver(monkeypatch)


PARAMS = (
    TensorParam("x", "float32", ("n",), align=16),
    TensorParam("y", "float32", ("n", 4)),
    ScalarParam("alpha", "float32"),
    ScalarParam("n", "int32", dim="n"),
)


def primed(libcuda, params=PARAMS, make=None, **kw):
    """A kernel called twice (checker, then the Python path, which primes the launcher), its
    signature dictionary then emptied: from here only the launcher can take a call."""
    kernel, binds = make_kernel(libcuda, params, **kw)
    args = make() if make else (on_cuda(torch.zeros(300)), on_cuda(torch.zeros(300, 4)), 2.5)
    kernel(*args)
    kernel(*args)
    fast = kernel._fast
    assert fast._native is not None and fast._native.primed
    fast._entries.clear()
    return kernel, binds, args


def test_a_primed_launcher_takes_known_calls_alone(libcuda):
    kernel, binds, _ = primed(libcuda)
    calls = [(on_cuda(torch.zeros(300)), on_cuda(torch.zeros(300, 4)), a)
             for a in (1.0, -0.1, 3)]  # an int for a float scalar, as the checker takes it
    for x, y, a in calls:
        assert kernel(x, y, a) is None
    assert len(binds) == 1
    assert libcuda.launches[2:] == [
        ((3, 1, 1), STREAM, (x.data_ptr(), y.data_ptr(), float(np.float32(a)), 300))
        for x, y, a in calls]
    x, y, _ = calls[0]
    kernel(x, y, 1.5, stream=0x77)
    assert libcuda.launches[-1] == ((3, 1, 1), 0x77, (x.data_ptr(), y.data_ptr(), 1.5, 300))
    assert len(binds) == 1


def _misaligned():
    return on_cuda(torch.zeros(301)[1:])


MISSES = {
    "shape": lambda x, y: (x, on_cuda(torch.zeros(300, 5)), 1.0),
    "dynamic dim": lambda x, y: (on_cuda(torch.zeros(301)), on_cuda(torch.zeros(301, 4)), 1.0),
    "dtype": lambda x, y: (on_cuda(torch.zeros(300, dtype=torch.float64)), y, 1.0),
    "device": lambda x, y: (on_cuda(torch.zeros(300), index=1), y, 1.0),
    "host tensor": lambda x, y: (torch.zeros(300), y, 1.0),
    "type": lambda x, y: (x.numpy(), y, 1.0),
    "strides": lambda x, y: (x, on_cuda(torch.zeros(4, 300).t()), 1.0),
    "misaligned": lambda x, y: (_misaligned(), y, 1.0),
    "scalar type": lambda x, y: (x, y, "1.0"),
    "numpy scalar": lambda x, y: (x, y, np.float32(1.0)),
    "bool scalar": lambda x, y: (x, y, True),
    "count": lambda x, y: (x, y),
}


@pytest.mark.parametrize("case", list(MISSES))
def test_anything_unlike_the_primed_signature_is_a_miss(libcuda, case):
    kernel, _, (x, y, _) = primed(libcuda)
    assert kernel._fast._native.attempt(MISSES[case](x, y), None) is MISS
    assert kernel._fast._native.attempt((x, y, 1.0), None) is None  # and the primed one launches
    assert len(libcuda.launches) == 3


def test_a_miss_falls_back_to_the_checker_and_its_error(libcuda):
    kernel, binds, (x, y, _) = primed(libcuda)
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, on_cuda(torch.zeros(300, 5)), 1.0)
    assert info.value.code == "TC302" and info.value.line == SPAN.line
    y.resize_(300, 5)  # the launcher reads the shape at every call
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, y, 1.0)
    assert info.value.code == "TC302"
    assert len(libcuda.launches) == 2


@pytest.mark.parametrize("kind, good, bad", [
    ("int8", -128, 128), ("uint8", 255, -1), ("int16", -32768, 32768), ("uint16", 65535, 65536),
    ("int32", 2**31 - 1, 2**31), ("uint32", 2**32 - 1, -1), ("int64", -(2**63), 2**63),
    ("uint64", 2**64 - 1, 2**64), ("float64", 0.1, "0.1"), ("float32", 0.1, None)])
def test_scalars_of_every_kind_cross_as_the_checker_takes_them(libcuda, kind, good, bad):
    params = (TensorParam("x", "float32", (8,)), ScalarParam("v", kind))
    x = on_cuda(torch.zeros(8))
    kernel, _, _ = primed(libcuda, params, make=lambda: (x, 0), grid=(1,))
    launch = kernel._fast._native.attempt
    assert launch((x, good), None) is None
    want = float(np.float32(good)) if kind == "float32" else good
    assert libcuda.launches[-1][2] == (x.data_ptr(), want)
    if bad is not None:
        assert launch((x, bad), None) is MISS
        with pytest.raises(LaunchArgumentError):
            kernel(x, bad)
    assert launch((x, 1.0 if "int" in kind else True), None) is MISS


def test_outputs_are_allocated_by_the_launcher(libcuda):
    params = (TensorParam("x", "float32", ("n", 3)), TensorParam("total", "float32", ()),
              TensorParam("out", "float16", (2, "n", 3)), ScalarParam("n", "int32", dim="n"))

    def make():
        return (on_cuda(torch.zeros(5, 3)),)

    kernel, binds = make_kernel(libcuda, params, outputs=("total", "out"))
    made = []
    kernel.checker.empty = lambda *shape, dtype, device: made.append(shape) or on_cuda(
        torch.empty(*shape, dtype=dtype))
    for _ in range(2):
        kernel(*make())
    kernel._fast._entries.clear()
    total, out = kernel(*make())
    assert total.shape == () and out.shape == (2, 5, 3) and out.dtype == torch.float16
    assert made[-2:] == [((),), (2, 5, 3)]
    assert libcuda.launches[-1][2][1:] == (total.data_ptr(), out.data_ptr(), 5)
    assert len(binds) == 1


def test_tensor_maps_are_primed_with_their_tensors_address(libcuda):
    params = (TensorParam("A", "float16", (64, 64)),
              TensorMapParam("A_tmap", "A", box=(64, 64), swizzle=128))
    tensors = [on_cuda(torch.zeros(64, 64, dtype=torch.float16)) for _ in range(2)]
    kernel, binds, _ = primed(libcuda, params, make=lambda: (tensors[0],), grid=(1,))
    native = kernel._fast._native
    assert native.attempt((tensors[0],), None) is None
    assert native.attempt((tensors[1],), None) is MISS  # its map is not in the launcher's block
    kernel._fast._entries.clear()
    for t in (tensors[1], tensors[1], tensors[0]):
        kernel(t)  # the Python path re-primes with each new address
    assert native.attempt((tensors[0],), None) is None
    assert [launch[2] for launch in libcuda.launches] == [
        (t.data_ptr(), t.data_ptr()) for t in (tensors[0],) * 3 + (tensors[1],) * 2
        + (tensors[0],) * 2]


def test_overlapping_arguments_are_a_miss_where_the_kernel_writes(libcuda):
    from test_launch_path_fake_driver import CUBIN

    from tilecraft.runtime import ArgChecker, CompiledCubin, LaunchSpec, Resources, RuntimeKernel

    params = (TensorParam("a", "float32", ("n",)), TensorParam("out", "float32", ("n",)),
              ScalarParam("n", "int32", dim="n"))
    libcuda.kinds = ["pointer", "pointer", "int32"]
    checker = ArgChecker(params, kernel="k", span=SPAN, writes=("out",))
    kernel = RuntimeKernel(CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8)), params,
                           LaunchSpec(grid=(1,), block=(128,)), checker=checker)
    base = torch.zeros(600)
    low, high, shifted = on_cuda(base[:300]), on_cuda(base[300:]), on_cuda(base[299:599])
    kernel(high, low)
    kernel(high, low)
    native = kernel._fast._native
    assert native.attempt((high, low), None) is None
    assert native.attempt((shifted, low), None) is MISS
    assert native.attempt((low, low), None) is MISS


def test_a_kernel_made_before_the_build_finishes_switches_over(libcuda):
    waiting = []
    kernel, binds = make_kernel(libcuda)
    args = (on_cuda(torch.zeros(300)), on_cuda(torch.zeros(300, 4)), 2.5)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(native_launch, "module", lambda: None)  # as while it builds
        m.setattr(native_launch, "when_ready", waiting.append)
        kernel(*args)
    fast = kernel._fast
    assert fast._native is None and waiting == [fast]
    fast._upgrade()  # what the builder thread calls
    kernel(*args)
    kernel(*args)
    assert fast._native is not None and fast._native.primed
    fast._entries.clear()
    kernel(*args)
    assert len(binds) == 1 and len(libcuda.launches) == 4


def test_switched_off_or_unbuildable_leaves_the_python_path(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_NATIVE_LAUNCH", "0")
    assert native_launch.module() is None and native_launch.status().startswith("off")
    monkeypatch.setenv("TILECRAFT_NATIVE_LAUNCH", "1")
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="failed"):
        native_launch._build()
    assert not list((tmp_path / "native").iterdir())  # no half-written file left behind


@pytest.mark.gpu
def test_gpu_the_compiled_launcher_computes_what_the_python_path_does(monkeypatch):
    import sys
    from pathlib import Path

    from tilecraft.runtime import RuntimeKernel

    if native_launch.wait(120) is None:
        pytest.skip(f"no compiled launcher here: {native_launch.status()}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import gemm

    rk = gemm.matmul(256, 256, 256)._cuda_kernel()

    def fresh(python: bool, out_idx: bool):
        k = RuntimeKernel(rk.compiled, rk.params, rk.launch_spec, rk.source,
                          checker=rk.checker if out_idx else None)
        a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
        with pytest.MonkeyPatch.context() as m:
            if python:
                m.setenv("TILECRAFT_NATIVE_LAUNCH", "0")
            k(a, a) if out_idx else k(a, a, torch.empty_like(a))  # the first launch decides
        return k

    kernels = {(p, o): fresh(p, o) for p in (False, True) for o in (False, True)}
    side = torch.cuda.Stream()
    pairs = [tuple(torch.randn(256, 256, dtype=torch.float16, device="cuda") for _ in range(2))
             for _ in range(4)]
    results = []
    for i in range(200):  # back to back, no sync; every other call on a side stream
        a, b = pairs[i % len(pairs)]
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            for (python, out_idx), k in kernels.items():
                if out_idx:
                    results.append((a, b, k(a, b)))
                else:
                    c = torch.full_like(a, float("nan"))
                    k(a, b, c)
                    results.append((a, b, c))
    torch.cuda.synchronize()
    for a, b, c in results[-32:]:
        torch.testing.assert_close(c.float(), gemm.reference(a, b), atol=0.1, rtol=1e-2)
    for (python, _), k in kernels.items():
        assert (k._fast._native is None) == python
        if not python:
            assert k._fast._native.primed

    from test_gpu_fast_path import axpy_kernel

    kernel = axpy_kernel()
    for n in (1000, 1000, 1000, 77, 4096, 77, 1000):
        for alpha in (0.5, -2.0, 3):
            x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            expected = y + alpha * x
            kernel(x, y, alpha)
            torch.testing.assert_close(y, expected)
    assert kernel._fast._native is not None and kernel._fast._native.primed


def test_a_stream_that_is_not_a_handle_is_a_miss_not_an_error(libcuda):
    kernel, _, (x, y, _) = primed(libcuda)
    assert kernel._fast._native.attempt((x, y, 1.0), 2**70) is MISS  # (no pointer holds it)
    assert kernel._fast._native.attempt((x, y, 1.0), 0x77) is None
    assert libcuda.launches[-1][1] == 0x77


def test_launches_from_many_threads_each_carry_their_own_pointers(libcuda):
    """The launcher writes each call's pointers into that call's own copy of the block and
    calls the driver without the GIL: concurrent calls never launch another's pointers."""
    import threading

    kernel, _, _ = primed(libcuda)
    calls = [(on_cuda(torch.zeros(300)), on_cuda(torch.zeros(300, 4)), float(i))
             for i in range(8)]

    def work(args):
        for _ in range(50):
            kernel(*args)

    threads = [threading.Thread(target=work, args=(a,)) for a in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = {(x.data_ptr(), y.data_ptr(), a, 300) for x, y, a in calls}
    got = [launch[2] for launch in libcuda.launches[2:]]
    assert len(got) == 8 * 50 and set(got) == want
    assert all(got.count(w) == 50 for w in want)


class _ClassDevice(torch.Tensor):
    """A tensor type whose `device` is a plain class attribute, not a descriptor: the launcher
    reads it by name, as `x.device` does (before, priming such a type raised TypeError)."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    device = torch.device("cuda", 0)

    @property
    def is_cuda(self):
        return True

    def get_device(self):
        return 0


def test_attributes_that_are_not_descriptors_are_read_by_name(libcuda):
    def make():
        return tuple(torch.Tensor._make_subclass(_ClassDevice, t)
                     for t in (torch.zeros(300), torch.zeros(300, 4))) + (2.5,)

    kernel, binds, (x, y, a) = primed(libcuda, make=make)
    assert kernel(x, y, a) is None
    assert libcuda.launches[-1] == ((3, 1, 1), STREAM, (x.data_ptr(), y.data_ptr(), 2.5, 300))
    assert len(binds) == 1  # (the launcher took it: no miss, no check)
    _ClassDevice.device = torch.device("cuda", 1)  # (read by name each call: now a miss)
    try:
        kernel(x, y, a)
    except LaunchArgumentError:
        pass
    finally:
        _ClassDevice.device = torch.device("cuda", 0)
    assert len(binds) == 2  # (the launcher missed: the checker saw the call)
