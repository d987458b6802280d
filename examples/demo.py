"""The README demo: a GEMM and a causal FlashAttention, checked against torch.

Runs on the GPU when torch sees one (falling back to the CPU interpreter while the CUDA backend
does not support a kernel yet), otherwise on the interpreter. Prints the relative error of each.

    python examples/demo.py
"""

import time

import torch
from flash_attention import flash_attention
from flash_attention import reference as attention_reference
from gemm import matmul
from gemm import reference as gemm_reference

from tilecraft import TilecraftError


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def run(kernel, inputs, device: str):
    """Call `kernel` on `device`; on "cuda", fall back to the interpreter for unsupported kernels."""
    if device == "cuda":
        try:
            return kernel(*(x.cuda() for x in inputs)), "cuda"
        except TilecraftError as e:
            if e.code != "TC502":
                raise
            print(f"  {e.message}; running on the interpreter instead")
    return kernel(*(x.cpu() for x in inputs)), "interpreter"


def main(device: str | None = None) -> dict[str, float]:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    errors = {}

    M = N = K = 512
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    start = time.perf_counter()
    c, where = run(matmul(M, N, K, block_M=128, block_N=128, block_K=32), (a, b), device)
    errors["gemm"] = rel_err(c, gemm_reference(a, b))
    print(
        f"gemm {M}x{N}x{K} on {where}: rel err {errors['gemm']:.2e} "
        f"({time.perf_counter() - start:.2f} s)"
    )

    batch, heads, seq_len, dim = 1, 4, 512, 64
    q, k, v = (torch.randn(batch, seq_len, heads, dim, dtype=torch.float16) for _ in range(3))
    start = time.perf_counter()
    kernel = flash_attention(batch, heads, seq_len, dim, True, block_M=128, block_N=64)
    out, where = run(kernel, (q, k, v), device)
    errors["flash_attention"] = rel_err(out, attention_reference(q, k, v, is_causal=True))
    print(
        f"causal flash attention b{batch} h{heads} s{seq_len} d{dim} on {where}: "
        f"rel err {errors['flash_attention']:.2e} ({time.perf_counter() - start:.2f} s)"
    )
    return errors


if __name__ == "__main__":
    main()
