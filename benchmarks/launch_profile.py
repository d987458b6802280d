"""Where the host time of a kernel call goes: per-call times and cProfile of a small GEMM.

Usage (on a GPU):   PYTHONPATH=$PWD python3 benchmarks/launch_profile.py [--parts]
Usage (no GPU):     PYTHONPATH=$PWD python3 benchmarks/launch_profile.py --cpu [--parts]

`--parts` adds the time of each step of a fast-path call of the C-passed kernel, timed alone
(the steps of runtime/fast_source.py's generated call: signature and lookup, data pointers,
torch's current stream, the lock, the slot writes, cuCtxGetCurrent, cuLaunchKernel) and of the
ways to allocate the output.

The GEMM is examples/gemm.py's `matmul(256, 256, 256)` on 128x128x32 tiles (out_idx: the kernel
allocates C), also called through its RuntimeKernel without out_idx (C passed). 2000
back-to-back calls, no sync.

`--cpu` measures the Python side of a call on a machine without a GPU: the cubin is built for
sm_90a (NVRTC), libcuda is replaced by a stand-in whose cuLaunchKernel and cuCtxGetCurrent are a
C function that does nothing (so ctypes' argument conversion is paid as on a GPU), the tensors
are CPU tensors (the device check is switched off: they run as if on a device -1), outputs
come from CPU torch.empty. What it leaves out is the driver's own time in cuLaunchKernel and the
CUDA caching allocator's in torch.empty.
"""

import cProfile
import ctypes
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
N_CALLS = 2000


def per_call(label: str, fn, sync=lambda: None, repeats: int = 1) -> float:
    """Mean host time of N_CALLS back-to-back calls (best of `repeats`), printed in us."""
    best = float("inf")
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(N_CALLS):
            fn()
        best = min(best, (time.perf_counter() - t0) / N_CALLS * 1e6)
        sync()
    print(f"{label}: {best:.2f} us per call")
    return best


def profile(fn, sync=lambda: None) -> None:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N_CALLS):
        fn()
    prof.disable()
    sync()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def kernels():
    """examples/gemm.py's 256^3 matmul four ways: with out_idx (the jit kernel) and with C
    passed (its RuntimeKernel without out_idx), each through the compiled launcher and through
    the Python fast path alone (runtime/native_launch.py; kernels whose first launch happens with
    TILECRAFT_NATIVE_LAUNCH=0 keep the Python path)."""
    from gemm import matmul

    from tilecraft.runtime import RuntimeKernel, native_launch

    native_launch.wait(120)
    print(f"compiled launcher: {native_launch.status()}")
    kernel = matmul(256, 256, 256, 128, 128, 32, num_stages=3, threads=128)
    rk = kernel._cuda_kernel()

    def plain(checker=None):
        return RuntimeKernel(rk.compiled, rk.params, rk.launch_spec, rk.source, checker=checker)

    return {"out_idx": (rk, plain(rk.checker)), "C passed": (plain(), plain())}, kernel


def warm(made, a, b, c) -> None:
    """First calls: the native kernel of each pair with the launcher on, the other with it off."""
    for name, (native, python) in made.items():
        args = (a, b) if name == "out_idx" else (a, b, c)
        native(*args)
        native(*args)
        os.environ["TILECRAFT_NATIVE_LAUNCH"] = "0"
        python(*args)
        os.environ.pop("TILECRAFT_NATIVE_LAUNCH")


def hits(made, a, b, c) -> None:
    """Whether each compiled-launcher kernel's C call takes its arguments (a miss runs the
    Python path after the C checks: the call then costs both)."""
    from tilecraft.runtime.fast_call import MISS

    for name, (native, _) in made.items():
        args = (a, b) if name == "out_idx" else (a, b, c)
        launcher = getattr(native._fast, "_native", None) if native._fast else None
        if launcher is None:
            print(f"{name}: no compiled launcher")
            continue
        out = launcher.attempt(args, None)
        print(f"{name}: the compiled launcher {'MISSES' if out is MISS else 'hits'}")


def measure(made, a, b, c, sync=lambda: None) -> None:
    hits(made, a, b, c)
    for name, (native, python) in made.items():
        args = (a, b) if name == "out_idx" else (a, b, c)
        per_call(f"{name}, compiled launcher", lambda: native(*args), sync, repeats=5)
        per_call(f"{name}, Python fast path", lambda: python(*args), sync, repeats=5)


def gpu() -> None:
    import torch

    made, kernel = kernels()
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    c = torch.empty(256, 256, dtype=torch.float16, device="cuda")
    warm(made, a, b, c)
    torch.cuda.synchronize()
    sync = torch.cuda.synchronize
    measure(made, a, b, c, sync)
    per_call("torch.empty only", lambda: torch.empty(256, 256, dtype=torch.float16,
                                                     device="cuda"), sync, repeats=3)
    per_call("torch.empty_like only", lambda: torch.empty_like(c), sync, repeats=3)
    for native, python in made.values():
        for k in (native, python):
            k.launch  # noqa: B018
    want = a.float() @ b.float()
    for k in (made["out_idx"][0], made["out_idx"][1]):
        torch.testing.assert_close(k(a, b).float(), want, atol=0.1, rtol=0.01)
    for k in made["C passed"]:
        c.fill_(float("nan"))
        k(a, b, c)
        torch.testing.assert_close(c.float(), want, atol=0.1, rtol=0.01)
    plain = made["C passed"][1]
    if "--parts" in sys.argv:
        parts(plain, (a, b, c), sync)
    profile(lambda: kernel(a, b), sync)


