"""Block programs that cast a register tensor of low-precision codes, for the fast-cast tests:
each thread loads its bit string as bytes, views it as `src` (n elements per thread), casts it
to `dst` (and subtracts a zero point `zero`, when given) and stores the results."""

from __future__ import annotations

import numpy as np

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
from tilecraft.layout import Fragment, spatial

INTS = [f"uint{b}" for b in range(1, 9)] + [f"int{b}" for b in range(2, 9)]
FLOATS = ["float8_e4m3", "float8_e5m2", "float6_e3m2", "float6_e2m3", "float5_e2m2",
          "float4_e2m1", "float3_e1m1"]


def cast_program(src: str, dst: str, n: int, threads: int = 32, blocks: int = 1,
                 zero: float | None = None, keep_cast: bool = False,
                 codes_layout: Fragment | None = None, op: str = "-") -> BlockProgram:
    """`blocks` x `threads` threads, each converting n elements (n * bits a multiple of 8), then
    `- zero` when a zero is given (`keep_cast`: the cast itself is stored too, after it).
    `codes_layout`: the codes' layout (the result's stays spatial(threads).local(n)); `op`:
    "*" multiplies by `zero` instead."""
    nbytes = n * dt.resolve(src).bits // 8
    g = GlobalTensor.create("g", "uint8", (blocks * threads * nbytes,))
    o = GlobalTensor.create("o", dst, (blocks * threads * n,))
    raw = RegisterTensor.create("raw", "uint8", spatial(threads).local(nbytes))
    codes = RegisterTensor.create("codes", src, codes_layout or spatial(threads).local(n))
    out = RegisterTensor.create("out", dst, spatial(threads).local(n))
    prog = BlockProgram.create("cast", (g, o), (blocks,), threads, [])
    (bi,) = prog.block_vars
    body = [AllocateRegister.create(t) for t in (raw, codes, out)]
    body += [LoadGlobal.create(g, raw, offset=(bi * threads * nbytes,)), View.create(raw, codes),
             Cast.create(codes, out)]
    if zero is not None:
        shifted = RegisterTensor.create("shifted", dst, out.layout)
        body += [AllocateRegister.create(shifted), BinaryOp.create(op, out, zero, shifted),
                 StoreGlobal.create(shifted, o, offset=(bi * threads * n,))]
    if zero is None or keep_cast:
        body.append(StoreGlobal.create(out, o, offset=(bi * threads * n,)))
    return BlockProgram.create("cast", (g, o), (blocks,), threads, body, block_vars=(bi,))


def every_code(src: str, n: int, threads: int, blocks: int) -> np.ndarray:
    """The packed bytes giving element i of thread t the code (t + 7 i) mod 2^bits: with at
    least 2^bits threads, every code at every register position."""
    b = dt.resolve(src).bits
    t = np.arange(blocks * threads)[:, None]
    codes = (t + 7 * np.arange(n)[None, :]) % (1 << b)
    return dt.pack(codes.reshape(-1), src)


def vm_result(src: str, dst: str, n: int, threads: int, blocks: int,
              zero: float | None = None, op: str = "-") -> np.ndarray:
    """The interpreter's (block VM's) codes of the cast of `every_code` (minus `zero`), as
    uint16."""
    out = np.zeros(blocks * threads * n, dt.resolve(dst).np_dtype)
    prog = cast_program(src, dst, n, threads, blocks, zero, op=op)
    prog.run(every_code(src, n, threads, blocks), out)
    return out.view(np.uint16)
