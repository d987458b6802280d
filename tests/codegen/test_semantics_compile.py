"""The CUDA backend follows the language's arithmetic semantics (docs/language.md, "Semantics"):
compile checks through NVRTC on the CPU, and (marked gpu) the semantics kernels run on the GPU
and compared with the interpreter bit for bit."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.interp import semantics_kernels as K
from tests.interp.semantics_kernels import INT_RANGES, nan_inputs, reduce_inputs, run_wrapping
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Reduce
from tilecraft.ir.visitor import walk

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "bfloat16", "float32", "float64"]
KINDS = ["sum", "max", "min", "abssum", "absmax"]
N = K.N


def _compile(func, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(func, arch)
    return gen, compile_cuda(gen.source, arch, name=gen.name)


def _body(func, arch="sm_90a") -> str:
    return generate_cuda(func, arch).source.split('extern "C"')[1]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_reduction_compiles(dtype, kind, arch):
    """Integer max/min did not compile (INT_MIN undeclared), unsigned abs was ambiguous; the
    (2, 1024) tile reduces through shuffles and a cross-warp scratch."""
    gen, compiled = _compile(K.reduction(2, 1024, dtype, kind).func, arch)
    assert compiled.resources.spill_stores == 0
    if kind in ("max", "min", "absmax"):  # the type's own extreme (not INT_MIN for every type)
        ident = "highest" if kind == "min" else "lowest"
        assert re.search(rf"red\[j\] = tc::{ident}<[\w ]+>\(\);", gen.source)


def test_an_unknown_reduce_kind_is_an_internal_error_not_a_min():
    func = K.reduction(2, 64, "float32", "max").func
    op = next(s for s in walk(func.body) if isinstance(s, Reduce))
    object.__setattr__(op, "kind", "prod")  # the language refuses it; the emitter must too
    with pytest.raises(TilecraftError) as err:
        generate_cuda(func, "sm_90a")
    assert err.value.code == "TC502" and "prod" in str(err.value)


def test_floor_division_is_plain_c_only_where_both_sides_are_proven_non_negative():
    body = _body(K.divmod_negative.func)
    # loaded (v), parameter (s) and negative-range (bx - 1, k) operands take the floor helpers
    assert "tc::floordiv<int>(v_, 7)" in body and "tc::floormod<int>(s_, 5)" in body
    assert "tc::floordiv<int>(bx_ - 1, 3)" in body
    assert "tc::floordiv<int>(k_, 2)" in body and "tc::floormod<int>(k_, 2)" in body
    assert "tc::floordiv<int>(i_ - 40, 6)" in body
    # a T.Parallel variable is in [0, 64): plain C
    assert "(i_ / 4)" in body
    assert not re.search(r"\bv_ / 7\b", body)


def test_signed_arithmetic_that_may_overflow_is_computed_wrapping():
    body = _body(K.wrapping.func)
    assert "tc::wrap_add<int>(W_[i_], 1) > W_[i_]" in body  # not foldable to true
    assert "tc::wrap_mul<signed char>(X_[i_], Y_[i_])" in body
    assert "tc::floordiv<signed char>(tc::wrap_add<signed char>(X_[i_], Y_[i_]), 2)" in body
    assert "tc::shl<int>(W_[i_], i_ - 8)" in body


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_nan_propagating_max_is_one_instruction(arch):
    """Softmax's row max: every combine is FMNMX.NAN, as cheap as fmaxf's FMNMX."""
    sys.path.insert(0, str(Path(__file__).parent))
    from example_configs import CONFIGS, make
    from sass import cuobjdump, sass

    if cuobjdump() is None:
        pytest.skip("cuobjdump is not installed")
    cfg = next(c for c in CONFIGS if c[0] == "softmax")
    _, compiled = _compile(make(cfg).func, arch)
    ops = [re.search(r"(FMNMX\S*)", ln).group(1) for ln in sass(compiled.cubin) if "FMNMX" in ln]
    assert ops and set(ops) == {"FMNMX.NAN"}


def _ptx(source: str) -> str:
    nv = pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import paths

    err, prog = nv.nvrtcCreateProgram(source.encode(), b"k.cu", 0, [], [])
    opts = [b"-arch=compute_90a", b"-std=c++17",
            *[f"-I{d}".encode() for d in paths.include_dirs()]]
    (result,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
    assert int(result) == 0
    _, size = nv.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nv.nvrtcGetPTX(prog, ptx)
    nv.nvrtcDestroyProgram(prog)
    return ptx.decode(errors="replace")


@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "uint16"])
def test_narrow_float_to_int_conversion_saturates(dst):
    """A C++ cast float -> int8 compiles to cvt.s32 + a truncating store (200.0 -> -56);
    tc::cast clamps after the saturating 32-bit conversion."""
    ptx = _ptx(generate_cuda(K.float_to_int("float32", dst).func, "sm_90a").source)
    signed = dst.startswith("int")
    assert f"cvt.rzi.{'s' if signed else 'u'}32.f32" in ptx
    assert f"min.{'s' if signed else 'u'}32" in ptx


@pytest.mark.parametrize("src,dst", [("float64", "int32"), ("float64", "uint8"),
                                     ("float32", "int64"), ("float32", "uint64")])
def test_nan_to_int_is_zero_where_cvt_gives_the_sign_bit(src, dst):
    """PTX cvt.rzi gives 0 for NaN only from f32 to a 32-bit type; from f64 or to a 64-bit type
    it gives 1 << (bits - 1), so tc::cast tests for NaN there."""
    ptx = _ptx(generate_cuda(K.float_to_int(src, dst).func, "sm_90a").source)
    assert f"setp.nan.f{src[-2:]}" in ptx


# ---- on the GPU, against the interpreter ---------------------------------------------------


def _on_both(kernel, *args):
    """Run `kernel` on the interpreter (CPU tensors) and on the GPU; the two sets of outputs."""
    cpu = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    kernel(*cpu)
    kernel(*gpu)
    torch.cuda.synchronize()
    return cpu, [g.cpu() if isinstance(g, torch.Tensor) else g for g in gpu]


def _same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.dtype == b.dtype
    if a.dtype.is_floating_point:
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=what)
    else:
        assert torch.equal(a, b), (what, a, b)


@pytest.mark.gpu
def test_gpu_floor_division_and_modulo_match_the_interpreter():
    args = [torch.arange(N, dtype=torch.int32), torch.full((5, 2 * N), -999, dtype=torch.int32)]
    for s in (-9, 9, -1, 0):
        cpu, gpu = _on_both(K.divmod_negative, *args, s)
        _same(cpu[1], gpu[1], f"s={s}")


@pytest.mark.gpu
def test_gpu_integer_division_matches_the_interpreter():
    g = np.random.default_rng(3)
    a = torch.tensor(g.integers(-2**63, 2**63 - 1, N), dtype=torch.int64)
    d = torch.tensor(g.integers(1, 2**40, N) * g.choice([-1, 1], N), dtype=torch.int64)
    x = torch.tensor(g.integers(-128, 128, N), dtype=torch.int8)
    y = torch.tensor(g.choice([-128, -7, -1, 1, 3, 127], N), dtype=torch.int8)
    x[:3], y[:3] = -128, -1
    cpu, gpu = _on_both(K.int_division, a, d, torch.zeros(3, N, dtype=torch.int64), x, y,
                        torch.zeros(3, N, dtype=torch.int8))
    _same(cpu[2], gpu[2], "int64")
    _same(cpu[5], gpu[5], "int8")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_gpu_float_floordiv_and_mod_match_the_interpreter(dtype):
    t = getattr(torch, dtype)
    a = (torch.randn(N, dtype=torch.float64) * 10).to(t)
    d = torch.randn(N, dtype=torch.float64).to(t)
    d[::9] = 0
    a[1], d[1] = 1.0, 0.1
    if t.itemsize == 2:  # floor(a / b) * b past float16's range, the result within it
        a[2], d[2] = -45248.0, 35968.0
    cpu, gpu = _on_both(K.float_divmod(dtype), a, d, torch.zeros(2, N, dtype=t))
    _same(cpu[2], gpu[2], dtype)


@pytest.mark.gpu
def test_gpu_integer_arithmetic_wraps_like_the_interpreter():
    _, cpu = run_wrapping("cpu")
    _, gpu = run_wrapping("cuda")
    for name, c, g in zip(["int8", "int32", "int64", "uint8"], cpu, gpu):
        _same(c, g.cpu(), name)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_gpu_max_and_min_propagate_nan(dtype):
    a, b = nan_inputs(dtype)
    cpu, gpu = _on_both(K.nan_min_max(dtype), a, b, torch.zeros(2, N, dtype=a.dtype))
    _same(cpu[2], gpu[2], dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(64, 64), (2, 1024)])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_reductions_match_the_interpreter(dtype, kind, shape):
    rows, cols = shape
    a = torch.from_numpy(reduce_inputs(dtype, rows, cols)).to(getattr(torch, dtype))
    b = torch.full((rows,), 3, dtype=a.dtype)
    for clear in (True, False):
        cpu, gpu = _on_both(K.reduction(rows, cols, dtype, kind, clear=clear), a, b)
        if dtype in INT_RANGES or kind in ("max", "min", "absmax"):
            _same(cpu[1], gpu[1], f"{dtype} {kind} clear={clear}")
        else:  # float sums: the order of additions differs
            torch.testing.assert_close(gpu[1].double(), cpu[1].double(), equal_nan=True,
                                       rtol=2e-2 if dtype in ("float16", "bfloat16") else 1e-5,
                                       atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "int32", "uint32", "int64"])
@pytest.mark.parametrize("src", ["float32", "float16", "float64"])
def test_gpu_float_to_int_conversion_matches_the_interpreter(src, dst):
    vals = [0.0, -0.9, 1.5, -1.5, 127.9, -128.9, 200.0, -200.0, 255.5, 256.0, 3e4, -3e4,
            float("inf"), float("-inf"), float("nan"), 1e9, -1e9, 3e9, 1e19, -1e19]
    a = torch.tensor((vals * N)[:N], dtype=getattr(torch, src))
    cpu, gpu = _on_both(K.float_to_int(src, dst), a, torch.zeros(N, dtype=getattr(torch, dst)))
    _same(cpu[1], gpu[1], f"{src} -> {dst}")


@pytest.mark.gpu
def test_gpu_mixed_signedness_comparisons_match_the_interpreter():
    g = np.random.default_rng(5)
    u = torch.tensor(g.integers(0, 2**32, N), dtype=torch.uint32)
    s = torch.tensor(g.integers(-2**31, 2**31, N), dtype=torch.int32)
    u[0], s[0] = 7, -1
    cpu, gpu = _on_both(K.mixed_compare, u, s, torch.zeros(2, N, dtype=torch.int32))
    _same(cpu[2], gpu[2], "compare")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_gpu_fp8_arithmetic_matches_the_interpreter(dtype):
    t = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}[dtype]
    a = torch.randn(N, generator=torch.Generator().manual_seed(4)).to(t)
    cpu, gpu = _on_both(K.fp8_arith(dtype), a, torch.zeros(3, N, dtype=t))
    assert torch.equal(cpu[1].view(torch.uint8), gpu[1].view(torch.uint8))
