"""T.reduce_{sum,max,min,abssum,absmax} over fragments: thread-local, warp shuffle, shared.

1. each thread folds the registers of every output row it holds (`red[j]`);
2. lanes that held other parts of the same row combine by butterfly __shfl_xor_sync over the
   reduced dimension's thread modes inside a warp (every lane ends with the result);
3. modes that cross warps go through a shared scratch slot (plan_shared_memory): write, barrier,
   then each lane of a warp reads one warp's partial (the lanes that shared a row pick the
   warps by their lane bits) and a butterfly of shuffles combines them: one load and log2(warps)
   shuffles per thread; where a row spans fewer lanes than warps, every thread reads its group's
   partials and combines them in one order. Replicas hold identical bits either way (a butterfly
   adds the same pairs at every lane: a + b == b + a); barrier;
4. the result lands in the (replicated) output registers, combined with them when clear=False.
"""

from __future__ import annotations

import itertools

from tilecraft.diagnostics import TilecraftError
from tilecraft.dtypes import resolve
from tilecraft.ir import Reduce
from tilecraft.passes.smem_liveness import cross_warp_modes

from .cexpr import ctype, zero
from .indexing import local_map


KINDS = ("sum", "abssum", "max", "absmax", "min")


def accumulator_dtype(src, dst):
    """The dtype a reduction computes in (the interpreter's rule too): integers in the wider of
    `src` and `dst` (wrapping like the GPU); floats in float32, float64 when either side is."""
    if src.is_integer and dst.is_integer:
        return dst if dst.bits >= src.bits else src
    return resolve("float64") if "float64" in (src.name, dst.name) else resolve("float32")


def _combine(kind: str, t: str, a: str, b: str) -> str:
    if kind in ("sum", "abssum"):
        return f"{a} + {b}" if t in ("float", "double") else f"tc::wrap_add<{t}>({a}, {b})"
    return f"tc::{'maximum' if kind in ('max', 'absmax') else 'minimum'}<{t}>({a}, {b})"


def _init(kind: str, t: str) -> str:
    """The identity of the combine: 0 for sums, the type's lowest / highest for max / min
    (absmax too: abs wraps for the minimum of a signed type, as on the interpreter)."""
    if kind in ("sum", "abssum"):
        return zero(t)
    return f"tc::{'highest' if kind == 'min' else 'lowest'}<{t}>()"


def _abs(t: str, acc, x: str) -> str:
    if t in ("float", "double"):
        return f"{'fabsf' if t == 'float' else 'fabs'}({x})"
    return x if acc.kind == "uint" else f"tc::wrap_abs<{t}>({x})"


def _xor_offsets(modes) -> list[int]:
    offs = []
    for stride, size in modes:
        if size & (size - 1) or stride & (stride - 1):
            return None
        j = 1
        while j < size:
            offs.append(stride * j)
            j *= 2
    return offs


