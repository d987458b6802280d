"""T.print, T.cumsum, T.device_assert and copies of T.alloc_local arrays on the CUDA backend.

CPU: every kernel's CUDA compiles through NVRTC for sm_90a and sm_80 without spills; the
interpreter's cumsum matches numpy; the printf formats reproduce the interpreter's header lines;
device_assert names the user's file and line. GPU (marked `gpu`): cumsum and local copies against
torch; a failing device_assert and T.print run in subprocesses (a trap kills the CUDA context).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Copy, DeviceAssert
from tilecraft.ir.visitor import walk

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ARCHS = ["sm_90a", "sm_80"]


# ---- kernels ---------------------------------------------------------------------------------

def _alloc(scope, shape, dtype):
    if scope == "shared":
        return T.alloc_shared(shape, dtype)
    if scope == "fragment":
        return T.alloc_fragment(shape, dtype)
    return T.alloc_local(shape, dtype)


def cumsum_kernel(M, N, block_M, block_N, dim=1, reverse=False, scope="shared", dtype="float32",
                  in_place=False, threads=128):
    """B = per-tile inclusive cumsum of A along `dim` (tiles block_M x block_N, partial at the
    edges: elements past the tensor count as 0), the tile staged in `scope`."""

    @T.prim_func
    def tile_cumsum(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if scope == "global":
                T.cumsum(A[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N],
                         B[by * block_M, bx * block_N], dim=dim, reverse=reverse)
            else:
                S = _alloc(scope, (block_M, block_N), dtype)
                T.copy(A[by * block_M, bx * block_N], S)
                if in_place:
                    T.cumsum(S, dim=dim, reverse=reverse)
                    T.copy(S, B[by * block_M, bx * block_N])
                else:
                    D = _alloc(scope, (block_M, block_N), dtype)
                    T.cumsum(S, D, dim=dim, reverse=reverse)
                    T.copy(D, B[by * block_M, bx * block_N])

    return tile_cumsum


# (id, args, kwargs): which emitter path each one takes is in its id.
CUMSUM_CONFIGS = [
    ("shared_thread_per_row", (100, 48, 64, 16), {"dim": 1}),
    ("shared_warp_per_column_reversed", (100, 48, 64, 16), {"dim": 0, "reverse": True}),
    ("shared_warp_per_row_tail", (4, 300, 4, 200), {"dim": 1}),
    ("shared_fp16_swizzled_in_place", (64, 128, 32, 64),
     {"dim": 1, "dtype": "float16", "in_place": True}),
    ("shared_int32_columns", (16, 256, 16, 128), {"dim": 0, "dtype": "int32", "reverse": True}),
    ("global_partial_tiles", (70, 40, 32, 32), {"dim": 1, "scope": "global"}),
    ("local_per_thread", (8, 16, 4, 8), {"dim": 1, "scope": "local", "reverse": True}),
    ("fragment_rows_in_registers", (32, 8, 16, 4), {"dim": 1, "scope": "fragment"}),
    ("fragment_rows_over_threads", (64, 64, 64, 64), {"dim": 1, "scope": "fragment"}),
]
CUMSUM_IDS = [c[0] for c in CUMSUM_CONFIGS]


def reference_cumsum(a: np.ndarray, block_M, block_N, dim=1, reverse=False, **_):
    """Per-tile cumsum in float64 on zero-padded tiles, cropped back to a's shape."""
    M, N = a.shape
    pm, pn = -M % block_M, -N % block_N
    x = np.pad(a.astype(np.float64), ((0, pm), (0, pn)))
    tiles = x.reshape(x.shape[0] // block_M, block_M, x.shape[1] // block_N, block_N)
    axis = 1 if dim == 0 else 3
    if reverse:
        tiles = np.flip(np.cumsum(np.flip(tiles, axis), axis=axis), axis)
    else:
        tiles = np.cumsum(tiles, axis=axis)
    return tiles.reshape(x.shape)[:M, :N]


def cumsum_input(M, N, dtype, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == "int32":
        return torch.randint(-50, 50, (M, N), generator=g, dtype=torch.int32)
    return torch.randn(M, N, generator=g).to(getattr(torch, dtype))


def debug_kernel(M=8, N=16):
    """Prints a shared tile, a fragment, a global row, a scalar and a local array per block."""

    @T.prim_func
    def debug_prints(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(2, 3, threads=128) as (bx, by):
            S = T.alloc_shared((M, N), "float32")
            F = T.alloc_fragment((M, N), "float32")
            L = T.alloc_local((4,), "int32")
            T.copy(A[0, 0], S)
            T.copy(S, F)
            T.print(S, "tile")
            T.print(F, "frag")
            T.print(A[bx, 0:N], "row 100%")
            T.print(A[bx, by] * 2, "scalar")
            T.fill(L, bx + by)
            T.print(L, "local")
            T.copy(F, B[0, 0])

    return debug_prints


def assert_kernel(N=256, block=64, use_statement=False):
    """B = A, checking A >= 0 on the device (with T.device_assert or a Python `assert`)."""

    @T.prim_func
    def checked_copy(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]
            if use_statement:
                assert A[bx * block] >= 0, "A must be non-negative"
            else:
                T.device_assert(A[bx * block] >= 0, "A must be non-negative")

    return checked_copy


def local_copy_kernel(M=4, N=8):
    """Every pairing of a local array with global, shared, local and fragment tiles."""

    @T.prim_func
    def local_copies(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float32"),
                     C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            L = T.alloc_local((M, N), "float32")
            L2 = T.alloc_local((M, N), "float32")
            S = T.alloc_shared((M, N), "float32")
            F = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], L)   # global -> local (with a cast)
            T.copy(L, L2)        # local -> local
            T.copy(L2, S)        # local -> shared
            T.copy(S, L)         # shared -> local
            T.copy(L, F)         # local -> fragment
            T.copy(F, B[0, 0])
            T.copy(L, C[0, 0])   # local -> global

    return local_copies


def _op_line(func, cls) -> int:
    (op,) = [s for s in walk(func.body) if isinstance(s, cls)]
    return op.span.line


def _compile(func, arch):
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(func, arch)
    compiled = compile_cuda(gen.source, arch, name=gen.name)
    assert compiled.resources.spill_stores == 0, (compiled.resources, gen.source)
    assert compiled.resources.spill_loads == 0
    return gen


# ---- compiling (CPU, NVRTC) ------------------------------------------------------------------

def _has_nvrtc() -> bool:
    try:
        import cuda.bindings.nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not _has_nvrtc(), reason="needs NVRTC (cuda-bindings)")


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cfg", CUMSUM_CONFIGS, ids=CUMSUM_IDS)
def test_cumsum_compiles_without_spills(cfg, arch):
    _, args, kw = cfg
    gen = _compile(cumsum_kernel(*args, **kw), arch)
    # a cumsum instruction, or for a local array a scan in scalar code (scan0_, scan1_, ...)
    assert re.search(r"// cumsum\(|\bscan0_ = ", gen.source)


def test_cumsum_picks_warp_scans_for_few_long_rows():
    src = generate_cuda(cumsum_kernel(4, 300, 4, 200, dim=1), "sm_90a").source
    assert "tc::warp_inclusive_scan" in src
    src = generate_cuda(cumsum_kernel(100, 48, 64, 16, dim=1), "sm_90a").source
    assert "tc::warp_inclusive_scan" not in src and "for (int kk = 0; kk < 16; ++kk)" in src


def test_cumsum_of_a_fragment_spread_over_threads_is_staged_through_shared_memory():
    """Each row's elements live in several threads: the scan runs on a shared-memory copy
    (stage0 -> scan), between barriers, and the result goes back to the fragment."""
    src = generate_cuda(cumsum_kernel(64, 64, 64, 64, dim=1, scope="fragment"), "sm_90a").source
    scan = src.split("// cumsum(")[1].split("// store_global(")[0]
    assert "stage0[" in scan and "scan[" in scan and scan.count("__syncthreads();") >= 2


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_print_compiles_without_spills(arch):
    src = _compile(debug_kernel(), arch).source
    for head in ["tile: S =", "frag: F =", "row 100%%: A[bx, 0:16] =",  # % escaped for printf
                 "scalar: A[bx, by] * 2.0 = %g", "local: L ="]:
        assert src.count(f"] {head}") == 1, head


def _printf_formats(source: str) -> list[str]:
    return [f.replace("\\n", "") for f in re.findall(r'printf\("((?:[^"\\]|\\.)*)"', source)]


def test_print_headers_are_the_interpreters_lines(capsys):
    func = debug_kernel()
    a = torch.arange(128, dtype=torch.float32).reshape(8, 16)
    tilecraft.compile(func, target="interp")(a, torch.zeros(8, 16))
    lines = capsys.readouterr().out.splitlines()
    headers = [f for f in _printf_formats(generate_cuda(func, "sm_90a").source)
               if f.endswith(("=", "= %g"))]
    assert len(headers) == 5
    for bx in range(2):
        for by in range(3):
            for f in headers:
                if f.endswith("%g"):  # the scalar line: same text up to the value
                    want = f[: -len("%g")] % (bx, by)
                    assert any(line.startswith(want) for line in lines), want
                else:
                    assert (f % (bx, by)) in lines


def test_print_of_a_fragment_prints_each_threads_elements_once():
    src = generate_cuda(debug_kernel(M=4), "sm_90a").source  # 64 elements on 128 threads
    frag = src.split("// print(F, ")[1].split("// print(")[0]
    assert "thread %d]" in frag and "#pragma unroll" in frag
    assert "if ((tid / 64) == 0)" in frag  # one thread of each replica group


def test_print_of_a_thread_dependent_value_prints_from_every_thread():
    @T.prim_func
    def per_thread(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            T.print(tx * 2, "twice")
            T.print(bx + 1, "block")

    lines = [ln.strip() for ln in generate_cuda(per_thread, "sm_90a").source.splitlines()
             if "printf" in ln]
    assert lines[0].startswith('printf("[tilecraft block (%d,) thread %d] twice: ')
    assert lines[1].startswith('if (tid == 0) printf("[tilecraft block (%d,)] block: bx + 1 = ')


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("use_statement", [False, True], ids=["T.device_assert", "assert"])
def test_device_assert_names_the_users_file_and_line(arch, use_statement):
    func = assert_kernel(use_statement=use_statement)
    src = _compile(func, arch).source
    line = _op_line(func, DeviceAssert)
    assert f'__assertfail("A must be non-negative", "{__file__}", {line}, ' in src
    assert f"at {__file__}:{line}" in src


def test_device_assert_raises_on_the_interpreter():
    a = torch.ones(256)
    a[64] = -1.0  # checked by block 1
    with pytest.raises(TilecraftError) as e:
        tilecraft.compile(assert_kernel(), target="interp")(a, torch.zeros(256))
    assert e.value.code == "TC402" and "(1,)" in str(e.value)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_local_copies_compile_without_spills(arch):
    src = _compile(local_copy_kernel(), arch).source
    # every thread copies the whole array (one loop per copy but local -> fragment, a parallel
    # loop); into shared and global memory one thread stores (once per block)
    copies = re.findall(r"for \(int (c_\w*) = 0; \1 < 32; \+\+\1\) \{\n\s*(.*)", src)
    assert [body.split("[")[0] for _, body in copies] == ["L_", "L2_", "if (tid == 0) S_",
                                                          "L_", "if (tid == 0) C_"], copies
    assert "tc::cast<float>(A_[" in copies[0][1]  # global -> local with a cast


def test_local_copies_match_on_the_interpreter():
    a = torch.randn(4, 8).half()
    b, c = torch.zeros(4, 8), torch.zeros(4, 8)
    tilecraft.compile(local_copy_kernel(), target="interp")(a, b, c)
    assert torch.equal(b, a.float()) and torch.equal(c, a.float())


def test_copy_from_a_fragment_to_a_local_array_asks_for_shared_memory():
    @T.prim_func
    def frag_to_local(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((16, 16), "float32")
            L = T.alloc_local((16, 16), "float32")
            T.copy(A, F)
            T.copy(F, L)
            T.copy(L, A)

    with pytest.raises(TilecraftError) as e:
        generate_cuda(frag_to_local, "sm_90a")
    assert e.value.code == "TC502" and "shared memory" in e.value.hint
    copies = [s for s in walk(frag_to_local.body) if isinstance(s, Copy)]
    assert e.value.line == copies[1].span.line  # T.copy(F, L)


# ---- the interpreter (the spec the GPU tests compare with) -------------------------------------

@pytest.mark.parametrize("cfg", CUMSUM_CONFIGS, ids=CUMSUM_IDS)
def test_cumsum_on_the_interpreter_matches_numpy(cfg):
    _, (M, N, bm, bn), kw = cfg
    dtype = kw.get("dtype", "float32")
    a = cumsum_input(M, N, dtype)
    b = torch.zeros_like(a)
    tilecraft.compile(cumsum_kernel(M, N, bm, bn, **kw), target="interp")(a, b)
    ref = reference_cumsum(a.double().numpy(), bm, bn, **kw)
    np.testing.assert_allclose(b.double().numpy(), ref, rtol=2e-3 if dtype == "float16" else 1e-6,
                               atol=0.05 if dtype == "float16" else 1e-4)


# ---- on the GPU ----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CUMSUM_CONFIGS, ids=CUMSUM_IDS)
def test_cumsum_on_cuda_matches_torch(cfg):
    _, (M, N, bm, bn), kw = cfg
    dtype = kw.get("dtype", "float32")
    a = cumsum_input(M, N, dtype).cuda()
    b = torch.full_like(a, -7)
    tilecraft.compile(cumsum_kernel(M, N, bm, bn, **kw), target="cuda")(a, b)
    torch.cuda.synchronize()
    # torch.cumsum per tile (zero-padded) as the reference
    dim, reverse = kw.get("dim", 1), kw.get("reverse", False)
    x = torch.nn.functional.pad(a.double(), (0, -N % bn, 0, -M % bm))
    tiles = x.reshape(x.shape[0] // bm, bm, x.shape[1] // bn, bn)
    axis = 1 if dim == 0 else 3
    ref = (tiles.flip(axis).cumsum(axis).flip(axis) if reverse else tiles.cumsum(axis))
    ref = ref.reshape(x.shape)[:M, :N]
    if dtype == "int32":
        assert torch.equal(b.long(), ref.long())
    else:
        fp16 = dtype == "float16"
        tol = {"rtol": 2e-3, "atol": 0.05} if fp16 else {"rtol": 1e-5, "atol": 1e-4}
        torch.testing.assert_close(b.double(), ref, **tol)


@pytest.mark.gpu
def test_local_copies_on_cuda():
    a = torch.randn(4, 8, device="cuda").half()
    b, c = torch.zeros(4, 8, device="cuda"), torch.zeros(4, 8, device="cuda")
    tilecraft.compile(local_copy_kernel(), target="cuda")(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(b, a.float()) and torch.equal(c, a.float())


@pytest.mark.gpu
def test_passing_device_assert_leaves_the_result_alone():
    a = torch.rand(256, device="cuda")
    b = torch.zeros(256, device="cuda")
    tilecraft.compile(assert_kernel(), target="cuda")(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def _in_subprocess(call: str) -> subprocess.CompletedProcess:
    """Run `test_debug_ops.<call>` in a fresh Python (its own CUDA context)."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_debug_ops as t; t.{call}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=300, cwd=str(REPO), env=env)


def _flush_and_exit() -> None:
    """Flush C stdio (device printf output) and leave without tearing down a dead context."""
    import ctypes

    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)
    os._exit(0)


def failing_assert_main() -> None:
    """Subprocess body: a device_assert fails in block 1; print how torch reported it."""
    a = torch.ones(256, device="cuda")
    a[64] = -1.0
    b = torch.zeros(256, device="cuda")
    try:
        tilecraft.compile(assert_kernel(), target="cuda")(a, b)
        torch.cuda.synchronize()
        print("NO ERROR", flush=True)
    except Exception as e:  # noqa: BLE001 - whatever torch raises is the report
        print(f"RAISED {type(e).__name__}: {e}", flush=True)
    _flush_and_exit()


@pytest.mark.gpu
def test_failing_device_assert_raises_in_torch_and_names_the_line():
    r = _in_subprocess("failing_assert_main()")
    out = r.stdout + r.stderr
    assert "RAISED" in r.stdout, out
    raised = r.stdout.split("RAISED", 1)[1].lower()
    assert "assert" in raised, out  # cudaErrorAssert: "device-side assert triggered"
    line = _op_line(assert_kernel(), DeviceAssert)
    assert f"test_debug_ops.py:{line}" in out, out  # __assertfail's (or our printf's) message
    assert "A must be non-negative" in out, out


def print_main() -> None:
    """Subprocess body: run debug_kernel on CUDA (its printf output goes to stdout)."""
    a = torch.arange(128, dtype=torch.float32, device="cuda").reshape(8, 16)
    b = torch.zeros(8, 16, device="cuda")
    tilecraft.compile(debug_kernel(), target="cuda")(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    print("DONE", flush=True)
    _flush_and_exit()


@pytest.mark.gpu
def test_print_on_cuda_writes_every_blocks_lines():
    r = _in_subprocess("print_main()")
    assert r.returncode == 0 and "DONE" in r.stdout, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for bx in range(2):
        for by in range(3):
            p = f"[tilecraft block ({bx}, {by})]"
            for head in ["tile: S =", "frag: F =", "row 100%: A[bx, 0:16] =", "local: L ="]:
                assert f"{p} {head}" in lines, (p, head)
            assert f"{p} scalar: A[bx, by] * 2.0 = {2 * (16 * bx + by):g}" in lines
            assert f"{p}   [1, 8:16] 24 25 26 27 28 29 30 31" in lines  # shared tile, row 1
            assert f"{p}   [8:16] " + " ".join(str(16 * bx + j) for j in range(8, 16)) in lines
            assert f"{p}   [0:4] " + " ".join([str(bx + by)] * 4) in lines
            # the fragment: each of its 128 elements once, from the thread that holds it
            frag = [ln for ln in lines if ln.startswith(f"[tilecraft block ({bx}, {by}) thread ")]
            got = {}
            for ln in frag:
                m = re.search(r"\]   \[(\d+), (\d+)\] (\S+)$", ln)
                got[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
            assert len(frag) == 128 and got == {(i, j): 16.0 * i + j for i in range(8)
                                                for j in range(16)}
