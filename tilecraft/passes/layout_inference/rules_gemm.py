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

On sm_90a a gemm with both operands in shared memory (or A in registers and one 64-row tile per
warpgroup, as FlashAttention's P x V) runs on wgmma instead (`wgmma_options`): the
warpgroups split the tile gm x gn, each issuing m64nNk16 with N = n / gn <= 256 over its
tm64 = m / (64 gm) row tiles. Warp w of a warpgroup holds rows 16 w.. of each 64-row tile, so

    C = spatial(gm, gn) * local(tm64, 1) * spatial(4, 1) * local(1, n / (8 gn)) * (mma C atom)

which is the mma.sync layout with warps 4 gm x gn whenever tm64 == 1. It is chosen when both
operands have canonical wgmma layouts (tilecraft.layout.wgmma) and, if some gemm of the kernel
reads A from registers, only when the layout is the mma.sync one (that gemm's A layout is).
`TILECRAFT_WGMMA=0` turns it off.

An accumulator whose layout is declared (`T.alloc_fragment(layout=)`, a Tilus register tensor,
or another gemm into it: rules_block.py runs first) picks the partition whose C layout it is,
whatever the policy says (`choose_partition`): wgmma's first, then mma.sync's (the policy's
first, then every wm x wn, r copies). A layout no partition gives is TC501 naming both.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Gemm
from tilecraft.ir.visitor import walk
from tilecraft.layout import local, replicate, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16
from tilecraft.layout.swizzle import make_swizzled_layout
from tilecraft.layout.wgmma import operand_descriptor

from ..choose_swizzles import wants_swizzle
from .context import where


def warp_partitions(op: Gemm, num_warps: int) -> list[tuple[int, int, int]]:
    """Every (wm, wn, r) the gemm's tile splits into m16n8k16 atoms by, fewest copies first;
    the policy's choice (`warp_partition`) is not necessarily first."""
    m, n, _ = op.mnk()
    out, r = [], 1
    while r <= num_warps:
        g = num_warps // r
        out += [(wm, g // wm, r) for wm in range(1, g + 1)
                if g % wm == 0 and m % (16 * wm) == 0 and n % (8 * (g // wm)) == 0]
        r *= 2
    return out


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


def wgmma_c_layout(m: int, n: int, gm: int, gn: int):
    return (spatial(gm, gn) * local(m // (64 * gm), 1) * spatial(4, 1)
            * local(1, n // (8 * gn)) * MMA_M16N8K16_F16.c)


def operand_layout(region):
    """The shared layout of a whole-buffer gemm operand as codegen stores it; None otherwise."""
    buf = region.buffer
    if buf.scope != "shared" or not region.is_full() or not wants_swizzle(buf):
        return None
    return make_swizzled_layout(buf.static_shape, 16)


def wgmma_descriptors(op: Gemm, gm: int, gn: int) -> list | None:
    """[(A descriptor, B descriptor) per warpgroup (wg = g_m * gn + g_n)], None if any operand
    slab is not a canonical wgmma layout. A in registers has no descriptor (None)."""
    m, n, k = op.mnk()
    a_regs = op.A.buffer.scope == "fragment"
    la, lb = operand_layout(op.A), operand_layout(op.B)
    if (la is None and not a_regs) or lb is None:
        return None
    out = []
    for g in range(gm * gn):
        g_m, g_n = divmod(g, gn)
        da = None if a_regs else operand_descriptor(la, not op.transpose_A, g_m * m // gm, 64,
                                                    m // (64 * gm), k // 16)
        db = operand_descriptor(lb, op.transpose_B, g_n * n // gn, n // gn, 1, k // 16)
        if (da is None and not a_regs) or db is None:
            return None
        out.append((da, db))
    # the emitter adds g_m * (start step of A) and g_n * (start step of B) to one descriptor
    a0, b0 = out[0]
    for g, (da, db) in enumerate(out):
        g_m, g_n = divmod(g, gn)
        for d, d0, i, ref in ((da, a0, g_m, out[gn][0] if gm > 1 else a0),
                              (db, b0, g_n, out[1][1] if gn > 1 else b0)):
            if d is None:
                continue
            step = ref.starts[(0, 0)] - d0.starts[(0, 0)]
            if any(d.starts[key] != d0.starts[key] + i * step for key in d0.starts):
                return None
    return out


def wgmma_options(ctx, op: Gemm, num_warps: int) -> list[tuple[int, int]]:
    """Every (gm, gn) warpgroups along M and N this gemm can run on wgmma with, best first (the
    policy's first); [] when it runs on mma.sync."""
    state = ctx.state
    if not state.target.has_wgmma or not state.options.wgmma:
        return []
    names = {op.A.dtype.name, op.B.dtype.name}
    if (num_warps % 4 or names not in ({"float16"}, {"bfloat16"})
            or op.C.buffer.scope != "fragment" or op.C.dtype.name != "float32"
            or not op.C.is_full()):
        return []
    m, n, k = op.mnk()
    groups = num_warps // 4
    options = [(gm, groups // gm) for gm in range(1, groups + 1) if groups % gm == 0]
    options = [(gm, gn) for gm, gn in options
               if k % 16 == 0 and m % (64 * gm) == 0 and n % (8 * gn) == 0 and n // gn <= 256]
    if op.A.buffer.scope == "fragment":
        # A from registers: every warpgroup holds whole rows (its A rows are its C rows), one
        # 64-row tile each, so that the A layout is the mma.sync one (the accumulator it comes
        # from keeps its layout whichever instruction made it)
        if op.transpose_A or not op.A.is_full():
            return []
        options = [(gm, gn) for gm, gn in options if gn == 1 and m == 64 * gm]
    if op.policy == "FullRow":
        options = [o for o in options if o[1] == 1] or options
    elif op.policy == "FullCol":
        options = [o for o in options if o[0] == 1] or options
    # fewest operand rows read per k16 per warpgroup (wide N), then the squarest tile
    options.sort(key=lambda o: (m // (64 * o[0]) * (64 + n // o[1]), abs(m // o[0] - n // o[1])))
    out = []
    for gm, gn in options:
        if wgmma_descriptors(op, gm, gn) is None:
            continue
        if _has_register_a_gemm(ctx):
            wm, wn, r = warp_partition(op, num_warps)
            if r != 1 or wgmma_c_layout(m, n, gm, gn) != c_layout(m, n, wm, wn):
                continue
        out.append((gm, gn))
    return out


def _has_register_a_gemm(ctx) -> bool:
    if not hasattr(ctx, "register_a_gemm"):
        ctx.register_a_gemm = any(isinstance(s, Gemm) and s.A.buffer.scope == "fragment"
                                  for s in walk(ctx.state.kernel.body))
    return ctx.register_a_gemm


def gemm_rule(ctx, op: Gemm, level: str) -> None:
    if level != "strict":
        return
    state = ctx.state
    m, n, k = op.mnk()
    on_wgmma, grid = choose_partition(ctx, op, state.num_threads // 32)
    if on_wgmma:
        gm, gn = grid
        state.gemm_wgmma[op] = grid
        state.gemm_warps[op] = (4 * gm, gn)
        state.gemm_copies[op] = 1
        ctx.set(op.C.buffer, wgmma_c_layout(m, n, gm, gn), op, "wgmma accumulator layout")
        if op.A.buffer.scope == "fragment":  # m == 64 gm: the mma.sync A layout of 4 gm warps
            ctx.set(op.A.buffer, a_layout(m, k, 4 * gm), op, "wgmma operand A layout")
        return
    wm, wn, r = grid
    state.gemm_warps[op] = (wm, wn)
    state.gemm_copies[op] = r
    ctx.set(op.C.buffer, c_layout(m, n, wm, wn, r), op, "mma accumulator layout")
    if op.A.buffer.scope == "fragment":
        if wn != 1 or op.transpose_A or r != 1:
            raise TilecraftError("TC502", span=op.span, detail="T.gemm with A in registers "
                                 "and warps split along N (or transpose_A)",
                                 hint="use policy=T.GemmWarpPolicy.FullRow")
        ctx.set(op.A.buffer, a_layout(m, k, wm), op, "mma operand A layout")


def choose_partition(ctx, op: Gemm, num_warps: int) -> tuple[bool, tuple[int, ...]]:
    """(True, (gm, gn)) on wgmma or (False, (wm, wn, r)) on mma.sync: the policy's partition,
    or, when the accumulator's layout is already fixed (declared with `layout=`, a Tilus
    register tensor, another gemm into it), the partition whose accumulator layout it is (the
    policy's if it qualifies, wgmma before mma.sync). TC501 naming both layouts when none is."""
    m, n, _ = op.mnk()
    wgs = wgmma_options(ctx, op, num_warps)
    want = ctx.get(op.C.buffer)
    if want is None:
        return (True, wgs[0]) if wgs else (False, warp_partition(op, num_warps))
    parts = warp_partitions(op, num_warps)
    if parts:
        first = warp_partition(op, num_warps)
        parts = [first] + [p for p in parts if p != first]
    for g in wgs:
        if wgmma_c_layout(m, n, *g) == want:
            return True, g
    for p in parts:
        if c_layout(m, n, *p) == want:
            return False, p
    default = (wgmma_c_layout(m, n, *wgs[0]) if wgs else
               c_layout(m, n, *parts[0]) if parts else None)
    declared = ctx.origin.get(op.C.buffer)
    raise TilecraftError(
        "TC501", span=op.span, buffer=op.C.buffer.name,
        detail=f"{where(declared)} gives it {want}, which no warp partition of T.gemm's "
        f"{m}x{n} tile over {num_warps} warps accumulates in"
        + (f" (policy {op.policy} gives {default})" if default is not None else ""),
        hint="declare the accumulator layout of a warp partition "
             "(tilecraft.passes.layout_inference.rules_gemm.c_layout(m, n, wm, wn)), or let "
             "inference choose it (no layout=)",
        notes=tuple((sp, "the declared layout comes from here")
                    for sp in (getattr(declared, "span", None),) if sp is not None))
