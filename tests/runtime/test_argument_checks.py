"""Launch checks made before the driver is called, on a CPU machine with a recording fake driver:
grid and block limits (ctypes would truncate a grid of 2^32 + 1 blocks to 1), pointer alignment
for the kernel's vector accesses, and one argument checker for the GPU and the interpreter."""

import pytest
import torch
from test_launch_path_fake_driver import CUBIN, fake, on_cuda  # noqa: F401 - fake is a fixture

from tilecraft.diagnostics import Span
from tilecraft.runtime import (
    ArgChecker,
    CompiledCubin,
    LaunchArgumentError,
    LaunchSpec,
    Resources,
    RuntimeKernel,
    ScalarParam,
    TensorParam,
)

SPAN = Span(__file__, 7, 4)  # where the errors of these kernels point
COMPILED = CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8))
N_PARAMS = (TensorParam("x", "float32", ("n",)), ScalarParam("n", "int32", dim="n"))


def kernel(grid, block=(128,), params=N_PARAMS, cluster=None):
    checker = ArgChecker(params, kernel="k", span=SPAN)
    spec = LaunchSpec(grid=grid, block=block, cluster=cluster)
    return RuntimeKernel(COMPILED, params, spec, checker=checker)


def launch_error(k, *args, **kw) -> LaunchArgumentError:
    with pytest.raises(LaunchArgumentError) as info:
        k.launch(*args, stream=0, **kw)
    assert info.value.line == SPAN.line
    return info.value


# ---- grid and block ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "grid, n, axis, value, why",
    [
        ((lambda d: d["n"] * 2**22 + 1,), 1024, "x", 2**32 + 1, "at most 2147483647"),
        ((lambda d: d["n"] * 2**21,), 1024, "x", 2**31, "at most 2147483647"),
        ((1, lambda d: d["n"] * 100), 1000, "y", 100_000, "at most 65535 blocks along y"),
        ((1, 1, lambda d: d["n"] + 65_000), 536, "z", 65_536, "at most 65535 blocks along z"),
        ((lambda d: (d["n"] - 10) // 4,), 4, "x", -2, "a negative number"),
        ((lambda d: d["n"] / 2,), 5, "x", "2.5", "not an integer"),
    ],
    ids=["x-2^32+1", "x-2^31", "y", "z", "negative", "float"],
)
def test_a_grid_beyond_cuda_limits_is_refused_before_the_driver(fake, grid, n, axis, value, why):
    err = launch_error(kernel(grid), on_cuda(torch.zeros(n)))
    assert err.code == "TC309" and f"{value} blocks along grid {axis}" in err.message
    assert why in err.message and f"n={n}" in err.hint
    assert fake.launches == [] and fake.calls == []


def test_an_overridden_grid_is_checked_too(fake):
    err = launch_error(kernel((1,)), on_cuda(torch.zeros(4)), grid=(2**32 + 1,))
    assert err.code == "TC309" and "4294967297 blocks along grid x" in err.message
    assert fake.launches == []


def test_an_empty_grid_launches_nothing_and_calls_no_driver(fake):
    k = kernel((lambda d: (d["n"] + 127) // 128,))
    assert k(on_cuda(torch.zeros(0)), stream=0) is None
    assert fake.calls == [] and fake.launches == []
    k(on_cuda(torch.zeros(300)), stream=0)
    assert [launch[0] for launch in fake.launches] == [(3, 1, 1)]


def test_the_largest_grid_cuda_takes_is_launched(fake):
    k = kernel((lambda d: 2**31 - 1, 65535, lambda d: d["n"] + 65531))
    k(on_cuda(torch.zeros(4)), stream=0)
    assert fake.launches[0][0] == (2**31 - 1, 65535, 65535)


def test_a_grid_that_is_no_multiple_of_the_cluster_is_refused(fake):
    err = launch_error(kernel((lambda d: d["n"],), cluster=(2,)), on_cuda(torch.zeros(7)))
    assert err.code == "TC309" and "multiple of the cluster's 2 blocks" in err.message


@pytest.mark.parametrize(
    "block, why",
    [((2048,), "x must be 1 to 1024"), ((0,), "x must be 1 to 1024"),
     ((32, 32, 2), "2048 threads in all"), ((1, 1, 65), "z must be 1 to 64")],
)
def test_a_block_beyond_cuda_limits_is_refused_when_the_kernel_is_made(block, why):
    with pytest.raises(LaunchArgumentError) as info:
        kernel((1,), block=block)
    assert info.value.code == "TC310" and why in info.value.message
    assert info.value.line == SPAN.line


def test_a_jit_kernel_whose_dynamic_grid_passes_the_limit_is_refused_at_its_definition(
    fake, monkeypatch
):
    import tilecraft
    import tilecraft.language as T
    from tilecraft.runtime import kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "_current_stream", lambda device: 0)  # torch has no CUDA

    m = T.dynamic("m")

    @T.prim_func
    def doubled(A: T.Tensor((m,), "float32")):
        with T.Kernel(1, T.ceildiv(m, 32), threads=32) as (bx, by):
            A_f = T.alloc_fragment((32,), "float32")
            T.copy(A[by * 32], A_f)
            for i in T.Parallel(32):
                A_f[i] = A_f[i] * 2.0
            T.copy(A_f, A[by * 32])

    k = tilecraft.compile(doubled, target="cuda", arch="sm_90a")
    k(on_cuda(torch.zeros(32 * 65535)))  # the largest grid along y
    assert [launch[0] for launch in fake.launches] == [(1, 65535, 1)]
    with pytest.raises(LaunchArgumentError) as info:
        k(on_cuda(torch.zeros(32 * 65535 + 1)))
    err = info.value
    assert err.code == "TC309" and "65536 blocks along grid y" in err.message
    assert "m=2097121" in err.hint and err.line == doubled.span.line
    assert len(fake.launches) == 1
