"""Memory-bound examples against torch and the copy bandwidth, one process.

elementwise_add, softmax, rmsnorm+silu and layernorm at sizes that fill the H100 (hundreds of MB
moved per call). GB/s counts each input read once and each output written once.
Usage: PYTHONPATH=$PWD python3 benchmarks/memory_bound.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from elementwise_add import elementwise_add  # noqa: E402
from layernorm import layernorm  # noqa: E402
from rmsnorm_silu import rmsnorm_silu  # noqa: E402
from softmax import softmax  # noqa: E402


def gbps(nbytes: int, fn) -> float:
    return nbytes / do_bench(fn, return_mode="median") / 1e6


def rel(out, ref) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def main() -> None:
    rows = []
    src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    rows.append(("copy 1 GiB (peak)", gbps(2 * src.numel() * 4, lambda: dst.copy_(src)), None,
                 float("nan")))
    del src, dst

    n = 2**26
    a, b = (torch.randn(n, device="cuda") for _ in range(2))
    k = elementwise_add()
    rows.append(("add fp32 2^26", gbps(3 * n * 4, lambda: k(a, b)),
                 gbps(3 * n * 4, lambda: a + b), rel(k(a, b), a + b)))
    del a, b

    M, N = 16384, 4096
    x = torch.randn(M, N, dtype=torch.float16, device="cuda")
    k = softmax(M, N)
    rows.append(("softmax 16384x4096", gbps(2 * M * N * 2, lambda: k(x)),
                 gbps(2 * M * N * 2, lambda: torch.softmax(x, -1)),
                 rel(k(x), torch.softmax(x.float(), -1))))
    g = torch.randn(N, dtype=torch.float16, device="cuda")
    k = rmsnorm_silu(M, N)
    ref = F.silu(x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
                 * g.float())
    rows.append(("rmsnorm+silu 16384x4096", gbps(2 * M * N * 2, lambda: k(x, g)),
                 gbps(2 * M * N * 2, lambda: F.silu(F.rms_norm(x, (N,), g, 1e-5))),
                 rel(k(x, g), ref)))
    w, bias = (torch.randn(N, dtype=torch.float16, device="cuda") for _ in range(2))
    k = layernorm(M, N)
    rows.append(("layernorm 16384x4096", gbps(2 * M * N * 2, lambda: k(x, w, bias)),
                 gbps(2 * M * N * 2, lambda: F.layer_norm(x, (N,), w, bias)),
                 rel(k(x, w, bias), F.layer_norm(x.float(), (N,), w.float(), bias.float()))))
    print(f"\n{'kernel':26s} {'tilecraft GB/s':>15s} {'torch GB/s':>11s} {'ratio':>6s} {'rel err':>8s}")
    for name, tc, th, err in rows:
        ratio = f"{tc / th:6.2f}" if th else "      "
        print(f"{name:26s} {tc:15.0f} {th or 0:11.0f} {ratio} {err:8.1e}")


if __name__ == "__main__":
    main()
