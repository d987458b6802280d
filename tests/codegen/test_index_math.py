"""The index arithmetic of the GEMM's ldmatrix loads on the block path: one per-thread address
per operand, every load a constant XOR/offset of it (block/ldmatrix.py verifies the
decomposition for every thread)."""

import re
import sys
from pathlib import Path

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.options import CompileOptions

# `&A_shared_[A_shared_t1_row]`, `&A_shared_[A_shared_t1_row ^ 16]`,
# `&A_shared_[(A_shared_t1_row ^ 16) + 512]`
_ADDRESS = re.compile(r"&\w+\[(?:(\w+_row)(?: \^ \d+)?|\((\w+_row) \^ \d+\))(?: \+ \d+)?\]\);$")


@pytest.mark.parametrize("tile", [(128, 128, 32, 128, 3), (128, 256, 64, 256, 3),
                                  (256, 128, 128, 256, 2), (64, 64, 32, 128, 3)])
def test_gemm_ldmatrix_addresses_use_one_offset_per_operand(tile):
    """Every ldmatrix of the GEMM mainloop goes through its operand's per-thread `<tile>_row`
    (declared once per operand), moved by constants only. The mma.sync path: by default this
    gemm runs on wgmma on sm_90a, which reads shared memory by descriptor."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from gemm import matmul

    bm, bn, bk, threads, stages = tile
    kernel = matmul(1024, 1024, 1024, bm, bn, bk, num_stages=stages, threads=threads)
    src = generate_cuda(kernel.func, options=CompileOptions.for_arch("sm_90a", wgmma=False)).source
    loads = [ln.strip() for ln in src.splitlines() if "tc::ldmatrix" in ln]
    matches = [_ADDRESS.search(ln) for ln in loads]
    assert loads and all(matches), [ln for ln, m in zip(loads, matches) if not m][:3]
    rows = {m.group(1) or m.group(2) for m in matches}
    declared = re.findall(r"const int (\w+_row) = ", src)
    assert len(rows) == 2 and sorted(declared) == sorted(rows), (rows, declared)
