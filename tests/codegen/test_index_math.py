"""The index arithmetic the CUDA emitters print, evaluated in Python for every thread."""

import itertools
import math
from types import SimpleNamespace

import pytest

from tilecraft.codegen.cuda.emit_copy import _chunk_coords


def c_eval(expr: str, **env: int) -> int:
    # the printed expressions use only + * / % on non-negative ints: C `/` is floor division
    return eval(expr.replace("/", "//"), {}, env)


@pytest.mark.parametrize("cshape, threads", [
    ((128, 4), 128), ((32, 16), 128), ((64, 16), 256), ((128, 16), 128), ((8, 16), 128),
    ((256, 2), 128), ((3, 64), 64), ((16, 8, 4), 64), ((64, 1), 32),
])
def test_chunk_coords_cover_every_chunk_once(cshape, threads):
    em = SimpleNamespace(state=SimpleNamespace(num_threads=threads))
    coords = _chunk_coords(em, cshape)
    total = math.prod(cshape)
    seen = []
    for it in range(math.ceil(total / threads)):
        for tid in range(threads):
            if it * threads + tid >= total:
                continue
            seen.append(tuple(c_eval(e, tid=tid, it=it, c=it * threads + tid) for e in coords))
    assert sorted(seen) == list(itertools.product(*map(range, cshape)))


@pytest.mark.parametrize("tile", [(128, 128, 32, 128, 3), (128, 256, 64, 256, 3),
                                  (256, 128, 128, 256, 2), (64, 64, 32, 128, 3)])
def test_gemm_ldmatrix_addresses_use_one_offset_per_operand(tile):
    """Every ldmatrix of the GEMM mainloop goes through the per-thread a_off / b_off (the
    decomposition (off ^ X) + Y is verified for every thread inside offset_plan). The mma.sync
    path: by default this gemm runs on wgmma on sm_90a, which reads shared memory by descriptor."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from gemm import matmul

    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.options import CompileOptions

    bm, bn, bk, threads, stages = tile
    kernel = matmul(1024, 1024, 1024, bm, bn, bk, num_stages=stages, threads=threads)
    src = generate_cuda(kernel.func, options=CompileOptions.for_arch("sm_90a", wgmma=False)).source
    loads = [ln for ln in src.splitlines() if "tc::ldmatrix" in ln]
    assert loads and all("a_off" in ln or "b_off" in ln for ln in loads), loads[:3]


def test_offset_plan_matches_the_printed_addresses():
    from tilecraft.codegen.cuda.emit_gemm import _c_eval

    # the swizzled A row address of the 128x32 tile: chunk (kk*2 + lane/16) ^ ((row >> 1) & 3)
    expr = "(r) * 32 + ((((k * 16 + l / 16 * 8) >> 3) ^ (((r) >> 1) & 3)) << 3)"
    for r in range(64):
        for l in range(32):
            base = _c_eval(expr, {"r": r, "l": l, "k": 0})
            for k in range(2):
                assert _c_eval(expr, {"r": r, "l": l, "k": k}) == base ^ (16 * k)
