"""The Figure 2 matmul (f16 x f16, explicit mma layouts over 128 threads) on the block VM."""

from __future__ import annotations

import numpy as np
import pytest

from .programs import matmul


def _inputs(m: int, n: int, k: int):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, dtype=np.float16)  # poisoned: every element must be written
    return a, b, c


@pytest.mark.parametrize("shared", [False, True], ids=["registers", "copy_async"])
def test_matmul_matches_float64_reference(shared):
    a, b, c = _inputs(128, 16, 64)
    matmul(128, 16, 64, shared=shared).run(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert not np.isnan(c).any()
    err = np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < 2e-3


def test_matmul_rounds_like_the_tile_ir_gemm():
    """float32 accumulation per k-step, then one rounding to float16 (interp's gemm rule)."""
    a, b, c = _inputs(64, 8, 32)
    matmul(64, 8, 32).run(a, b, c)
    acc = np.zeros((64, 8), np.float32)
    for k in range(0, 32, 16):
        part = a[:, k:k + 16].astype(np.float64) @ b[k:k + 16].astype(np.float64)
        acc = (part + acc.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(c, acc.astype(np.float16))


def test_shared_tiles_are_stored_through_their_swizzled_layout():
    from tilecraft.block import SharedTensor
    from tilecraft.block.vm import run

    a, b, c = _inputs(64, 8, 16)
    prog = matmul(64, 8, 16, shared=True)
    vm = run(prog, [a, b, c])
    sa = next(t for t in vm.smem if isinstance(t, SharedTensor) and t.name == "sa")
    assert sa.layout.swizzle is not None
    flat = vm.smem[sa]
    np.testing.assert_array_equal(flat[sa.layout.offsets()], a)  # the logical tile
    assert not np.array_equal(flat.reshape(64, 16), a)  # ... not stored row-major
