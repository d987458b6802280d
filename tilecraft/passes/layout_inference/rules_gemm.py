"""Layout rule of T.gemm (strict): the mma.sync m16n8k16 atoms tiled over the warp policy.

Warps split the M x N output as wm x wn (GemmWarpPolicy: Square balances the per-warp tile,
FullRow puts every warp along M, FullCol along N). Warp w owns rows (w // wn) * M/wm.. and
columns (w % wn) * N/wn..; inside, the atom is repeated tm = M/(16 wm) by tn = N/(8 wn) times:

    C = spatial(wm, wn) * local(tm, tn) * local(2, 1).spatial(8, 4).local(1, 2)
    A (in registers) = spatial(wm, 1) * local(tm, K/16) * column_local(2, 2).spatial(8, 4).local(1, 2)

A tile too small for every warp (FlashMLA's 16 x 32 scores on 8 warps) is computed by fewer
warps, r copies over: C = replicate(r) * (the above), each copy holding the whole accumulator.

The register A layout equals the C layout of a gemm with N = K, so an accumulator cast to
fp16 feeds the next gemm from registers (FlashAttention) when both use FullRow.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Gemm
from tilecraft.layout import local, replicate, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16


def warp_partition(op: Gemm, num_warps: int) -> tuple[int, int, int]:
    """(wm, wn, r): warps along M and N, and r copies of that grid. A tile too small for every
    warp to own a multiple of 16x8 is computed by wm * wn warps, r = num_warps / (wm * wn) times
    over (each copy holds the whole accumulator: a replicated layout, like a reduction's)."""
    m, n, _ = op.mnk()
    r = 1
    while r <= num_warps:
        g = num_warps // r
        options = [(wm, g // wm) for wm in range(1, g + 1) if g % wm == 0]
        options = [(wm, wn) for wm, wn in options if m % (16 * wm) == 0 and n % (8 * wn) == 0]
        if op.policy == "FullRow":
            options = [o for o in options if o[1] == 1] or options
        elif op.policy == "FullCol":
            options = [o for o in options if o[0] == 1] or options
        if options:
            # Square: the most square per-warp tile; ties -> fewer warps along N (A reuse)
            wm, wn = min(options, key=lambda o: (abs(m // o[0] - n // o[1]), o[1]))
            return wm, wn, r
        r *= 2
    raise TilecraftError("TC502", span=op.span, detail=f"T.gemm tile {m}x{n} over "
                         f"{num_warps} warps", hint="each warp needs a multiple of 16x8")


def c_layout(m: int, n: int, wm: int, wn: int, r: int = 1):
    inner = spatial(wm, wn) * local(m // (16 * wm), n // (8 * wn)) * MMA_M16N8K16_F16.c
    return replicate(r, 2) * inner if r > 1 else inner


def a_layout(m: int, k: int, wm: int):
    return spatial(wm, 1) * local(m // (16 * wm), k // 16) * MMA_M16N8K16_F16.a


def gemm_rule(ctx, op: Gemm, level: str) -> None:
    if level != "strict":
        return
    state = ctx.state
    wm, wn, r = warp_partition(op, state.num_threads // 32)
    state.gemm_warps[id(op)] = (wm, wn)
    state.gemm_copies[id(op)] = r
    m, n, k = op.mnk()
    ctx.set(op.C.buffer, c_layout(m, n, wm, wn, r), op, "mma accumulator layout")
    if op.A.buffer.scope == "fragment":
        if wn != 1 or op.transpose_A or r != 1:
            raise TilecraftError("TC502", span=op.span, detail="T.gemm with A in registers "
                                 "and warps split along N (or transpose_A)",
                                 hint="use policy=T.GemmWarpPolicy.FullRow")
        ctx.set(op.A.buffer, a_layout(m, k, wm), op, "mma operand A layout")
