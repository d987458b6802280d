"""Split-K through a thread-block cluster (qmm_kernel's `cluster`): a tile's K slices are the
blocks of one cluster, each leaves its partial sums in its shared memory and adds its share of
the tile's rows from every block's in slice order: the second kernel's bits, with a bias and
for rows past M, on the interpreter and on the GPU."""

import pytest
import torch

import tilecraft.quant as quant
import tilecraft.quant.qmm as qmm

from .helpers import weight


def _pair(wtype, M, N, K, split, bias, device="cpu"):
    qw = quant.quantize(weight(N, K, seed=5).to(device), wtype)
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(2)).half().to(device)
    b = torch.randn(N).half().to(device) if bias else None
    base = dict(qmm.choose_config(M, N, K, qw.bits, qw.group_size, qw.dtype), split=split,
                last_block=False)
    one = qmm.quant_matmul(x, qw, b, config=dict(base, cluster=True))
    two = qmm.quant_matmul(x, qw, b, config=dict(base, cluster=False))
    ref = x.double() @ qw.dequantize().double().T + (b.double() if bias else 0)
    return one, two, ref


@pytest.mark.parametrize("wtype, M, split, bias", [("uint4", 3, 4, True), ("uint3", 1, 2, False),
                                                   ("float6_e3m2", 9, 8, True)])
def test_cluster_split_k_adds_the_slices_as_the_second_kernel_does(wtype, M, split, bias):
    one, two, ref = _pair(wtype, M, 128, 2048, split, bias)
    assert torch.equal(one, two)  # the same sums in the same order
    assert ((one.double() - ref).norm() / ref.norm()).item() < 1e-2


def test_the_cluster_kernel_declares_its_cluster():
    from tilecraft.quant.qmm_kernel import qmm_kernel

    cfg = dict(qmm.choose_config(1, 128, 1024, 4, 128, "uint4"), split=4, last_block=False,
               cluster=True)
    func = qmm_kernel(1, 128, 1024, "uint4", "float16", 128, **cfg).func
    launch = next(s for s in func.body.stmts if type(s).__name__ == "KernelLaunch") \
        if hasattr(func.body, "stmts") else func.body
    assert launch.cluster == (1, 1, 4)
    assert tuple(func.params[-2].shape) == (1, 1, 1)  # (no partial sums in global memory)


@pytest.mark.gpu
@pytest.mark.parametrize("wtype, M, split", [("uint4", 1, 4), ("int4", 16, 8), ("uint8", 5, 2),
                                             ("float6_e3m2", 16, 4)])
def test_cluster_split_k_on_the_gpu_gives_the_second_kernels_bits(wtype, M, split):
    one, two, ref = _pair(wtype, M, 1024, 4096, split, True, device="cuda")
    assert torch.equal(one, two)
    assert ((one.double() - ref).norm() / ref.norm()).item() < 1e-2
