"""Kernels in a module with `from __future__ import annotations` (PEP 563): their annotations
are strings, so a name a nested kernel reads only in its annotations is in no closure cell; the
front end finds it among the defining factory's locals, as Python itself would have."""

from __future__ import annotations

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.diagnostics import TilecraftError


@tilecraft.jit(out_idx=[-1])
def first_column(M, K, dtype="float32"):
    rows = M  # a factory local, read only in an annotation

    @T.prim_func
    def kernel(A: T.Tensor((rows, K), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(M):
                B[i] = A[i, 0]

    return kernel


def test_names_read_only_in_string_annotations_come_from_the_factory():
    a = torch.randn(64, 16)
    assert torch.equal(first_column(64, 16)(a), a[:, 0])
    assert first_column(32, 8, "float16").params[0].shape == (32, 8)


def test_a_name_defined_nowhere_is_still_tc104():
    def factory():
        @T.prim_func
        def kernel(A: T.Tensor((undefined_dim,), "float32")):  # noqa: F821
            with T.Kernel(1, threads=32):
                A[0] = 1.0

        return kernel

    with pytest.raises(TilecraftError) as info:
        factory()
    assert info.value.code == "TC104" and "undefined_dim" in str(info.value)
