"""Tensor arguments that overlap in memory where the kernel writes one of them are TC317 on both
backends (the GPU code takes different parameters for different memory, the interpreter runs in
program order): the one argument checker refuses them at the written parameter's line. Tensors
the kernel only reads may share memory; disjoint slices of one tensor are distinct tensors."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.args import written_params
from tilecraft.runtime import ArgChecker, LaunchArgumentError, TensorParam


def marked_line(marker: str) -> int:
    with open(__file__) as f:
        hits = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


@T.prim_func
def add_one(
    X: T.Tensor((64,), "float32"),
    Y: T.Tensor((64,), "float32"),  # WRITTEN-Y
):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            Y[i] = X[i] + 1.0


@T.prim_func
def weighted(
    X: T.Tensor((64,), "float32"),
    W: T.Tensor((64,), "float32"),
    Y: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=64) as bx:
        Y_f = T.alloc_fragment((64,), "float32")
        for i in T.Parallel(64):
            Y_f[i] = X[i] * W[i]
        T.copy(Y_f, Y)


@T.prim_func
def accumulate(
    X: T.Tensor((64,), "float32"),
    Y: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=64) as bx:
        T.atomic_add(Y[0:64], X[0:64])


def overlap_error(call) -> LaunchArgumentError:
    with pytest.raises(LaunchArgumentError) as info:
        call()
    assert info.value.code == "TC317"
    return info.value


def test_written_params_come_from_stores_tile_ops_and_atomics():
    assert written_params(add_one) == ("Y",)
    assert written_params(weighted) == ("Y",)
    assert written_params(accumulate) == ("Y",)


def test_an_in_place_call_on_the_interpreter_is_refused_at_the_written_parameter():
    k = tilecraft.jit(add_one)
    x = torch.zeros(64)
    err = overlap_error(lambda: k(x, x))
    assert err.file == __file__ and err.line == marked_line("WRITTEN-Y")
    assert "arguments `X` and `Y` overlap in memory, and the kernel writes `Y`" in err.message
    assert (x == 0).all()  # refused before anything ran


def test_numpy_arrays_sharing_memory_are_refused_too():
    from tilecraft import interp

    a = np.zeros(128, dtype=np.float32)
    overlap_error(lambda: interp.run(add_one, [a[:64], a[32:96]]))
    overlap_error(lambda: interp.run(accumulate, [a[:64], a[:64]]))


def test_tensors_the_kernel_only_reads_may_share_memory():
    k = tilecraft.jit(weighted)
    x = torch.arange(64, dtype=torch.float32)
    y = torch.zeros(64)
    k(x, x, y)
    torch.testing.assert_close(y, x * x)


def test_disjoint_slices_of_one_tensor_are_distinct_tensors():
    k = tilecraft.jit(add_one)
    base = torch.arange(128, dtype=torch.float32)
    k(base[:64], base[64:])  # adjacent: X's last byte is just below Y's first
    torch.testing.assert_close(base[64:], torch.arange(64, dtype=torch.float32) + 1)
    err = overlap_error(lambda: k(base[:64], base[63:127]))  # one element shared
    assert err.line == marked_line("WRITTEN-Y")


def test_strided_views_overlap_by_the_span_of_their_elements():
    params = (TensorParam("X", "float32", (4, 8), strides=("sx", 1)),
              TensorParam("Y", "float32", (4, 8), strides=("sy", 1)))
    checker = ArgChecker(params, kernel="k", writes=("Y",))
    base = torch.zeros(8, 16)
    checker.bind([base[:4, :8], base[4:8, :8]], require_cuda=False)
    checker.bind([base[:4, :8], base[3:7, 8:16]], require_cuda=False)  # starts past X's last
    err = overlap_error(lambda: checker.bind([base[:4, :8], base[2:6, 4:12]],
                                             require_cuda=False))
    assert "`X` and `Y`" in err.message
    # rows that interleave share no element, but their spans intersect: refused all the same
    overlap_error(lambda: checker.bind([base[3:7, 8:16], base[4:8, :8]], require_cuda=False))


def test_a_checker_not_told_what_the_kernel_writes_checks_no_overlap():
    """Hand-written CUDA (RuntimeKernel.from_source): its author decides what may alias."""
    params = (TensorParam("a", "float32", (4,)), TensorParam("b", "float32", (4,)))
    x = torch.zeros(4)
    ArgChecker(params).bind([x, x], require_cuda=False)
    ArgChecker(params, writes=()).bind([x, x], require_cuda=False)
    err = overlap_error(lambda: ArgChecker(params, writes=("b",)).bind([x, x],
                                                                       require_cuda=False))
    assert "the kernel writes `b`" in err.message
    with pytest.raises(ValueError, match="not tensor parameters"):
        ArgChecker(params, writes=("c",))


def test_empty_tensors_overlap_nothing():
    params = (TensorParam("a", "float32", ("n",)), TensorParam("b", "float32", ("n",)))
    x = torch.zeros(0)
    ArgChecker(params, writes=("b",)).bind([x, x], require_cuda=False)
    overlap_error(lambda: ArgChecker(params, writes=("b",)).bind([torch.zeros(2)] * 2,
                                                                 require_cuda=False))


@pytest.mark.gpu
def test_gpu_in_place_call_is_refused_before_and_after_fast_calls():
    k = tilecraft.jit(add_one)
    base = torch.arange(128, dtype=torch.float32, device="cuda")
    for _ in range(3):  # the first call checks, the later ones take the fast path
        k(base[:64], base[64:])
    err = overlap_error(lambda: k(base[:64], base[32:96]))
    assert err.line == marked_line("WRITTEN-Y")
    x = torch.zeros(64, device="cuda")
    err = overlap_error(lambda: k(x, x))
    assert err.line == marked_line("WRITTEN-Y")
    torch.cuda.synchronize()
    assert (x == 0).all()
    torch.testing.assert_close(base[64:].cpu(), torch.arange(64, dtype=torch.float32) + 1)
    y = torch.zeros(64, device="cuda")
    w = tilecraft.jit(weighted)
    w(base[64:], base[64:], y)  # read-only aliasing launches
    torch.testing.assert_close(y.cpu(), (base[64:] * base[64:]).cpu())
