"""64-bit indexing of multi-dimensional tensors: every index into a tensor that may hold 2^31
elements or more is computed in 64 bits (each product and sum, lets and loop variables too),
in T.copy paths as in scalar loads and stores; smaller tensors keep 32-bit arithmetic."""

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


@tilecraft.jit
def corner(rows, cols, dynamic=False):
    """In place on an int8 [rows, cols] tensor: x * 3 + 1 over the last two rows' last 2048
    columns (4 blocks of 512, through shared memory and a fragment), and + 5 on 2 scalars
    of row rows - 3 per block."""
    R, C = (T.dynamic("R"), T.dynamic("C")) if dynamic else (rows, cols)

    @T.prim_func
    def k(A: T.Tensor((R, C), "int8")):
        with T.Kernel(4, threads=128) as bx:
            t = T.alloc_shared((2, 512), "int8")
            f = T.alloc_fragment((2, 512), "int8")
            row = R - 2
            col = C - 2048 + bx * 512
            T.copy(A[row, col], t)
            T.copy(t, f)
            for i, j in T.Parallel(2, 512):
                f[i, j] = f[i, j] * 3 + 1
            T.copy(f, A[row, col])
            for s in T.serial(2):
                A[R - 3, col + s] = A[R - 3, col + s] + 5

    return k


def corner_reference(a: np.ndarray) -> np.ndarray:
    """What `corner` leaves in the last 3 rows' last 2048 columns of `a`."""
    out = a[-3:, -2048:].copy()
    out[1:] = (out[1:].astype(np.int32) * 3 + 1).astype(np.int8)
    for b in range(4):
        out[0, b * 512: b * 512 + 2] += 5
    return out


def _subscripts(src: str, name: str) -> list[str]:
    """The index expressions of every access `name[...]` in `src` (balanced brackets)."""
    out = []
    for m in re.finditer(rf"\b{name}\[", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"[": 1, "]": -1}.get(src[i], 0)
            i += 1
        out.append(src[m.end(): i - 1])
    return out


def _body(factory) -> str:
    return generate_cuda(factory.func, "sm_90a").source.split('extern "C"')[1]


# (rows, cols, dynamic): 2^32 elements in a square; a dimension past 2^31; dynamic dims
HUGE = [(2**16, 2**16, False), (3, 2**31 + 4096, False), (3, 2**31 - 4096, True)]


@pytest.mark.parametrize("rows,cols,dynamic", HUGE)
def test_every_index_of_a_huge_2d_tensor_is_64_bit(rows, cols, dynamic):
    body = _body(corner(rows, cols, dynamic))
    assert "const long long col_ = " in body
    assert ("const long long row_ = " in body) == dynamic  # static: `R - 2` is a constant
    subs = _subscripts(body, "A_")
    assert len(subs) >= 4  # the copy in, the copy out, the scalar load and store
    for s in subs:
        assert s.startswith("(long long)("), s  # the first term is 64-bit ...
        terms = re.sub(r" \* \(?[RC]_\)?(?!\w)", "", s)  # (a dynamic dim times a 64-bit sum)
        for v in re.findall(r"(?<![\w)])(\w+_)\b", terms):  # ... and so is every user value
            wide = f"const long long {v} = " in body  # (a let that is already 64-bit)
            assert wide or re.search(rf"\(long long\){v}\b", s), (v, s)


def test_a_dimension_past_2_31_has_no_32_bit_constant_sum():
    """`C - 2048 + bx * 512` with C = 2^31 + 4096 exceeds int: the let is a long long."""
    body = _body(corner(3, 2**31 + 4096))
    assert "const long long col_ = 2147485696LL + (long long)bx_ * 512;" in body
    assert "2147485696 + (bx_" not in body


def test_small_2d_tensor_keeps_32_bit_indices():
    assert "long long" not in _body(corner(64, 4096))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("rows,cols,dynamic", HUGE)
def test_huge_2d_kernels_compile(rows, cols, dynamic, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    kernel = tilecraft.compile(corner.factory(rows, cols, dynamic), arch=arch)
    assert kernel.resources.spill_stores == 0


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols,dynamic", [(3, 2**31 + 4096, False),
                                               (2**16 + 8, 2**15, True)])
def test_corner_of_a_tensor_past_2_31_elements_matches_the_interpreter(rows, cols, dynamic,
                                                                        tmp_path):
    """GPU against the interpreter (on a sparse memory-mapped copy) near the end of a tensor of
    more than 2^31 int8 elements (6.4 GB and 2.1 GB)."""
    import torch

    a = torch.empty(rows, cols, dtype=torch.int8, device="cuda")
    tail = torch.randint(-100, 100, (3, 2048), dtype=torch.int8)
    a[-3:, -2048:] = tail.cuda()
    host = np.memmap(tmp_path / "a", dtype=np.int8, mode="w+", shape=(rows, cols))
    host[-3:, -2048:] = tail.numpy()
    kernel = corner(rows, cols, dynamic)
    kernel(a)
    kernel(host.view(np.ndarray))
    got = a[-3:, -2048:].cpu().numpy()
    assert np.array_equal(host[-3:, -2048:], corner_reference(tail.numpy()))
    assert np.array_equal(got, host[-3:, -2048:])
    del a
