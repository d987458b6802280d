"""The GEMM's copy-path variants head to head in one process: cp.async, TMA with a CTA barrier per
iteration, TMA with per-stage "empty" mbarriers (the default), on the appendix H shapes.

Usage: PYTHONPATH=$PWD TILECRAFT_JIT_CACHE=0 python3 benchmarks/gemm_variants.py
(the variants are chosen by environment variables read when each kernel is generated).
"""

import os
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from gemm import matmul  # noqa: E402

SHAPES = [(8192, 8192, 8192), (8192, 1024, 8192), (8192, 28672, 8192), (8192, 8192, 28672)]
VARIANTS = {"cp.async": {"TILECRAFT_TMA": "0"}, "tma+barrier": {"TILECRAFT_TMA_EMPTY": "0"},
            "tma+empty": {}}


def build(M, N, K, env):
    for v in ("TILECRAFT_TMA", "TILECRAFT_TMA_EMPTY"):
        os.environ.pop(v, None)
    os.environ.update(env)
    return matmul(M, N, K, 128, 256, 64, num_stages=4, threads=256)


def main() -> None:
    for M, N, K in SHAPES:
        a = torch.randn(M, K, dtype=torch.float16, device="cuda")
        b = torch.randn(K, N, dtype=torch.float16, device="cuda")
        ref = a.float() @ b.float()
        kernels, errors = {}, {}
        for name, env in VARIANTS.items():
            kernels[name] = build(M, N, K, env)
            c = kernels[name](a, b)
            errors[name] = ((c.float() - ref).norm() / ref.norm()).item()
        flop = 2 * M * N * K
        runs = {n: [] for n in ["cuBLAS", *kernels]}
        for _ in range(3):  # alternating rounds
            runs["cuBLAS"].append(flop / do_bench(lambda: a @ b, return_mode="median") / 1e9)
            for n, k in kernels.items():
                runs[n].append(flop / do_bench(lambda k=k: k(a, b), return_mode="median") / 1e9)
        med = {n: sorted(v)[1] for n, v in runs.items()}
        print(f"{M}x{N}x{K}: cuBLAS {med['cuBLAS']:.0f} | " + " | ".join(
            f"{n} {med[n]:.0f} ({med[n] / med['cuBLAS']:.2f}) err {errors[n]:.1e}"
            for n in kernels), flush=True)


if __name__ == "__main__":
    main()
