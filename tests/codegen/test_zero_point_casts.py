"""A zero point subtracted from a fast integer cast joins the cast's magic subtrahend: `cast(w)
- z` prints as one `tc::fast_cast_int<..., z>` when the cast's only reader is the subtraction and
the offset keeps the trick exact; otherwise the subtraction stays (same values either way).
Likewise a power-of-two factor of 1-, 2- or 4-bit codes (a bit plane's weight) joins the trick's
HFMA2. On the GPU every code minus every representative zero (times every tested factor) gives
the interpreter's bits."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from tilecraft import dtypes as dt

from .fast_cast_programs import INTS, cast_program, every_code, vm_result
from .sass import cuobjdump, sass


def _source(src: str, dst: str, n: int, zero, keep_cast: bool = False) -> str:
    from tilecraft.codegen.block_cuda.build import generate_block

    return generate_block(cast_program(src, dst, n, zero=zero, keep_cast=keep_cast),
                          "sm_90a").source


def _zeros(src: str, dst: str) -> list[int]:
    """Zero points the fused cast takes: 1, the middle code, the largest the trick allows that
    `dst` holds exactly."""
    from tilecraft.block.select_cast import zero_point_limit
    from tilecraft.interp.values import store_cast

    s, d = dt.resolve(src), dt.resolve(dst)
    signed = 1 << (s.bits - 1) if s.kind == "int" else 0
    top = zero_point_limit(s, d) - 1 - signed
    while float(store_cast(d, top)) != top:
        top -= 1
    return sorted({1, min(1 << (s.bits - 1), top), top} - {0})


@pytest.mark.parametrize("src,dst,zero", [("uint4", "float16", 8), ("uint4", "bfloat16", 8),
                                          ("uint8", "float16", 128), ("uint2", "float16", 2),
                                          ("uint1", "bfloat16", 1), ("int4", "float16", -3),
                                          ("uint3", "float16", 4), ("uint8", "bfloat16", 100)])
def test_a_constant_zero_point_joins_the_fast_cast(src, dst, zero):
    code = _source(src, dst, 16, zero)
    bf16 = "true" if dst == "bfloat16" else "false"
    signed = "true" if src.startswith("int") else "false"
    bits = dt.resolve(src).bits
    assert f"tc::fast_cast_int<{bits}, {signed}, {bf16}, 16, {zero}>(codes_, shifted_)" in code
    assert "tc::cast<" not in code  # no element-wise subtraction left


@pytest.mark.parametrize("src,dst,zero,why", [
    ("uint4", "float16", 64, "past the f16 high nibbles' range"),
    ("uint4", "bfloat16", 128, "past bf16's exact range"),
    ("uint8", "float16", 2.5, "not a whole number"),
    ("int4", "float16", -9, "below the signed offset"),
    ("uint8", "bfloat16", 1023, "bfloat16 rounds it to 1024"),
    ("float4_e2m1", "float16", 1, "a float cast has no magic subtrahend"),
])
def test_zero_points_the_trick_cannot_absorb_stay_a_subtraction(src, dst, zero, why):
    code = _source(src, dst, 16, zero)
    assert re.search(r"shifted_\[li\] = .* - ", code), why
    assert not re.search(r"fast_cast_\w+<[^>]*>\(codes_, shifted_\)", code)


@pytest.mark.parametrize("src,dst,factor,fused", [
    ("uint1", "float16", 4, True), ("uint2", "bfloat16", 128, True), ("uint4", "float16", 8, True),
    ("uint4", "float16", 64, False), ("uint2", "float16", 3, False), ("uint3", "float16", 2, False),
])
def test_a_power_of_two_factor_joins_the_fast_cast_of_narrow_codes(src, dst, factor, fused):
    from tilecraft.codegen.block_cuda.build import generate_block

    code = generate_block(cast_program(src, dst, 16, zero=factor, op="*"), "sm_90a").source
    s = factor.bit_length() - 1
    assert (f", 0, false, {s}>(codes_, shifted_)" in code) == fused
    assert bool(re.search(r"shifted_\[li\] = __hmul", code)) != fused


@pytest.mark.parametrize("src,dst,s,fused", [
    ("float4_e2m1", "float16", 14, True), ("float4_e2m1", "float16", 3, True),
    ("float6_e3m2", "float16", 12, True), ("float6_e3m2", "float16", 13, False),
    ("float4_e2m1", "bfloat16", 1, False), ("float8_e4m3", "float16", 1, False),
])
def test_a_power_of_two_below_one_joins_the_fast_cast_of_a_float(src, dst, s, fused):
    """(the trick multiplies by 2^(bias_dst - bias) anyway: down to that, exact; not for bf16,
    whose values would be subnormal there, nor for codes with NaNs)"""
    from tilecraft.codegen.block_cuda.build import generate_block

    code = generate_block(cast_program(src, dst, 16, zero=2.0 ** -s, op="*"), "sm_90a").source
    assert (f", false, -{s}>(codes_, shifted_)" in code) == fused
    assert bool(re.search(r"shifted_\[li\] = __hmul", code)) != fused


def test_a_cast_read_elsewhere_is_not_fused():
    code = _source("uint4", "float16", 16, 8, keep_cast=True)
    assert "tc::fast_cast_int<4, false, false, 16>(codes_, out_)" in code
    assert re.search(r"shifted_\[li\] = .* - ", code)


@pytest.mark.parametrize("src", ["uint4", "uint2"])
def test_the_zero_point_costs_no_instruction(src):
    """SASS of the cast alone and of the cast minus 8: the same instruction count."""
    pytest.importorskip("cuda.bindings.nvrtc")
    if cuobjdump() is None:
        pytest.skip("cuobjdump is not installed (pip test extras)")
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.runtime import compile_cuda

    counts = []
    for zero in (None, 2):
        gen = generate_block(cast_program(src, "float16", 64, zero=zero), "sm_90a")
        cubin = compile_cuda(gen.source, "sm_90a", name=gen.name).cubin
        counts.append(Counter(re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", ln).group(1)
                              for ln in sass(cubin)))
    assert sum(counts[1].values()) == sum(counts[0].values()), counts


THREADS, BLOCKS = 128, 2


@pytest.mark.gpu
@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
@pytest.mark.parametrize("src", INTS)
def test_every_code_minus_a_zero_point_matches_the_interpreter_on_the_gpu(src, dst):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.targets import current_target

    n = 32 if dt.resolve(src).bits != 3 else 24
    for zero in _zeros(src, dst):
        prog = cast_program(src, dst, n, THREADS, BLOCKS, zero=zero)
        kernel = build_block_kernel(prog, current_target().arch)
        assert f", {zero}>(codes_, shifted_)" in kernel.source
        data = torch.from_numpy(every_code(src, n, THREADS, BLOCKS)).cuda()
        out = torch.zeros(THREADS * BLOCKS * n, dtype=dt.resolve(dst).torch_dtype, device="cuda")
        kernel(data, out)
        got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        want = vm_result(src, dst, n, THREADS, BLOCKS, zero)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (zero, [(int(i), hex(got[i]), hex(want[i])) for i in bad[:8]])


@pytest.mark.gpu
@pytest.mark.parametrize("src", ["float4_e2m1", "float6_e3m2", "float5_e2m2"])
def test_every_float_code_times_a_power_of_two_below_one_matches_the_interpreter_on_the_gpu(src):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.targets import current_target

    d = dt.resolve(src)
    top = 15 - ((1 << (d.exponent_bits - 1)) - 1)
    part = 12 if d.bits % 2 == 0 else 8  # (a part of a word too, in whole bytes)
    for n, s in ((n, s) for n in (64, part) for s in (1, top)):
        prog = cast_program(src, "float16", n, THREADS, BLOCKS, zero=2.0 ** -s, op="*")
        kernel = build_block_kernel(prog, current_target().arch)
        assert f"-{s}>(codes_, shifted_)" in kernel.source
        data = torch.from_numpy(every_code(src, n, THREADS, BLOCKS)).cuda()
        out = torch.zeros(THREADS * BLOCKS * n, dtype=torch.float16, device="cuda")
        kernel(data, out)
        got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        want = vm_result(src, "float16", n, THREADS, BLOCKS, 2.0 ** -s, op="*")
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (n, s, [(int(i), hex(got[i]), hex(want[i])) for i in bad[:8]])


@pytest.mark.gpu
@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
@pytest.mark.parametrize("src", ["uint1", "uint2", "int2", "uint4", "int4"])
def test_every_code_times_a_power_of_two_matches_the_interpreter_on_the_gpu(src, dst):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.targets import current_target

    sizes = (64, 12) if dt.resolve(src).bits == 4 else (64, 8, 40)  # (parts of words too)
    for n, factor in ((n, f) for n in sizes for f in (2, 8, 32)):
        prog = cast_program(src, dst, n, THREADS, BLOCKS, zero=factor, op="*")
        kernel = build_block_kernel(prog, current_target().arch)
        assert ">(codes_, shifted_)" in kernel.source
        data = torch.from_numpy(every_code(src, n, THREADS, BLOCKS)).cuda()
        out = torch.zeros(THREADS * BLOCKS * n, dtype=dt.resolve(dst).torch_dtype, device="cuda")
        kernel(data, out)
        got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        want = vm_result(src, dst, n, THREADS, BLOCKS, factor, op="*")
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (n, factor, [(int(i), hex(got[i]), hex(want[i])) for i in bad[:8]])
