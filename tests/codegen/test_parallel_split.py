"""Masked T.Parallel stores decided once per tile: the printed margin range is exact."""

import ast
import re
import sys
from pathlib import Path

from tilecraft.codegen.cuda.build import generate_cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

_AFFINE = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.USub,
           ast.Name, ast.Load, ast.Constant)


def _c_affine(expr: str, env: dict[str, int]) -> int:
    """The value of a printed C expression of + - * on ints (C's and Python's agree on these)."""
    tree = ast.parse(expr, mode="eval")
    bad = [type(n).__name__ for n in ast.walk(tree) if not isinstance(n, _AFFINE)]
    assert not bad, (expr, bad)
    return eval(compile(tree, "<c>", "eval"), {"__builtins__": {}}, dict(env))


def test_causal_mask_margin_range_is_the_tile_min_and_max():
    from flash_attention import flash_attention

    bm, bn = 128, 64
    kernel = flash_attention(1, 2, 1024, 64, True, block_M=bm, block_N=bn, threads=128)
    src = generate_cuda(kernel.func, "sm_90a").source
    decl = next(ln for ln in src.splitlines() if "const int d_lo" in ln)
    lo_expr, hi_expr = re.match(r"\s*const int d_lo = (.*), d_hi = (.*);  //", decl).groups()
    for bx in range(8):
        for k in range(8):
            margins = [(bx * bm + i) - (k * bn + j) for i in (0, bm - 1) for j in (0, bn - 1)]
            assert _c_affine(lo_expr, {"bx_": bx, "k_": k}) == min(margins)
            assert _c_affine(hi_expr, {"bx_": bx, "k_": k}) == max(margins)
    # three loops: all kept, all masked, and the per-element select for boundary tiles
    assert "if ((d_lo >= 0) && (d_hi >= 0))" in src
    assert re.search(r"\}\s*else if \(!\(d_lo >= 0\) && !\(d_hi >= 0\)\) \{", src)
    assert re.search(r"\}\s*else \{\s*#pragma unroll\s*for \(int li = 0; li < 64; \+\+li\) \{"
                     r"[^}]*\? 0\.0f : -__int_as_float\(0x7f800000\)", src)