def cpu() -> None:
    os.environ.setdefault("TILECRAFT_ARCH", "sm_90a")
    import torch

    from tilecraft.runtime import driver as drv_mod
    from tilecraft.runtime import launch as launch_mod

    install_dry_libcuda(drv_mod)
    launch_mod._raw_stream = abs  # torch's current stream: a C call that returns 0
    made, kernel = kernels()
    kernel.target = "cuda"  # CPU tensors would pick the interpreter
    for pair in made.values():
        for k in pair:
            # CPU tensors stand for tensors on a device numbered -1 (a tensor subclass that
            # says "cuda:0" would make every attribute read twice as slow as a real tensor's)
            k.checker._raise_device_error = lambda args: None
            k.checker._devices[-1] = torch.device("cpu")
    a, b, c = (torch.randn(256, 256, dtype=torch.float16) for _ in range(3))
    warm(made, a, b, c)
    measure(made, a, b, c)
    per_call("torch.empty only (CPU)", lambda: torch.empty(256, 256, dtype=torch.float16),
             repeats=5)
    plain = made["C passed"][1]
    if "--parts" in sys.argv:
        parts(plain, (a, b, c))
    profile(lambda: made["C passed"][0](a, b, c))


def parts(kernel, args, sync=lambda: None) -> None:
    """Each step of a fast-path call of `kernel` on `args` (after a first call), timed alone."""
    import torch

    from tilecraft.runtime.fast_call import signature
    from tilecraft.runtime.fast_source import signature_source
    from tilecraft.runtime.launch import raw_stream_function

    fast = kernel._fast
    direct, entries = fast._direct, fast._entries
    entry = entries[signature(args, fast._plan)]
    x = args[0]
    raw, lock, block = raw_stream_function(), direct.lock, direct.block
    slots = [block.slot(t.slot) for t in fast._plan.tensors]
    pointers = [t.data_ptr() for t in args]
    gx, gy, gz = entry.grid
    bx, by, bz = kernel._launcher.block
    smem, device = kernel.launch_spec.smem, entry.device
    stream = direct.stream_arg(raw(device))

    def cu_launch():
        direct.cu_launch(entry.function, gx, gy, gz, bx, by, bz, smem, stream, direct.params,
                         None)

    def write_slots():
        for slot, p in zip(slots, pointers):
            slot.value = p

    def locked():
        lock.acquire()
        lock.release()

    names = ", ".join(f"t{k}" for k in range(len(args))) + ","
    lookup = eval(f"lambda {names}: entries.get(({signature_source(fast._plan)}))",
                  {"entries": entries})  # as the generated call writes it

    steps = {
        "fast call, whole": lambda: fast.call(args, None),
        "signature + lookup": lambda: lookup(*args),
        f"{len(args)} data_ptr()": lambda: [t.data_ptr() for t in args],
        "torch's current stream": lambda: raw(device),
        "lock acquire + release": locked,
        f"{len(slots)} slot writes": write_slots,
        "cuCtxGetCurrent": lambda: direct.get_ctx(direct.ctx_ref),
        "cuLaunchKernel": cu_launch,
        "torch.empty(*sizes, dtype=, device=)": lambda: torch.empty(
            *x.shape, dtype=x.dtype, device=entry.where),
        "torch.empty(sizes, dtype=, device=)": lambda: torch.empty(
            x.shape, dtype=x.dtype, device=entry.where),
        "torch.empty_strided": lambda: torch.empty_strided(
            x.shape, x.stride(), dtype=x.dtype, device=entry.where),
        "torch.empty_like": lambda: torch.empty_like(x),
    }
    for label, fn in steps.items():  # the loops in Python add about 0.1 us to each
        per_call(f"  {label}", fn, sync, repeats=5)


def _dry_lib():
    """libcuda's entry points for a machine without one: the tests' stand-in answers the setup
    calls in Python; the per-launch ones are C functions that take no time: cuLaunchKernel is
    `fegetround` (returns 0, CUDA_SUCCESS), called without argtypes as the launch path does;
    cuCtxGetCurrent writes the primary context the stand-in retains for device -1 (compiled
    here with the C compiler the compiled launcher needs)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "runtime"))
    from fake_libcuda import FakeLibcuda

    lib = FakeLibcuda()
    lib.cuLaunchKernel = ctypes.CDLL(None).fegetround
    lib.cuCtxGetCurrent = _current_context_function(0x1000 - 1)
    return lib


def _current_context_function(value: int):
    """A C function `int f(void **ctx)` writing `value` (cc); without a compiler, fegetround,
    which writes nothing (both paths then call ensure_context at each call)."""
    import subprocess
    import tempfile

    out = Path(tempfile.mkdtemp()) / "ctx.so"
    src = out.with_suffix(".c")
    src.write_text(f"int ctx(void **p) {{ if (p) *p = (void *){value}ul; return 0; }}\n")
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
        return ctypes.CDLL(str(out)).ctx
    except (OSError, subprocess.CalledProcessError):
        return ctypes.CDLL(None).fegetround


def install_dry_libcuda(drv_mod):
    """Make the runtime's driver a CtypesDriver over _dry_lib() (the launch fast path's driver)."""
    from tilecraft.runtime.cuda_ctypes import CtypesDriver

    drv = CtypesDriver(_dry_lib())
    drv_mod.driver_module = lambda: drv
    for name in ("launch", "module"):
        setattr(sys.modules[f"tilecraft.runtime.{name}"], "driver_module", lambda: drv)
    drv_mod.device_capability = lambda device: (9, 0)
    drv_mod.gpu_available = lambda: True
    sys.modules["tilecraft.runtime.module"].require_gpu = lambda arch="": None
    import torch

    torch.cuda.init = lambda: None
    return drv


if __name__ == "__main__":
    cpu() if "--cpu" in sys.argv else gpu()
