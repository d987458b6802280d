"""GEMM fp16 (fp32 accumulate): tilecraft vs cuBLAS (torch) on TileLang appendix H / ANCHORS shapes.

Usage: PYTHONPATH=$PWD python3 benchmarks/gemm.py
"""

import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from gemm import matmul  # noqa: E402

SHAPES = [(8192, 1024, 8192), (8192, 8192, 8192), (8192, 28672, 8192), (8192, 8192, 28672)]
CONFIGS = [(128, 128, 32, 3), (128, 128, 64, 3)]


def main() -> None:
    rows = []
    for M, N, K in SHAPES:
        a = torch.randn(M, K, dtype=torch.float16, device="cuda")
        b = torch.randn(K, N, dtype=torch.float16, device="cuda")
        ref = (a.float() @ b.float())
        best, err = 0.0, float("nan")
        for bm, bn, bk, st in CONFIGS:
            kern = matmul(M, N, K, bm, bn, bk, num_stages=st)
            c = kern(a, b)
            e = ((c.float() - ref).norm() / ref.norm()).item()
            ms = do_bench(lambda: kern(a, b), return_mode="median")
            if 2 * M * N * K / ms / 1e9 > best:
                best, err = 2 * M * N * K / ms / 1e9, e
        ms = do_bench(lambda: a @ b, return_mode="median")
        rows.append((f"{M}x{N}x{K}", best, err, 2 * M * N * K / ms / 1e9))
        del a, b, ref
    print("\nGEMM fp16, TFLOP/s (median)")
    print(f"{'shape':20s} {'tilecraft':>10s} {'rel err':>9s} {'cuBLAS':>8s} {'ratio':>6s}")
    for name, tc, err, cb in rows:
        print(f"{name:20s} {tc:10.1f} {err:9.1e} {cb:8.1f} {tc / cb:6.2f}")


if __name__ == "__main__":
    main()
