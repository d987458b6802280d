"""Check the Triton peers (benchmarks/triton_peers.py) against torch in float32, every config.

Without a CUDA GPU it runs the kernels in Triton's interpreter (TRITON_INTERPRET=1, set here
before triton is imported) on CPU tensors; with one it compiles and runs them on the GPU.
Small shapes, so the interpreter finishes in seconds. Needs `triton`; not part of the test suite.

Usage: python3 benchmarks/check_triton_peers.py
"""

import math
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import triton_peers  # after TRITON_INTERPRET is decided

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
AUTOTUNE = DEVICE == "cuda"  # the autotuner times configs through a GPU driver; none on CPU
TOLERANCE = 1e-2  # relative Frobenius error; fp16 rounding of inputs to the dots is ~1e-3


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    err = ((out.float() - ref).norm() / ref.norm()).item()
    # Poison the output before it is freed: the next call's torch.empty may get this memory back,
    # and a tile that kernel never writes must then show up as NaN, not as the right answer.
    out.fill_(math.nan)
    return err


def attention_ref(q, k, v, causal: bool) -> torch.Tensor:
    q, k, v = (x.float() for x in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[-2]
        s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1).to(q.device), -math.inf)
    return torch.softmax(s, dim=-1) @ v


def main() -> int:
    torch.manual_seed(0)
    mode = "GPU" if DEVICE == "cuda" else "CPU, TRITON_INTERPRET=1"
    print(f"Triton peers vs torch float32 ({mode}), tolerance {TOLERANCE:.0e}")
    if not AUTOTUNE:
        print("  (each config run directly; the autotuned entry points need a GPU to time configs)")
    failures = 0

    def report(name: str, err: float) -> None:
        nonlocal failures
        ok = err < TOLERANCE  # NaN fails too
        failures += not ok
        print(f"  {name:54s} rel err {err:.2e}  {'ok' if ok else 'FAIL'}", flush=True)

    # The second shape has ragged M, N and K edges and more tile-rows than one GROUP_M band.
    for M, N, K in ((128, 256, 128), (1100, 300, 100)):
        a = torch.randn(M, K, dtype=torch.float16, device=DEVICE)
        b = torch.randn(K, N, dtype=torch.float16, device=DEVICE)
        ref = a.float() @ b.float()
        for cfg in triton_peers.GEMM_CONFIGS:
            out = triton_peers.matmul(a, b, cfg)
            report(f"gemm {M}x{N}x{K} {triton_peers.describe(cfg)}", rel_err(out, ref))
        if AUTOTUNE:
            report(f"gemm {M}x{N}x{K} autotuned", rel_err(triton_peers.matmul(a, b), ref))

    for batch, heads, seq, dim in ((1, 2, 256, 128), (2, 3, 384, 128)):
        shape = (batch, heads, seq, dim)
        q, k, v = (torch.randn(shape, dtype=torch.float16, device=DEVICE) for _ in range(3))
        for causal in (False, True):
            ref = attention_ref(q, k, v, causal)
            case = f"attention b{batch} h{heads} s{seq} d{dim} {'causal' if causal else 'full'}"
            for cfg in triton_peers.ATTENTION_CONFIGS:
                out = triton_peers.attention(q, k, v, causal, cfg)
                report(f"{case} {triton_peers.describe(cfg)}", rel_err(out, ref))
            if AUTOTUNE:
                out = triton_peers.attention(q, k, v, causal)
                report(f"{case} autotuned", rel_err(out, ref))

    print("all ok" if failures == 0 else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