def emit_reduce(em, op: Reduce) -> None:
    src, dst = op.src.buffer, op.dst.buffer
    if src.scope != "fragment" or dst.scope != "fragment":
        raise TilecraftError("TC502", span=op.span, detail=f"T.reduce from {src.scope} to "
                             f"{dst.scope}", hint="reduce fragments (T.alloc_fragment)")
    ls, ld = em.state.layouts[src], em.state.layouts[dst]
    keep = tuple(d for d in range(len(src.shape)) if d != op.dim)
    # A destination of the source's rank (extent 1 in `dim`) holds its registers in the order
    # of the same layout without that dimension: map the source's registers through that.
    ld_map = ld.reduce(op.dim, keepdim=False) if len(dst.shape) == len(src.shape) else ld
    if op.kind not in KINDS:  # the language refuses other kinds; never build one as a min
        raise TilecraftError("TC502", span=op.span, detail=f"internal: reduce kind "
                             f"{op.kind!r}", hint="")
    acc = accumulator_dtype(src.dtype, dst.dtype)
    t = ctype(acc)
    offs = _xor_offsets(cross_warp_modes(ls, op.dim))
    if offs is None:
        raise TilecraftError("TC502", span=op.span, detail="a reduction over a layout that is "
                             "not a power of two", hint="")
    lane_offs = [o for o in offs if o < 32]
    warp_offs = [o for o in offs if o >= 32]
    em.comment(op, f"T.reduce_{op.kind} {src.name} -> {dst.name} over dim {op.dim}: "
               f"{ls.local_size} -> {ld.local_size} per thread, shuffles {lane_offs}"
               + (f", across warps {warp_offs}" if warp_offs else ""))
    em.open("")
    em.w(f"{t} red[{ld.local_size}];")
    em.w("#pragma unroll")
    em.w(f"for (int j = 0; j < {ld.local_size}; ++j) red[j] = {_init(op.kind, t)};")
    m = local_map(ls, ld_map, keep, op.span) if keep else "0"  # a 1-D source: one result
    x = f"tc::cast<{t}>({em.name_buf(src)}[li])"
    if op.kind in ("abssum", "absmax"):
        x = _abs(t, acc, x)
    em.w("#pragma unroll")
    em.w(f"for (int li = 0; li < {ls.local_size}; ++li) red[{m}] = "
         f"{_combine(op.kind, t, f'red[{m}]', x)};")
    if lane_offs:
        em.w("#pragma unroll")
        em.open(f"for (int j = 0; j < {ld.local_size}; ++j)")
        for o in lane_offs:
            em.w(f"red[j] = {_combine(op.kind, t, 'red[j]', f'__shfl_xor_sync(0xffffffffu, red[j], {o})')};")
        em.close()
    if warp_offs:
        off = em.state.reduce_scratch[id(op)]
        nt = em.state.num_threads
        em.w(f"{t}* scratch = reinterpret_cast<{t}*>(tc_smem + {off});")
        if em.read_since_sync:
            em.sync()
        em.w("#pragma unroll")
        em.w(f"for (int j = 0; j < {ld.local_size}; ++j) scratch[j * {nt} + tid] = red[j];")
        em.sync()
        em.w(f"const int rbase = tid & ~{sum(warp_offs)};")
        if len(lane_offs) >= len(warp_offs):
            _combine_partials_by_shuffle(em, op.kind, t, ld.local_size, nt, lane_offs, warp_offs)
        else:
            _combine_partials_in_order(em, op.kind, t, ld.local_size, nt, warp_offs)
        em.sync()
    dt = ctype(dst.dtype)
    em.w("#pragma unroll")
    if op.clear:
        em.w(f"for (int j = 0; j < {ld.local_size}; ++j) {em.name_buf(dst)}[j] = tc::cast<{dt}>(red[j]);")
    else:
        cur = f"tc::cast<{t}>({em.name_buf(dst)}[j])"
        em.w(f"for (int j = 0; j < {ld.local_size}; ++j) {em.name_buf(dst)}[j] = "
             f"tc::cast<{dt}>({_combine(op.kind, t, cur, 'red[j]')});")
    em.close()


def _combine_partials_by_shuffle(em, kind: str, t: str, rows: int, nt: int,
                                 lane_offs: list[int], warp_offs: list[int]) -> None:
    """Lane bit lane_offs[i] picks warp bit warp_offs[i]: the 2^k lanes that differ in the first k
    reduced lane bits read the k warps' partials, then shuffle over those bits (warp bits are
    above every lane bit: each pick is a left shift)."""
    pairs = list(zip(lane_offs, warp_offs))
    pick = " | ".join(f"((tid & {lo}) << {(wo // lo).bit_length() - 1})" for lo, wo in pairs)
    em.w(f"const int pick = {pick};  // the warp whose partial this lane reads")
    em.w("#pragma unroll")
    em.open(f"for (int j = 0; j < {rows}; ++j)")
    em.w(f"red[j] = scratch[j * {nt} + rbase + pick];")
    for lo, _ in pairs:
        em.w(f"red[j] = {_combine(kind, t, 'red[j]', f'__shfl_xor_sync(0xffffffffu, red[j], {lo})')};")
    em.close()


def _combine_partials_in_order(em, kind: str, t: str, rows: int, nt: int,
                               warp_offs: list[int]) -> None:
    """Every thread of a group reads the group's partials in one order and combines them in that
    order. (A balanced tree of the loads raised the registers of a 512-thread softmax 64 -> 72,
    one block per SM, 49% of copy speed.)"""
    masks = sorted({sum(c) for r in range(len(warp_offs) + 1)
                    for c in itertools.combinations(warp_offs, r)} - {0})
    em.w("#pragma unroll")
    em.open(f"for (int j = 0; j < {rows}; ++j)")
    em.w(f"const {t}* group = scratch + j * {nt} + rbase;  // the group's partials")
    em.w("red[j] = group[0];")
    for mk in masks:  # (rbase has these bits clear: `+` gives immediate load offsets)
        em.w(f"red[j] = {_combine(kind, t, 'red[j]', f'group[{mk}]')};")
    em.close()
