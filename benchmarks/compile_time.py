"""Cold vs cached time to a ready GEMM kernel, first-launch time, and host launch overhead.

Runs itself in fresh processes sharing one empty cache directory: "cold" builds everything,
"cached" finds the kernel in the jit cache (no front end, passes, codegen or NVRTC), "cubin cache
only" turns the jit cache off (TILECRAFT_JIT_CACHE=0) and finds only the cubin. "cold" and
"cached, no bytecode" run as the device image does (PYTHONDONTWRITEBYTECODE: tilecraft's modules
compiled from source in each process); then `compileall` writes tilecraft's bytecode, as an
installed package has it, for "cold, bytecode" (its own empty cache), "cached" (7 processes) and
"cubin cache only". A table of medians and ranges comes last.
Usage: PYTHONPATH=$PWD python3 benchmarks/compile_time.py

"ready" is import tilecraft + the factory call + `kernel.resources` (torch imported and its CUDA
context made before); "first call" adds loading the cubin onto the GPU and the launch. The host
time per call is the mean over 2000 back-to-back calls of a 256^3 GEMM, without
synchronizing: with out_idx (the kernel allocates C) and without (C passed in, through the
RuntimeKernel).
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
    a = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    b = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    c = torch.empty(4096, 4096, dtype=torch.float16, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    import gemm

    t1 = time.perf_counter()
    kernel = gemm.matmul(4096, 4096, 4096, 128, 128, 32, num_stages=3, threads=128)
    t2 = time.perf_counter()
    kernel.resources  # noqa: B018  (builds the kernel, or finds it, without loading it)
    t3 = time.perf_counter()
    out = kernel(a, b)
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    print(
        f"ready in {(t3 - t0) * 1e3:.1f} ms (import {(t1 - t0) * 1e3:.1f}, factory "
        f"{(t2 - t1) * 1e3:.1f}, resources {(t3 - t2) * 1e3:.1f}; jit cache "
        f"{'hit' if kernel._cached is not None else 'miss'}); first call {(t4 - t3) * 1e3:.1f} ms"
    )
    print(f"  TIMES {(t3 - t0) * 1e3:.2f} {(t4 - t0) * 1e3:.2f}")

    from tilecraft.runtime import RuntimeKernel, native_launch

    # host overhead on a 256^3 GEMM: its GPU time (a few us) stays below the host time, so the
    # launch queue never fills and blocks the loop (2000 calls of the 4096^3 one would)
    kernel = gemm.matmul(256, 256, 256, 128, 128, 32, num_stages=3, threads=128)
    a, b, c = a[:256, :256].contiguous(), b[:256, :256].contiguous(), c[:256, :256].contiguous()
    rk = kernel._cuda_kernel()
    plain = RuntimeKernel(rk.compiled, rk.params, rk.launch_spec, rk.source)  # C passed in
    plain(a, b, c)
    n = 2000
    for _ in range(100):  # both calls on the launch fast path (a signature seen before)
        kernel(a, b)
        plain(a, b, c)
    print(f"  compiled launcher: {native_launch.status()}")  # still building: the Python path
    for label, call in (
        ("with out_idx", lambda: kernel(a, b)),
        ("C passed", lambda: plain(a, b, c)),
    ):
        times = []
        for calls in (n, n // 4):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                call()
            times.append((time.perf_counter() - t) / calls * 1e6)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) / calls * 1e6)
        # a GPU slower than the host fills the launch queue, which then blocks the loop: the
        # host time of 2000 calls is then well above that of 500 and close to the GPU's
        print(f"  host time per call {label}: {times[0]:.1f} us (GPU done after {times[1]:.1f} "
              f"us per call; {times[2]:.1f} us over {n // 4} calls)")
    print(f"  checksum {out.float().abs().mean().item():.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one_build()
    else:
        # first as the device image runs (no bytecode written: tilecraft's modules compiled from
        # source in each process), then with bytecode, as an installed package has it
        root = Path(__file__).resolve().parents[1]
        env = dict(os.environ, TILECRAFT_CACHE_DIR=tempfile.mkdtemp())
        no_pyc = {"PYTHONDONTWRITEBYTECODE": "1"}
        runs: dict[str, list[tuple[float, float]]] = {}
        for label, extra in (
            ("cold", no_pyc),
            *[("cached, no bytecode", no_pyc)] * 3,
            ("compileall", {}),
            ("cold, bytecode", {"TILECRAFT_CACHE_DIR": tempfile.mkdtemp()}),
            *[("cached", {})] * 7,
            ("cubin cache only", {"TILECRAFT_JIT_CACHE": "0"}),
        ):
            if label == "compileall":
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "tilecraft"),
                                str(root / "examples")], env=env, check=True, capture_output=True)
                continue
            print(label, end=": ", flush=True)
            out = subprocess.run([sys.executable, __file__, "child"], env={**env, **extra},
                                 check=True, capture_output=True, text=True).stdout
            print("\n".join(ln for ln in out.splitlines() if "TIMES" not in ln), flush=True)
            times = next(ln for ln in out.splitlines() if "TIMES" in ln).split()[1:]
            runs.setdefault(label, []).append((float(times[0]), float(times[1])))
        print("\nms, median [min-max] over new processes: ready / ready + first call")
        for label, ts in runs.items():
            for name, xs in (("ready", [t[0] for t in ts]), ("+ first call", [t[1] for t in ts])):
                xs = sorted(xs)
                print(f"  {label:20s} {name:13s} {xs[len(xs) // 2]:7.1f} "
                      f"[{xs[0]:.1f}-{xs[-1]:.1f}] (n={len(xs)})")
