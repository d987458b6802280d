"""A/B of quantized-matmul variants in one process, launch by launch (the H200's clocks move
whole timing runs by 5-20%: benchmarks/NOTES.md, session 18).

Every variant (a weight type, optionally `:key=value` overrides of the kernel's configuration,
`:sym` for the symmetric scheme) is checked against the float64 reference of its dequantized
weight first (rel err < 1e-2), then all variants and cuBLAS (`x @ w.T`, fp16) run in one
interleaved loop: each round times every variant once (its kernels on arguments prepared once,
as the per-weight cache of a call without `config=` has them; CUDA events around the call; a spin
kernel before it holds the GPU while the host enqueues, so the host time stays out; at decode
shapes whose weights fit in L2, pass --flush); each round starts one call later than the last.
Medians over the rounds, and the ratio to cuBLAS in the same rounds.

Usage: PYTHONPATH=$PWD python3 benchmarks/quant_ab.py --shape 8192x8192 --m 4096 \\
         uint3 uint3:zero_fma=False float6_e3m2:fold_scales=False [--rounds 30] [--flush]
       (a spec's TILECRAFT_SINK_STORES=0 sets that compiler switch around its calls)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quant_gemm import Timer  # noqa: E402

import tilecraft.quant as Q  # noqa: E402
from tilecraft.options import switches_from_env  # noqa: E402
from tilecraft.quant import qmm  # noqa: E402


def variant(spec: str, w: torch.Tensor, x: torch.Tensor):
    """(call, rel err) of one `type[:key=value...][:sym][:TILECRAFT_X=v...]` spec on weight `w`
    and input `x` (a TILECRAFT_ variable is a compiler switch, set around each call)."""
    wtype, *opts = spec.split(":")
    scheme = "symmetric" if "sym" in opts else None
    env = dict(o.split("=", 1) for o in opts if o.startswith("TILECRAFT_"))
    pairs = (o.split("=", 1) for o in opts if o != "sym" and not o.startswith("TILECRAFT_"))
    cfg = {k: eval(v, {}) for k, v in pairs} or None
    qw = Q.quantize(w, wtype, scheme=scheme)
    ref = x.double() @ qw.dequantize().double().T

    def with_env(fn):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return fn()
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v

    # prepared once, as a call without config= is by the per-weight cache: the weight's
    # tensors converted (and transposed, with step_scales) outside the timed calls
    _, prepared = with_env(lambda: qmm._prepare(x, qw, False, cfg, switches_from_env()))

    def call():
        return with_env(lambda: qmm._launch(x, None, *prepared))

    y = call()
    err = ((y.double() - ref).norm() / ref.norm()).item()
    return call, err


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--shape", default="8192x8192", help="NxK")
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--flush", action="store_true", help="flush the L2 before each call")
    a = ap.parse_args(argv)
    N, K = (int(v) for v in a.shape.split("x"))
    torch.manual_seed(0)
    w = torch.randn(N, K, device="cuda") * 0.02
    x = torch.randn(a.m, K, device="cuda", dtype=torch.float16)
    wh = w.half()
    calls: dict[str, Any] = {"cublas": lambda: x @ wh.T}
    for spec in a.specs:
        call, err = variant(spec, w, x)
        if not err < 1e-2:
            raise SystemExit(f"{spec}: relative error {err:.3e} (>= 1e-2): not timed")
        calls[spec] = call
    timer = Timer(flush=a.flush)
    spin = {n: int(timer.cycles_per_us * max(50.0, 2 * timer.host_us(f))) for n, f in calls.items()}
    times: dict[str, list] = {n: [] for n in calls}
    names = list(calls)
    for r in range(a.rounds):  # each round starts one call later: no call always runs first
        k = r % len(names)    # (after cuBLAS, the first measured up to 1 us slower: session 21)
        for n in names[k:] + names[:k]:
            f = calls[n]
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if timer.flush is not None:
                timer.flush.sum()
            torch.cuda._sleep(spin[n])
            s.record()
            f()
            e.record()
            times[n].append((s, e))
    torch.cuda.synchronize()
    med = {n: statistics.median(s.elapsed_time(e) * 1e3 for s, e in v[2:])
           for n, v in times.items()}
    print(f"M={a.m} N={N} K={K}, {a.rounds} interleaved rounds, median us")
    for n, t in med.items():
        print(f"{n:48s} {t:9.1f} us  {med['cublas'] / t:6.3f}x cuBLAS")


if __name__ == "__main__":
    main()
