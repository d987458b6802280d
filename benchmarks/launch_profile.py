"""Where the host time of a kernel call goes: cProfile over many calls of a small GEMM.

Usage: PYTHONPATH=$PWD python3 benchmarks/launch_profile.py
"""

import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from gemm import matmul  # noqa: E402


def main() -> None:
    kernel = matmul(256, 256, 256)
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    c = torch.empty(256, 256, dtype=torch.float16, device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    for label, fn in (("with out_idx", lambda: kernel(a, b)),
                      ("torch.empty only", lambda: torch.empty(256, 256, dtype=torch.float16,
                                                               device="cuda"))):
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(f"{label}: {(t1 - t0) / n * 1e6:.1f} us per call")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        kernel(a, b)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    del c


if __name__ == "__main__":
    main()
