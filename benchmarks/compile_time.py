"""Cold vs cached compile time of the GEMM kernel (front end -> loaded cubin), and launch overhead.

Runs itself twice in fresh processes sharing one empty cache directory: the first is cold, the
second finds the cubin on disk. Usage: PYTHONPATH=$PWD python3 benchmarks/compile_time.py
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


def one_build() -> None:
    import torch

    torch.zeros(1, device="cuda")  # CUDA context outside the measurement
    t0 = time.perf_counter()
    import gemm

    kernel = gemm.matmul(4096, 4096, 4096, 128, 128, 32)
    kernel.resources  # noqa: B018  (builds and loads the cubin)
    a = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    t1 = time.perf_counter()
    c = kernel(a, b)
    torch.cuda.synchronize()
    n = 200
    t2 = time.perf_counter()
    for _ in range(n):
        kernel(a, b)
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"ready in {(t1 - t0) * 1e3:.0f} ms; host time per call {(t3 - t2) / n * 1e6:.1f} us "
          f"(with out_idx allocation); checksum {c.float().abs().mean().item():.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one_build()
    else:
        env = dict(os.environ, TILECRAFT_CACHE_DIR=tempfile.mkdtemp())
        for label in ("cold", "cached"):
            print(label, end=": ", flush=True)
            subprocess.run([sys.executable, __file__, "child"], env=env, check=True)
