"""Every code of every low-precision type, cast to float16 and bfloat16 on the GPU through the fast
register casts (include/tilecraft/fast_cast.cuh), gives the interpreter's bits: uint1..uint8,
int2..int8, float8_e4m3 / e5m2 (NaN -> the quiet NaN with the sign kept, e5m2 infinities),
float6_e3m2, float6_e2m3, float5_e2m2, float4_e2m1, float3_e1m1. Local sizes that leave a tail
after the whole words (8-bit: 6 elements, 4-bit: 12) and odd pairs are included; 256 threads put
every code at every register position."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilecraft import dtypes as dt

from .fast_cast_programs import FLOATS, INTS, cast_program, every_code, vm_result

THREADS, BLOCKS = 128, 2


def _sizes(src: str) -> list[int]:
    b = dt.resolve(src).bits
    step = 8 // math.gcd(b, 8)  # elements per whole byte
    extra = {8: [6, 2], 4: [12, 2]}.get(b, [3 * step])
    return [8, 40, *extra]


@pytest.mark.gpu
@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
@pytest.mark.parametrize("src", INTS + FLOATS)
def test_every_code_casts_bit_exactly_through_the_fast_path(src, dst):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.targets import current_target

    arch = current_target().arch
    for n in _sizes(src):
        kernel = build_block_kernel(cast_program(src, dst, n, THREADS, BLOCKS), arch)
        assert "tc::fast_cast_" in kernel.source
        data = torch.from_numpy(every_code(src, n, THREADS, BLOCKS)).cuda()
        out = torch.zeros(THREADS * BLOCKS * n, dtype=dt.resolve(dst).torch_dtype, device="cuda")
        kernel(data, out)
        got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        want = vm_result(src, dst, n, THREADS, BLOCKS)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (n, [(int(i), hex(got[i]), hex(want[i])) for i in bad[:8]])


@pytest.mark.gpu
@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
@pytest.mark.parametrize("src", ["uint4", "int4", "uint8", "int2", "float8_e4m3", "float4_e2m1"])
def test_a_tilelang_dequantization_on_the_gpu_matches_the_interpreter(src, dst):
    """(T.cast of a fragment element in T.Parallel, hoisted into a fast cast)"""
    import torch

    import tilecraft
    import tilecraft.language as T

    @tilecraft.jit
    @T.prim_func
    def dequant(W: T.Tensor((32, 64), src), S: T.Tensor((64,), dst),
                Y: T.Tensor((32, 64), dst)):
        with T.Kernel(1, threads=128) as bx:
            ws = T.alloc_shared((32, 64), src)
            wf = T.alloc_fragment((32, 64), src)
            yf = T.alloc_fragment((32, 64), dst)
            T.copy(W[0:32, 0:64], ws)
            T.copy(ws, wf)
            for i, j in T.Parallel(32, 64):
                yf[i, j] = T.cast(wf[i, j], dst) * S[j]
            T.copy(yf, Y[0:32, 0:64])

    d = dt.resolve(src)
    codes = np.arange(32 * 64) * 37 % (1 << d.bits)
    if d.name == "float8_e4m3":  # (NaN * s: the GPU's NaN payloads are its own)
        codes[(codes & 0x7F) == 0x7F] = 0
    packed = dt.pack(codes, d) if d.bits < 8 else codes.astype(np.uint8).reshape(32, 64)
    w = torch.from_numpy(packed)
    if d.name == "float8_e4m3":
        w = w.view(torch.float8_e4m3fn)
    s = torch.linspace(-3, 3, 64).to(dt.resolve(dst).torch_dtype)
    want = torch.zeros(32, 64, dtype=s.dtype)
    dequant(w, s, want)  # CPU tensors: the interpreter
    got = torch.zeros(32, 64, dtype=s.dtype, device="cuda")
    dequant(w.cuda(), s.cuda(), got)
    assert "tc::fast_cast_" in dequant.get_kernel_source()
    assert torch.equal(got.view(torch.int16).cpu(), want.view(torch.int16))
