"""gemm: C (+)= op(A) @ op(B), products exact, accumulated in at least fp32."""

from __future__ import annotations

import numpy as np

from tilecraft.ir import Gemm

from . import rule
from .common import read, write


@rule(Gemm)
def gemm(m, op: Gemm) -> None:
    a = read(m, op.A).astype(np.float64)
    b = read(m, op.B).astype(np.float64)
    if op.transpose_A:
        a = a.T
    if op.transpose_B:
        b = b.T
    with np.errstate(all="ignore"):  # inf/NaN follow IEEE, as on the GPU (no numpy warnings)
        acc = a @ b
        if not op.clear_accum:
            acc = acc + read(m, op.C).astype(np.float64)
        if op.C.dtype.is_float:
            acc = acc.astype(np.float32)  # the tensor cores accumulate in fp32
    write(m, op.C, acc)
