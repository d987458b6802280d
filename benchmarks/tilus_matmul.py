"""Tilus-level kernels on the GPU against cuBLAS, one process: the Figure 2 matmul
(examples/tilus_matmul.py: 64x8 tiles straight from global memory, one mma per k step) and the
tiled variant of tests/block (64x32 tiles, 8 mma steps per 32-wide k step). A baseline for the
block printer's selection work (vector loads, ldmatrix, cp.async, pipelining), not a target.

Usage: PYTHONPATH=$PWD python3 benchmarks/tilus_matmul.py
"""

import sys
from pathlib import Path

import torch
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from tilus_matmul import tilus_matmul  # noqa: E402


def tflops(m, n, k, fn) -> float:
    return 2 * m * n * k / do_bench(fn, return_mode="median") / 1e9


def main() -> None:
    for m, n, k in [(4096, 4096, 4096), (8192, 8192, 8192)]:
        a = torch.randn(m, k, dtype=torch.float16, device="cuda")
        b = torch.randn(k, n, dtype=torch.float16, device="cuda")
        c = torch.empty(m, n, dtype=torch.float16, device="cuda")
        kern = tilus_matmul(m, n, k)
        kern(a, b, c)
        ref = a.double() @ b.double()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        t = tflops(m, n, k, lambda: kern(a, b, c))
        cu = tflops(m, n, k, lambda: torch.mm(a, b))
        print(f"figure 2 matmul {m}x{n}x{k}: {t:7.1f} TFLOP/s, cuBLAS {cu:6.1f} "
              f"({t / cu:.3f}x), rel err {err:.1e}")


if __name__ == "__main__":
    main()
