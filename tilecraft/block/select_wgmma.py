"""Selection of `dot_shared` onto Hopper's wgmma.mma_async m64nNk16 (f16/bf16 -> f32).

The warpgroups (128 threads each, gm x gn of them) split C; warpgroup (g_m, g_n) issues, per k16
step, one m64nNk16 (N = n / gn) per 64-row tile t of its rows, into the registers of C atom row
t. That is a plan when:
- the target has wgmma, a and b are f16 (or both bf16), c and out float32 of one layout;
- C's layout is the wgmma accumulator layout of some split with gm * gn warpgroups
  (rules_gemm.wgmma_c_layout: `spatial(gm, gn) * local(m/64gm, 1) * spatial(4, 1) *
  local(1, n/8gn) * mma.c`, the mma.sync register order);
- every shared operand's layout is a canonical wgmma layout for every slab a warpgroup reads
  (tilecraft.layout.wgmma.operand_descriptor), each warpgroup's slabs being warpgroup 0's plus
  a constant step per warpgroup index (one descriptor per operand, offset at run time);
- a register A is in the mma.sync A layout of 4 gm warps, one 64-row tile per warpgroup
  (gn == 1, m == 64 gm): the four A registers of k16 step kk are its registers kk*8.. in pairs.

    dot_shared(A_s[128, 32] swizzled 64B, B_s[32, 128] swizzled 128B, acc) on 128 threads
    -> WgmmaPlan(gm=1, gn=1, tm=2, nw=128, func="tc_wgmma_m64n128k16_f16_t01", ...)
"""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.layout.wgmma import WgmmaOperand, operand_descriptor

from .dot_shared import DotShared
from .tensors import RegisterTensor

PTX_TYPE = {"float16": "f16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class WgmmaPlan:
    """dot_shared as wgmma: warpgroups gm x gn, `tm` m64 tiles of `nw` columns per warpgroup;
    `a` (None: A from registers) and `b` are warpgroup 0's descriptors (`starts[(tile, kk)]`,
    byte offsets from the tensor's start), `step_a`/`step_b` the bytes added per warpgroup
    index along M / N; `func` the device function issuing one m64n{nw}k16 with the operands'
    major-ness flags `trans_a` (None for registers) and `trans_b` (1: MN-major)."""

    gm: int
    gn: int
    tm: int
    nw: int
    k16: int
    a: WgmmaOperand | None
    b: WgmmaOperand
    step_a: int
    step_b: int
    func: str
    dtype: str
    trans_a: int | None
    trans_b: int


def helper_name(nw: int, dtype: str, trans_a: int | None, trans_b: int) -> str:
    """The name of the device function issuing one m64n{nw}k16 (A by descriptor or registers)."""
    t = PTX_TYPE[dtype]
    if trans_a is None:
        return f"tc_wgmma_m64n{nw}k16_{t}_rs_t{trans_b}"
    return f"tc_wgmma_m64n{nw}k16_{t}_t{trans_a}{trans_b}"


def select_dot_shared(s: DotShared, num_threads: int, target=None) -> WgmmaPlan | None:
    """The wgmma plan of `s`, or None (the printer's SIMT form)."""
    from tilecraft.passes.layout_inference.rules_gemm import a_layout, wgmma_c_layout

    a, b, c, out = s.a, s.b, s.c, s.out
    if target is None or not getattr(target, "has_wgmma", False) or num_threads % 128:
        return None
    if a.dtype.name not in PTX_TYPE or b.dtype != a.dtype or c.dtype.name != "float32" \
            or out.dtype != c.dtype or out.layout != c.layout:
        return None
    m, n, k = s.mnk
    a_regs = isinstance(a, RegisterTensor)
    groups = num_threads // 128
    for gm in range(1, groups + 1):
        gn = groups // gm
        if groups % gm or k % 16 or m % (64 * gm) or n % (8 * gn) or n // gn > 256:
            continue
        if c.layout != wgmma_c_layout(m, n, gm, gn):
            continue
        if a_regs and (gn != 1 or m != 64 * gm or s.trans_a or a.layout != a_layout(m, k, 4 * gm)):
            continue
        descs = _descriptors(s, gm, gn, a_regs)
        if descs is None:
            continue
        (da, db), step_a, step_b = descs
        trans_a = None if a_regs else int(s.trans_a)
        trans_b = int(not s.trans_b)
        nw = n // gn
        return WgmmaPlan(gm, gn, m // (64 * gm), nw, k // 16, da, db, step_a, step_b,
                         helper_name(nw, a.dtype.name, trans_a, trans_b), a.dtype.name,
                         trans_a, trans_b)
    return None


def _descriptors(s: DotShared, gm: int, gn: int, a_regs: bool):
    """((A, B) descriptors of warpgroup 0, A step, B step), None when some warpgroup's slab is
    not a canonical wgmma layout or its starts are not warpgroup 0's plus a constant step."""
    m, n, k = s.mnk
    if s.b.dtype.bits != 16:
        return None
    per_wg = []
    for g in range(gm * gn):
        g_m, g_n = divmod(g, gn)
        da = None if a_regs else operand_descriptor(s.a.layout, not s.trans_a, g_m * m // gm, 64,
                                                    m // (64 * gm), k // 16)
        db = operand_descriptor(s.b.layout, s.trans_b, g_n * n // gn, n // gn, 1, k // 16)
        if (da is None and not a_regs) or db is None:
            return None
        per_wg.append((da, db))
    a0, b0 = per_wg[0]
    step_a = per_wg[gn][0].starts[(0, 0)] - a0.starts[(0, 0)] if gm > 1 and not a_regs else 0
    step_b = per_wg[1][1].starts[(0, 0)] - b0.starts[(0, 0)] if gn > 1 else 0
    for g, (da, db) in enumerate(per_wg):
        g_m, g_n = divmod(g, gn)
        for d, d0, i, step in ((da, a0, g_m, step_a), (db, b0, g_n, step_b)):
            if d is None:
                continue
            if (d.lbo, d.sbo, d.width) != (d0.lbo, d0.sbo, d0.width) or \
                    any(d.starts[key] != d0.starts[key] + i * step for key in d0.starts):
                return None
    return (a0, b0), step_a, step_b
