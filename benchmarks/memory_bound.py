"""Memory-bound examples against torch and the copy bandwidth, one process.

elementwise_add, softmax, rmsnorm+silu and layernorm (fp16) at 16384x4096, 4096x16384 and
65536x1024 (hundreds of MB moved per call). GB/s counts each input read once and each output
written once; "% copy" is against a device-to-device copy measured in the same process.
Every result is checked against torch in float64 (rel err).

Two timers, each against the copy timed its own way: triton's do_bench ("% copy": the L2
emptied by writing 256 MB before each call, whose dirty lines the timed call then writes back
to DRAM), and back to back ("b2b %": 50 calls between two CUDA events, the median of 7 such
runs; each call writes back what the one before left in the L2, as in a model's steady
state). The ~70 us norm kernels read 1.4-4 points lower by do_bench (benchmarks/NOTES.md,
session 23). (Emptying the L2 by reads instead would leave the timed call's last ~50 MB of
output unwritten when it ends: 2-3.5 points too fast.)

Usage: PYTHONPATH=$PWD python3 benchmarks/memory_bound.py [--sweep] [--split]
  --sweep   also time a few other tiles of each norm kernel (BLOCK_M, threads) per shape
  --split   also time each row split over a thread-block cluster of 2 and 4 blocks (sm_90)
"""

import statistics
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

SHAPES = [(16384, 4096), (4096, 16384), (65536, 1024)]


def gbps(nbytes: int, fn) -> float:
    return nbytes / do_bench(fn, return_mode="median") / 1e6


def gbps_b2b(nbytes: int, fn, calls: int = 50) -> float:
    """Back to back: `calls` calls between two events, the median of 7 such runs."""
    fn()
    times = []
    for _ in range(7):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / calls)
    return nbytes / statistics.median(times) / 1e6


def rel(out, ref) -> float:
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm()).item()


def refs(x, g, w, b):
    xd = x.double()
    sm = torch.softmax(xd, -1)
    rms = F.silu(xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-5) * g.double())
    ln = F.layer_norm(xd, (x.shape[1],), w.double(), b.double(), 1e-5)
    return sm, rms, ln


def cases(M, N, sweep: bool, split: bool = False):
    """(label, kernel, args, torch fn, reference index) for one shape."""
    out = [("softmax", softmax(M, N), "x", lambda x, g, w, b: torch.softmax(x, -1), 0),
           ("rmsnorm+silu", rmsnorm_silu(M, N), "xg",
            lambda x, g, w, b: F.silu(F.rms_norm(x, (N,), g, 1e-5)), 1),
           ("layernorm", layernorm(M, N), "xwb",
            lambda x, g, w, b: F.layer_norm(x, (N,), w, b, 1e-5), 2)]
    if sweep:
        for bm, th in ((1, 128), (1, 256), (1, 1024), (2, 256), (4, 128), (4, 256), (8, 256)):
            if bm * N // th <= 64 and N % 256 == 0 and N // th >= 8:
                out.append((f"softmax m{bm} t{th}", softmax(M, N, BLOCK_M=bm, BLOCK_N=N,
                                                           threads=th), "x", None, 0))
                out.append((f"rmsnorm+silu m{bm} t{th}", rmsnorm_silu(
                    M, N, BLOCK_M=bm, BLOCK_C=N, threads=th), "xg", None, 1))
        for bm, th in ((1, 256), (1, 1024), (2, 256), (4, 128), (8, 256), (16, 128)):
            if bm * N // th <= 128 and N // th >= 8:
                out.append((f"layernorm m{bm} t{th}", layernorm(M, N, BLOCK_M=bm, threads=th),
                            "xwb", None, 2))
    for sp in (2, 4) if split and N >= 2048 else ():
        out += [(f"softmax split{sp}", softmax(M, N, split=sp), "x", None, 0),
                (f"rmsnorm+silu split{sp}", rmsnorm_silu(M, N, split=sp), "xg", None, 1),
                (f"layernorm split{sp}", layernorm(M, N, split=sp), "xwb", None, 2)]
    return out


def main() -> None:
    sweep, split = "--sweep" in sys.argv, "--split" in sys.argv
    src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    peak = gbps(2 * src.numel() * 4, lambda: dst.copy_(src))
    peak_b2b = gbps_b2b(2 * src.numel() * 4, lambda: dst.copy_(src), calls=5)
    rows = [("copy 1 GiB (peak)", peak, None, float("nan"), peak_b2b)]
    del src, dst

    n = 2**26
    a, b = (torch.randn(n, device="cuda") for _ in range(2))
    k = elementwise_add()
    rows.append(("add fp32 2^26", gbps(3 * n * 4, lambda: k(a, b)),
                 gbps(3 * n * 4, lambda: a + b), rel(k(a, b), a + b),
                 gbps_b2b(3 * n * 4, lambda: k(a, b))))
    del a, b

    for M, N in SHAPES:
        x = torch.randn(M, N, dtype=torch.float16, device="cuda")
        g, w, bias = (1 + 0.1 * torch.randn(N, device="cuda")).half(), \
            (1 + 0.1 * torch.randn(N, device="cuda")).half(), \
            (0.1 * torch.randn(N, device="cuda")).half()
        want = refs(x, g, w, bias)
        named = {"x": x, "g": g, "w": w, "b": bias}
        nbytes = 2 * M * N * 2
        for label, kern, argnames, torch_fn, ri in cases(M, N, sweep, split):
            args = [named[c] for c in argnames]
            err = rel(kern(*args), want[ri])
            tc = gbps(nbytes, lambda: kern(*args))
            th = gbps(nbytes, lambda: torch_fn(x, g, w, bias)) if torch_fn else None
            rows.append((f"{label} {M}x{N}", tc, th, err, gbps_b2b(nbytes, lambda: kern(*args))))
        del x, want
        torch.cuda.empty_cache()

    print(f"\n{'kernel':34s} {'tilecraft GB/s':>15s} {'% copy':>7s} {'torch GB/s':>11s} "
          f"{'ratio':>6s} {'rel err':>8s} {'b2b %':>6s}")
    for name, tc, th, err, b2b in rows:
        ratio = f"{tc / th:6.2f}" if th else "      "
        print(f"{name:34s} {tc:15.0f} {100 * tc / peak:6.1f}% {th or 0:11.0f} {ratio} "
              f"{err:8.1e} {100 * b2b / peak_b2b:5.1f}%")


if __name__ == "__main__":
    main()
