"""T.max / T.min and reduce_max / reduce_min order signed zeros as the GPU does (-0.0 < +0.0:
PTX max/min), on the interpreter and on the GPU, bit for bit."""

import pytest
import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit
def zero_min_max(dtype="float32"):
    @T.prim_func
    def k(A: T.Tensor((4, 32), dtype), B: T.Tensor((4, 32), dtype),
          MX: T.Tensor((4, 32), dtype), MN: T.Tensor((4, 32), dtype),
          RX: T.Tensor((4,), dtype), RN: T.Tensor((4,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((4, 32), dtype)
            rx = T.alloc_fragment((4,), dtype)
            rn = T.alloc_fragment((4,), dtype)
            T.copy(A[0, 0], a)
            for i, j in T.Parallel(4, 32):
                MX[i, j] = T.max(A[i, j], B[i, j])
                MN[i, j] = T.min(A[i, j], B[i, j])
            T.reduce_max(a, rx, dim=1)
            T.reduce_min(a, rn, dim=1)
            T.copy(rx, RX[0])
            T.copy(rn, RN[0])

    return k


def _inputs(dtype):
    a = torch.zeros(4, 32, dtype=dtype)
    a[0, ::2] = -0.0  # row 0: zeros of both signs
    a[1] = -0.0  # row 1: negative zeros only
    a[2, 5] = -1.0  # row 2: zeros of both signs and a negative value
    a[3] = -a[0]
    b = -a.flip(1)
    outs = [torch.full((4, 32), 7.0, dtype=dtype), torch.full((4, 32), 7.0, dtype=dtype),
            torch.full((4,), 7.0, dtype=dtype), torch.full((4,), 7.0, dtype=dtype)]
    return [a, b, *outs]


def _bits(t):
    return t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_max_of_zeros_of_both_signs_is_positive_zero_and_min_negative_zero(dtype):
    args = _inputs(dtype)
    zero_min_max(str(dtype).split(".")[1])(*args)
    a, b, mx, mn, rx, rn = args
    want_mx = torch.where((a == b) & (a == 0), torch.where(a.signbit() & b.signbit(), -0.0, 0.0),
                          torch.maximum(a, b)).to(dtype)
    want_mn = torch.where((a == b) & (a == 0), torch.where(a.signbit() | b.signbit(), -0.0, 0.0),
                          torch.minimum(a, b)).to(dtype)
    assert torch.equal(_bits(mx), _bits(want_mx)) and torch.equal(_bits(mn), _bits(want_mn))
    assert _bits(rx).tolist() == _bits(torch.tensor([0.0, -0.0, 0.0, 0.0], dtype=dtype)).tolist()
    assert _bits(rn).tolist() == _bits(torch.tensor([-0.0, -0.0, -1.0, -0.0], dtype=dtype)).tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_gpu_orders_signed_zeros_like_the_interpreter(dtype):
    cpu = _inputs(dtype)
    gpu = [t.cuda() for t in _inputs(dtype)]
    kernel = zero_min_max(str(dtype).split(".")[1])
    kernel(*cpu)
    kernel(*gpu)
    for c, g in zip(cpu[2:], gpu[2:]):
        assert torch.equal(_bits(c), _bits(g.cpu()))
