"""Lowering of T.gemm: operands into registers in the mma operand layouts, then `dot` (or, on
wgmma, `dot_shared` on the shared tiles).

    T.gemm(A_s, B_s, acc, clear_accum=True)   ->  fill(acc, 0.0)
                                                  A_s_t1 = allocate_register(f16[64, 32], layout=LA)
                                                  load_shared(A_s, offset=[0, 0], out=A_s_t1)
                                                  B_s_t2 = allocate_register(f16[32, 64], layout=LB)
                                                  load_shared(B_s, offset=[0, 0], out=B_s_t2)
                                                  dot(A_s_t1, B_s_t2, acc, out=acc)

Each warp needs the A rows and B columns of the C blocks it holds. With the accumulator's layout
divided by the mma atom, `C = qc * mma.c` (mma = m16n8k16):

    LA = (qc reduced over N) * local(1, k/16) * mma.a
    LB = local(k/16, 1) * (qc reduced over M) * mma.b

so the dot's layouts divide by the atom and selection puts it on mma.sync. (When C is not
mma-shaped: from the warp grid wm x wn, r copies, of state.gemm_warps,
`LA = replicate(r) * spatial(wm, 1) * replicate(wn) * local(m/16wm, k/16) * mma.a` and
`LB = replicate(r) * replicate(wm) * spatial(1, wn) * local(k/16, n/8wn) * mma.b`.) An A already
in registers is used as it is. A
transposed operand (transpose_A/B: the tile is stored [K, M] / [N, K]) is loaded in the
transposed layout and `view`ed as the operand: each thread's registers are the same, only the
logical index they mean is transposed (what ldmatrix.trans does). A gemm that layout inference put
on wgmma (state.gemm_wgmma) with whole shared operands (A may be a whole fragment) becomes one
synchronous `dot_shared(A_s, B_s, acc, trans_a=, trans_b=)` instead: no register operands,
wgmma reads shared memory by descriptor (block/select_wgmma.py). `clear_accum` is a
`fill(acc, 0)` first.
"""

from __future__ import annotations

from tilecraft.block import Dot, DotShared, Fill, RegisterTensor, View
from tilecraft.ir import Gemm
from tilecraft.layout import Fragment, LayoutError, local, replicate, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16

from . import rule
from .context import LowerContext, not_lowered


def transpose(layout: Fragment) -> Fragment:
    """The layout of the transposed 2-D tile: thread t's element e is (j, i) where `layout`
    has (i, j)."""
    rows, cols = layout.dim_modes
    order = cols + rows
    new = {m: k for k, m in enumerate(order)}
    return Fragment.create(
        (layout.shape[1], layout.shape[0]), tuple(layout.mode_shape[m] for m in order),
        tuple(m if m < 0 else new[m] for m in layout.spatial_modes),
        tuple(new[m] for m in layout.local_modes))


def _rep(n: int) -> Fragment | None:
    return replicate(n, 2) if n > 1 else None


def _chain(*parts: Fragment | None) -> Fragment:
    out = None
    for p in parts:
        if p is not None:
            out = p if out is None else out * p
    return out


def operand_layouts_of(c: Fragment, k: int):
    """(LA, LB) that give every warp the A rows and B columns of the C blocks it holds: with
    `C = qc * mma.c` (layout division), `LA = (qc reduced over N) * local(1, k/16) * mma.a` and
    `LB = local(k/16, 1) * (qc reduced over M) * mma.b`; None when C is not mma-shaped."""
    from tilecraft.layout.algebra import quotient

    atom = MMA_M16N8K16_F16
    qc = quotient(c, atom.c)
    if qc is None or qc.ndim != 2 or k % 16:
        return None
    try:
        qa = qc.reduce(1, keepdim=True) * local(1, k // 16)
        qb = local(k // 16, 1) * qc.reduce(0, keepdim=True)
        return qa * atom.a, qb * atom.b
    except LayoutError:
        return None


def operand_layouts(m: int, n: int, k: int, wm: int, wn: int, r: int):
    """(LA [m, k], LB [k, n]) for the warp grid wm x wn, r copies; None when the tile does not
    split into m16n8k16 atoms."""
    atom = MMA_M16N8K16_F16
    if m % (16 * wm) or n % (8 * wn) or k % 16:
        return None
    try:
        la = _chain(_rep(r), spatial(wm, 1), _rep(wn), local(m // (16 * wm), k // 16), atom.a)
        lb = _chain(_rep(r), _rep(wm), spatial(1, wn), local(k // 16, n // (8 * wn)), atom.b)
    except LayoutError:
        return None
    return la, lb


def _operand(cx: LowerContext, region, layout: Fragment | None, trans: bool, span,
             out: list) -> RegisterTensor:
    reg = cx.whole_fragment(region, span)
    if reg is not None:
        return reg
    shape = cx.region_tile(region, span)
    if len(shape) != 2:
        raise not_lowered(span, f"a T.gemm operand of tile shape {list(shape)}")
    want = (shape[1], shape[0]) if trans else shape
    if layout is None or tuple(layout.shape) != tuple(want):
        layout = cx.copy_layout(want, region.dtype)
    stored = transpose(layout) if trans else layout
    tile = cx.temp(region.buffer.name, region.dtype, stored, span, out)
    out.append(cx.load(region, tile, span))
    if not trans:
        return tile
    operand = cx.temp(region.buffer.name, region.dtype, layout, span, out)
    out.append(View.create(tile, operand, span=span))
    return operand


@rule(Gemm)
def lower_gemm(cx: LowerContext, op: Gemm) -> list:
    span = op.span
    c = cx.whole_fragment(op.C, span)
    if c is None:
        raise not_lowered(span, "T.gemm accumulating into memory")
    if op.A.buffer.scope == "fragment" and op.transpose_A:
        raise not_lowered(span, "T.gemm with a transposed A in registers")
    shared = _dot_shared(cx, op, c, span)
    if shared is not None:
        return shared
    m, n, k = op.mnk()
    wm, wn = cx.state.gemm_warps[op]
    r = cx.state.gemm_copies.get(op, 1)
    layouts = None
    if isinstance(k, int):  # the C blocks' own warps (mma selection then needs no shuffle)
        layouts = operand_layouts_of(c.layout, k) or operand_layouts(m, n, k, wm, wn, r)
    la, lb = layouts if layouts is not None else (None, None)
    out: list = []
    if op.clear_accum:
        out.append(Fill.create(c, 0, span=span))
    a = _operand(cx, op.A, la, op.transpose_A, span, out)
    b = _operand(cx, op.B, lb, op.transpose_B, span, out)
    out.append(Dot.create(a, b, c, out=c, span=span))
    return out


def _dot_shared(cx: LowerContext, op: Gemm, c: RegisterTensor, span) -> list | None:
    """A gemm that layout inference put on wgmma (state.gemm_wgmma), on whole shared operands
    (A may be a whole fragment): `dot_shared` (synchronous), read by descriptor; None otherwise."""
    if op not in cx.state.gemm_wgmma or op.B.buffer.scope != "shared" or not op.B.is_full():
        return None
    if op.A.buffer.scope not in ("shared", "fragment") or not op.A.is_full():
        return None
    a, b = cx.tensor(op.A.buffer, span), cx.tensor(op.B.buffer, span)
    out = [Fill.create(c, 0, span=span)] if op.clear_accum else []
    out.append(DotShared.create(a, b, c, out=c, trans_a=op.transpose_A, trans_b=op.transpose_B,
                                span=span))
    return out
