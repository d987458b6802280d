"""Zero points per element join the fast cast: `cast(codes) - cast(z)` with z unsigned integers
provably below the trick's limit (`z & m`, or a type that narrow) prints as one
`tc::fast_cast_int_z` (1-, 2-, 4- and 8-bit unsigned codes to f16, all but 8-bit to bf16: the
quantized matmul's per-group zeros); other zeros keep the subtraction. On the GPU, every code
minus zeros over the whole range gives the VM's bits."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft import dtypes as dt
from tilecraft.block import (
    AllocateRegister,
    BinaryOp,
    BlockProgram,
    Cast,
    GlobalTensor,
    LoadGlobal,
    RegisterTensor,
    StoreGlobal,
    View,
)
from tilecraft.block.select_cast import zero_codes_limit
from tilecraft.layout import spatial

from .fast_cast_programs import every_code


def _program(src: str, n: int, threads: int = 32, blocks: int = 1, mask: int | None = None,
             zero_rows: int = 0, dst: str = "float16") -> BlockProgram:
    """Each thread casts its n codes to f16 and subtracts its zeros: one per element, or with
    `zero_rows` one per group of n / zero_rows elements (broadcast from a (threads,
    zero_rows, 1) tensor); `mask`: the zeros are `z & mask` first."""
    bits = dt.resolve(src).bits
    nbytes = n * bits // 8
    nz = zero_rows or n
    g = GlobalTensor.create("g", "uint8", (blocks * threads * nbytes,))
    zg = GlobalTensor.create("zg", "uint8", (blocks * threads, nz, 1))
    o = GlobalTensor.create("o", dst, (blocks * threads, nz, n // nz))
    lay = spatial(threads, 1, 1).local(1, nz, n // nz)
    zlay = spatial(threads, 1, 1).local(1, nz, 1)
    raw = RegisterTensor.create("raw", "uint8", spatial(threads).local(nbytes))
    codes = RegisterTensor.create("codes", src, lay)
    out = RegisterTensor.create("out", dst, lay)
    zr = RegisterTensor.create("zr", "uint8", zlay)
    zm = RegisterTensor.create("zm", "uint8", zlay)
    zf = RegisterTensor.create("zf", dst, zlay)
    shifted = RegisterTensor.create("shifted", dst, lay)
    prog = BlockProgram.create("zc", (g, zg, o), (blocks,), threads, [])
    (bi,) = prog.block_vars
    codes_raw = RegisterTensor.create("codes_raw", src, spatial(threads).local(n))
    body = [AllocateRegister.create(t) for t in (raw, codes_raw, out, zr, zm, zf, shifted)]
    body += [LoadGlobal.create(g, raw, offset=(bi * threads * nbytes,)),
             View.create(raw, codes_raw)]
    view = View.create(codes_raw, codes)  # (the same registers in 3-D)
    body += [AllocateRegister.create(codes), view, Cast.create(codes, out),
             LoadGlobal.create(zg, zr, offset=(bi * threads, 0, 0))]
    if mask is not None:
        body.append(BinaryOp.create("&", zr, mask, zm))
    body += [Cast.create(zm if mask is not None else zr, zf),
             BinaryOp.create("-", out, zf, shifted),
             StoreGlobal.create(shifted, o, offset=(bi * threads, 0, 0))]
    return BlockProgram.create("zc", (g, zg, o), (blocks,), threads, body, block_vars=(bi,))


def _source(*args, **kwargs) -> str:
    from tilecraft.codegen.block_cuda.build import generate_block

    return generate_block(_program(*args, **kwargs), "sm_90a").source


@pytest.mark.parametrize("src,mask,zero_rows,fused,dst", [
    ("uint4", 15, 0, True, "float16"), ("uint4", 63, 4, True, "float16"),
    ("uint8", None, 0, True, "float16"), ("uint8", 255, 8, True, "float16"),
    ("uint4", 127, 4, True, "bfloat16"),
    ("uint4", None, 0, False, "float16"),  # uint8 zeros up to 255: past the 4-bit trick's 64
    ("uint4", 64, 0, False, "float16"),  # (the mask lets 64 through)
    ("uint4", 128, 0, False, "bfloat16"),  # (bf16's magic is 128)
    ("uint8", None, 0, False, "bfloat16"),  # (8 bits to bf16 go through f32)
    ("uint1", 127, 0, True, "float16"), ("uint2", 15, 4, True, "float16"),
    ("uint2", 31, 0, True, "bfloat16"), ("uint1", 15, 8, True, "bfloat16"),
    ("uint1", None, 0, False, "float16"),  # (uint1's zeros stop below 128: its top field's
    ("uint1", 16, 0, False, "bfloat16"),  # binade; 16 to bf16)
    ("uint2", 16, 0, False, "float16"),  # (uint2's below 16 to f16)
])
def test_per_element_zero_points_join_the_fast_cast(src, mask, zero_rows, fused, dst):
    code = _source(src, 32, mask=mask, zero_rows=zero_rows, dst=dst)
    bits = dt.resolve(src).bits
    tail = ", true" if dst == "bfloat16" else ""
    assert (f"tc::fast_cast_int_z<{bits}, 32, false{tail}>(codes_, shifted_, zk" in code) == fused
    assert ("shifted_[li] = " in code) != fused  # the element-wise subtraction


def _expected(src: str, n: int, threads: int, blocks: int, zeros: np.ndarray, mask, rows,
              dst="float16"):
    out = np.zeros((blocks * threads, rows or n, n // (rows or n)), dt.resolve(dst).np_dtype)
    _program(src, n, threads, blocks, mask, rows, dst).run(
        every_code(src, n, threads, blocks), zeros, out)
    return out.reshape(-1).view(np.uint16)


@pytest.mark.gpu
@pytest.mark.parametrize("src,mask,rows,dst", [
    ("uint4", 15, 0, "float16"), ("uint4", 63, 4, "float16"), ("uint8", None, 0, "float16"),
    ("uint8", None, 8, "float16"), ("uint4", 127, 4, "bfloat16"), ("uint1", 127, 0, "float16"),
    ("uint2", 15, 4, "float16"), ("uint2", 31, 0, "bfloat16"), ("uint1", 15, 8, "bfloat16")])
def test_every_code_minus_per_element_zeros_matches_the_vm_on_the_gpu(src, mask, rows, dst):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.targets import current_target

    threads, blocks, n = 128, 2, 32
    kernel = build_block_kernel(_program(src, n, threads, blocks, mask, rows, dst),
                                current_target().arch)
    assert "tc::fast_cast_int_z<" in kernel.source
    rng = np.random.default_rng(7)
    top = zero_codes_limit(dt.resolve(src), dt.resolve(dst))
    zeros = rng.integers(0, min(top, 256), (blocks * threads, rows or n, 1)).astype(np.uint8)
    data = torch.from_numpy(every_code(src, n, threads, blocks)).cuda()
    out = torch.zeros(blocks * threads * n, dtype=dt.resolve(dst).torch_dtype, device="cuda")
    kernel(data, torch.from_numpy(zeros).cuda(), out.view(blocks * threads, rows or n, -1))
    got = out.view(torch.int16).cpu().numpy().view(np.uint16)
    want = _expected(src, n, threads, blocks, zeros, mask, rows, dst)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(i), hex(got[i]), hex(want[i])) for i in bad[:8]]
