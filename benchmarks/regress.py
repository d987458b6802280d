"""A quick before/after check of the headline kernels: one configuration each, beside its peer in
the same process (cuBLAS, cuDNN, torch), correctness first. Run it for two checkouts on one
machine and compare the ratios:

    PYTHONPATH=<checkout> python3 benchmarks/regress.py --label head

Prints one line per kernel: label, kernel, TFLOP/s or GB/s, peer, ratio, relative error.
"""

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


def rel(out, ref) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def gemm(label: str) -> None:
    from gemm import matmul

    M = N = K = 8192
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    kern = matmul(M, N, K, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)
    err = rel(kern(a, b), a.double() @ b.double())
    ms = do_bench(lambda: kern(a, b), return_mode="median")
    ms_ref = do_bench(lambda: a @ b, return_mode="median")
    tf, tf_ref = 2 * M * N * K / ms / 1e9, 2 * M * N * K / ms_ref / 1e9
    print(f"{label} gemm8192 {tf:.0f} TFLOP/s cublas {tf_ref:.0f} ratio {tf / tf_ref:.3f} "
          f"err {err:.1e}", flush=True)


def attention(label: str, causal: bool) -> None:
    from flash_attention import flash_attention

    b, h, s, d = 8, 64, 4096, 128
    q, k, v = (torch.randn(b, s, h, d, dtype=torch.float16, device="cuda") for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    kern = flash_attention(b, h, s, d, causal, block_M=128, block_N=128, threads=256)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        ms_ref = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                          return_mode="median")
    err = rel(kern(q, k, v), ref.transpose(1, 2))
    ms = do_bench(lambda: kern(q, k, v), return_mode="median")
    fl = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    tf, tf_ref = fl / ms / 1e9, fl / ms_ref / 1e9
    print(f"{label} attn_s4096_{'causal' if causal else 'full'} {tf:.0f} TFLOP/s cudnn "
          f"{tf_ref:.0f} ratio {tf / tf_ref:.3f} err {err:.1e}", flush=True)


def mla(label: str) -> None:
    from flash_mla import flash_mla, reference

    batch, heads, seq, dim, pe = 64, 128, 4096, 512, 64
    q = torch.randn(batch, heads, dim, dtype=torch.float16, device="cuda")
    q_pe = torch.randn(batch, heads, pe, dtype=torch.float16, device="cuda")
    kv = torch.randn(batch, seq, 1, dim, dtype=torch.float16, device="cuda")
    k_pe = torch.randn(batch, seq, 1, pe, dtype=torch.float16, device="cuda")
    kern = flash_mla(batch, heads, 1, seq, dim, pe, block_N=64, block_H=64, num_stages=2,
                     threads=256)  # fixed: both trees build the same configuration
    out = kern(q, q_pe, kv, k_pe)[:4]  # the float reference of all 64 batches needs 64 GB
    err = rel(out, reference(q[:4].float(), q_pe[:4].float(), kv[:4].float(), k_pe[:4].float()))
    ms = do_bench(lambda: kern(q, q_pe, kv, k_pe), return_mode="median")
    gb = (kv.numel() + k_pe.numel()) * 2 / ms / 1e6
    print(f"{label} mla_s4096 {gb:.0f} GB/s err {err:.1e}", flush=True)


def softmax(label: str) -> None:
    from softmax import softmax as sm

    M, N = 16384, 4096
    x = torch.randn(M, N, dtype=torch.float16, device="cuda")
    kern = sm(M, N)
    err = rel(kern(x), torch.softmax(x.double(), -1))
    ms = do_bench(lambda: kern(x), return_mode="median")
    ms_ref = do_bench(lambda: torch.softmax(x, -1), return_mode="median")
    gb, gb_ref = 2 * x.numel() * 2 / ms / 1e6, 2 * x.numel() * 2 / ms_ref / 1e6
    print(f"{label} softmax {gb:.0f} GB/s torch {gb_ref:.0f} ratio {gb / gb_ref:.3f} "
          f"err {err:.1e}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="tilecraft")
    label = ap.parse_args().label
    for run in (gemm, lambda lb: attention(lb, False), lambda lb: attention(lb, True), mla,
                softmax):
        try:
            run(label)
        except Exception as e:  # noqa: BLE001  (report and go on to the next kernel)
            print(f"{label} {getattr(run, '__name__', 'attention')}: {type(e).__name__}: "
                  f"{str(e)[:300]}", flush=True)
