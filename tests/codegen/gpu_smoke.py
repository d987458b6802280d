"""One-call GPU check: run every example's main() on CUDA (each prints its relative errors),
then time the GEMM against torch. Usage: PYTHONPATH=$PWD python3 tests/codegen/gpu_smoke.py"""

import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import importlib  # noqa: E402

for mod in ["elementwise_add", "gemm", "softmax", "rmsnorm_silu", "layernorm", "flash_attention",
            "splitk_gemm", "blocksparse_attention", "flash_mla"]:
    t0 = time.time()
    try:
        importlib.import_module(mod).main("cuda")
        torch.cuda.synchronize()
        print(f"[{mod}] ok ({time.time() - t0:.1f}s)", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"[{mod}] FAILED: {type(e).__name__}: {str(e)[:400]}", flush=True)
        traceback.print_exc(limit=3)

import triton.testing  # noqa: E402

import gemm  # noqa: E402

rows = []
for (M, N, K) in [(4096, 4096, 4096), (8192, 8192, 8192)]:
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    for cfg in [(128, 128, 32, 3), (128, 128, 64, 3), (128, 256, 32, 3)]:
        try:
            k = gemm.matmul(M, N, K, *cfg[:3], num_stages=cfg[3])
            c = k(a, b)
            err = ((c.double() - (a.double() @ b.double())).norm() / (a.double() @ b.double()).norm()).item()
            ms = triton.testing.do_bench(lambda: k(a, b), return_mode="median")
            rows.append((f"{M}x{N}x{K} tile {cfg}", 2 * M * N * K / ms / 1e9, err, k.resources.registers))
        except Exception as e:  # noqa: BLE001
            rows.append((f"{M}x{N}x{K} tile {cfg}", 0.0, str(e)[:80], 0))
    ms = triton.testing.do_bench(lambda: a @ b, return_mode="median")
    rows.append((f"{M}x{N}x{K} torch", 2 * M * N * K / ms / 1e9, 0.0, 0))
print("\nGEMM fp16 -> fp16 (fp32 accumulate), median do_bench")
for name, tf, err, regs in rows:
    print(f"{name:40s} {tf:8.1f} TFLOP/s  err {err}  regs {regs}")
