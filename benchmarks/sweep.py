"""Sweep tile configurations of the GEMM and attention examples on one shape each (tuning aid).

Prints one line per config (TFLOP/s, relative error, registers) next to the peer measured in the
same process. Usage: PYTHONPATH=$PWD python3 benchmarks/sweep.py [gemm] [attn]
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from flash_attention import flash_attention  # noqa: E402
from gemm import matmul  # noqa: E402

GEMM = [(128, 256, 64, 4, 256, 8), (128, 256, 64, 3, 256, 8), (256, 128, 64, 4, 256, 8),
        (128, 256, 32, 6, 256, 8), (128, 256, 64, 4, 256, 16), (128, 256, 64, 4, 256, 4),
        (128, 128, 64, 4, 128, 8), (128, 256, 32, 8, 256, 8), (256, 128, 32, 8, 256, 8),
        (128, 256, 64, 4, 128, 8)]
ATTN = [(128, 64, 2, 256), (128, 64, 2, 128), (128, 128, 2, 256), (64, 64, 2, 128),
        (128, 32, 2, 128), (64, 64, 3, 128), (128, 128, 2, 128)]


def tflops(flop: float, fn) -> float:
    return flop / do_bench(fn, return_mode="median") / 1e9


def sweep_gemm(M=8192, N=8192, K=8192) -> None:
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    ref = a.float() @ b.float()
    flop = 2 * M * N * K
    peer = tflops(flop, lambda: a @ b)
    print(f"GEMM {M}x{N}x{K}: cuBLAS {peer:.1f} TFLOP/s")
    for bm, bn, bk, st, th, panel in GEMM:
        try:
            k = matmul(M, N, K, bm, bn, bk, num_stages=st, threads=th, panel=panel)
            c = k(a, b)
            err = ((c.float() - ref).norm() / ref.norm()).item()
            tf = tflops(flop, lambda: k(a, b))
            print(f"  {bm}x{bn}x{bk} s{st} t{th} panel {panel}: {tf:6.1f} ({tf / peer:.2f}x) err {err:.1e} "
                  f"regs {k.resources.registers} spill {k.resources.spill_stores}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"  {bm}x{bn}x{bk} s{st} t{th}: {type(e).__name__}: {str(e)[:300]}")


def sweep_attn(batch=8, heads=64, seq=4096, dim=128) -> None:
    for causal in (False, True):
        q, k, v = (torch.randn(batch, seq, heads, dim, dtype=torch.float16, device="cuda")
                   for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        flop = 4 * batch * heads * seq * seq * dim / (2 if causal else 1)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            peer = tflops(flop, lambda: F.scaled_dot_product_attention(qt, kt, vt,
                                                                       is_causal=causal))
        ref = ref.transpose(1, 2).float()
        print(f"attention b{batch} h{heads} s{seq} d{dim} causal={causal}: SDPA flash {peer:.1f}")
        for bm, bn, st, th in ATTN:
            try:
                kern = flash_attention(batch, heads, seq, dim, causal, block_M=bm, block_N=bn,
                                       num_stages=st, threads=th)
                out = kern(q, k, v)
                err = ((out.float() - ref).norm() / ref.norm()).item()
                tf = tflops(flop, lambda: kern(q, k, v))
                print(f"  {bm}x{bn} s{st} t{th}: {tf:6.1f} ({tf / peer:.2f}x) err {err:.1e} "
                      f"regs {kern.resources.registers} spill {kern.resources.spill_stores}",
                      flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"  {bm}x{bn} s{st} t{th}: {type(e).__name__}: {str(e)[:300]}")
        del q, k, v, qt, kt, vt, ref


if __name__ == "__main__":
    which = sys.argv[1:] or ["gemm", "attn"]
    if "gemm" in which:
        sweep_gemm()
    if "gemm1024" in which:  # the skinny appendix H shape: 8192 x 1024 x 8192
        sweep_gemm(8192, 1024, 8192)
    if "attn" in which:
        sweep_attn()
