"""T.copy: global <-> shared in 16-byte vectors, fragments element by element through their
layout, with bounds guards for partial tiles (reads outside the tensor give 0, writes outside
are dropped).

    T.copy(A[by*128, k*32], A_s)   ->  per thread: 16-byte chunks c = tid, tid + 128, ...
                                       uint4 load (or cp.async in a pipeline), swizzled store
    T.copy(C_f, C[by*128, bx*128]) ->  per thread: its registers of C_f, guarded stores
    T.copy(A[bx, 0:8], L_local)    ->  every thread copies the whole region (private arrays)
A global -> shared copy whose destination still holds its tile is skipped (passes/copy_reuse.py).
"""

from __future__ import annotations

import math
import re

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Copy
from tilecraft.passes.copy_reuse import reused_copies

from .cexpr import ctype, zero
from .indexing import frag_coords, replica_index
from .regions import in_bounds, region_index, tile_shape, vector_aligned


def _mem_ptr(em, buf) -> str:
    return em.shared_ptr[buf] if buf.scope == "shared" else em.name_buf(buf)


def emit_copy(em, op: Copy, async_copy: bool = False) -> None:
    s, d = op.src.buffer, op.dst.buffer
    if not hasattr(em, "reused_copies"):
        em.reused_copies = reused_copies(em.state)
    if id(op) in em.reused_copies:
        em.comment(op, f"T.copy {s.name} ({s.scope}) -> {d.name} ({d.scope}): skipped, "
                   f"{d.name} still holds this tile")
        return None
    em.comment(op, f"T.copy {s.name} ({s.scope}) -> {d.name} ({d.scope})")
    if "local" in (s.scope, d.scope):
        return _local_copy(em, op)
    if s.scope == "fragment" and d.scope == "fragment":
        return _frag_to_frag(em, op)
    if s.scope == "fragment" or d.scope == "fragment":
        return _frag_mem(em, op)
    if s.scope in ("global", "shared") and d.scope in ("global", "shared"):
        v = 16 // (s.dtype.bits // 8) if s.dtype.bits >= 8 else 0
        if (s.dtype == d.dtype and v and tile_shape(op.src) == tile_shape(op.dst)
                and vector_aligned(op.src, v) and vector_aligned(op.dst, v)):
            return _vector_copy(em, op, v, async_copy)
        return _scalar_copy(em, op)
    raise TilecraftError("TC502", span=op.span, detail=f"T.copy from {s.scope} to {d.scope}",
                         hint="")


def _chunk_loop(em, total: int, body) -> None:
    nt = em.state.num_threads
    iters = math.ceil(total / nt)
    em.w("#pragma unroll")
    em.open(f"for (int it = 0; it < {iters}; ++it)")
    em.w(f"const int c = it * {nt} + tid;")
    if total % nt:
        em.open(f"if (c < {total})")
    body()
    if total % nt:
        em.close()
    em.close()


def _coords(shape: tuple[int, ...], flat: str) -> list[str]:
    out, stride = [], math.prod(shape)
    for n in shape:
        stride //= n
        e = flat if stride == 1 else f"({flat} / {stride})"
        out.append(e if stride * n == math.prod(shape) else f"({e} % {n})")
    return out


def _chunk_coords(em, cshape: tuple[int, ...]) -> list[str]:
    """Coordinates of chunk c = it * threads + tid. When the threads cover whole rows, write
    them as (thread part) + it * (constant), so the compiler sees one base address per thread
    plus an immediate offset per `it`."""
    nt, inner = em.state.num_threads, math.prod(cshape[1:])
    if len(cshape) < 2 or nt % inner or math.prod(cshape) <= nt:
        return _coords(cshape, "c")
    rows = nt // inner
    return [f"(tid / {inner} + it * {rows})" if inner > 1 else f"(tid + it * {rows})",
            *_coords(cshape[1:], f"(tid % {inner})")]


def _it_step(expr: str, threads: int, iters: int) -> int | None:
    """The constant by which flat index `expr` moves per chunk-loop step `it`, checked for every
    thread and step and three random values of the other variables; None when not constant."""
    import random
    import re

    from .emit_gemm import _c_eval

    names = set(re.findall(r"[A-Za-z_]\w*", expr)) - {"tid", "it"}
    rng = random.Random(0)
    step = None
    for _ in range(3):
        env = {n: rng.randrange(1, 1 << 12) for n in names}
        for tid in range(threads):
            try:
                at = [_c_eval(expr, {**env, "tid": tid, "it": it}) for it in range(iters)]
            except Exception:  # noqa: BLE001  (a name or operator eval cannot follow)
                return None
            d = at[1] - at[0] if iters > 1 else 0
            if step is not None and d != step or any(a - at[0] != i * d for i, a in enumerate(at)):
                return None
            step = d
    return step


def _hoisted_async(em, op: Copy, coords: list[str], total: int) -> tuple[str, str] | None:
    """Per-thread source pointer and destination shared address for chunk it = 0, when both
    move by constants per `it` (the cp.async then take immediate offsets)."""
    s, d = op.src.buffer, op.dst.buffer
    if s.scope != "global" or d.scope != "shared" or not any("it *" in c for c in coords):
        return None
    si, di = region_index(em, op.src, coords), region_index(em, op.dst, coords)
    sf, df = em.flat_index(s, si), em.flat_index(d, di)
    if in_bounds(em, op.src, si) or in_bounds(em, op.dst, di):
        return None
    nt = em.state.num_threads
    iters = max(2, -(-total // nt))  # chunk-loop steps
    ss, ds = _it_step(sf, nt, iters), _it_step(df, nt, iters)
    if ss is None or ds is None:
        return None
    sf0, df0 = (re.sub(r"\bit \*", "0 *", x) for x in (sf, df))  # chunk 0 (not `split *`)
    em.w(f"const {ctype(s.dtype)}* src_t = &{em.name_buf(s)}[{sf0}];")
    em.w(f"const tc::u32 dst_t = tc::smem_addr(&{_mem_ptr(em, d)}[{df0}]);")
    return (f"src_t + it * {ss}", f"dst_t + it * {ds * d.dtype.bits // 8}u")


def _note_vector(em, buf, nbytes: int) -> None:
    """Global `buf` is accessed `nbytes` at a time: its pointer must be that aligned (TC308)."""
    if buf.scope == "global":
        em.vector_bytes[buf] = max(em.vector_bytes.get(buf, 1), nbytes)


def _vector_copy(em, op: Copy, v: int, async_copy: bool) -> None:
    _note_vector(em, op.src.buffer, 16)
    _note_vector(em, op.dst.buffer, 16)
    shape = tile_shape(op.src)
    cshape = shape[:-1] + (shape[-1] // v,)
    total = math.prod(cshape)
    if async_copy:
        coords = _chunk_coords(em, cshape)
        coords[-1] = f"{coords[-1]} * {v}"
        em.open("")
        hoisted = _hoisted_async(em, op, coords, total)
        if hoisted is not None:
            _chunk_loop(em, total, lambda: em.w(f"tc::cp_async_16({hoisted[1]}, {hoisted[0]});"))
            em.close()
            return
        em.close()

    def body():
        coords = _chunk_coords(em, cshape)
        coords[-1] = f"{coords[-1]} * {v}"
        si, di = region_index(em, op.src, coords), region_index(em, op.dst, coords)
        sp = f"&{_mem_ptr(em, op.src.buffer)}[{em.flat_index(op.src.buffer, si)}]"
        dp = f"&{_mem_ptr(em, op.dst.buffer)}[{em.flat_index(op.dst.buffer, di)}]"
        sg, dg = in_bounds(em, op.src, si), in_bounds(em, op.dst, di)
        if async_copy:
            if sg:
                em.w(f"const bool ok = {sg};")
                em.w(f"tc::cp_async_16({dp}, ok ? (const void*){sp} : "
                     f"(const void*){em.name_buf(op.src.buffer)}, ok);")
            else:
                em.w(f"tc::cp_async_16({dp}, {sp});")
            return
        if sg:
            em.w("uint4 val = make_uint4(0, 0, 0, 0);")
            em.w(f"if ({sg}) val = tc::load_128({sp});")
        else:
            em.w(f"const uint4 val = tc::load_128({sp});")
        if dg:
            em.w(f"if ({dg}) tc::store_128({dp}, val);")
        else:
            em.w(f"tc::store_128({dp}, val);")

    _chunk_loop(em, total, body)


def _scalar_copy(em, op: Copy, loop=_chunk_loop) -> None:
    shape = tile_shape(op.dst)
    if tile_shape(op.src) != shape or not all(isinstance(n, int) for n in shape):
        raise TilecraftError("TC502", span=op.span, detail="T.copy between regions of "
                             "different or dynamic shapes", hint="")

    def body():
        coords = _coords(shape, "c")
        si, di = region_index(em, op.src, coords), region_index(em, op.dst, coords)
        sref = f"{_mem_ptr(em, op.src.buffer)}[{em.flat_index(op.src.buffer, si)}]"
        dref = f"{_mem_ptr(em, op.dst.buffer)}[{em.flat_index(op.dst.buffer, di)}]"
        val = sref if op.src.dtype == op.dst.dtype else \
            f"tc::cast<{ctype(op.dst.dtype)}>({sref})"
        sg, dg = in_bounds(em, op.src, si), in_bounds(em, op.dst, di)
        if sg:
            val = f"(({sg}) ? {val} : {zero(ctype(op.dst.dtype))})"
        em.w(f"if ({dg}) {dref} = {val};" if dg else f"{dref} = {val};")

    loop(em, math.prod(shape), body)


def _frag_vector_width(lay, frag, mem) -> int:
    """Elements a thread can move with one vector access: its innermost registers hold
    consecutive elements of the tile's last dimension, which is contiguous in memory."""
    if not lay.local_modes or frag.buffer.shape[-1] == 1 or mem.extents[-1] == 1:
        return 1
    if mem.buffer.scope == "local":
        return 1  # a thread's private array: registers, not an aligned vector in memory
    m, run = lay.local_modes[-1], lay.local_sizes[-1]
    if lay.dim_modes[-1][-1:] != (m,):
        return 1
    v = min(run, 16 // max(1, mem.buffer.dtype.bits // 8))  # a 16-byte access in memory
    while v > 1 and (run % v or not vector_aligned(mem, v)):  # vectors within one run
        v //= 2
    return v if v > 1 and v & (v - 1) == 0 else 1


def _frag_mem(em, op: Copy) -> None:
    to_mem = op.src.buffer.scope == "fragment"
    frag, mem = (op.src, op.dst) if to_mem else (op.dst, op.src)
    lay = em.state.layouts[frag.buffer]
    if tile_shape(mem) != tuple(n for n in frag.buffer.shape if n != 1):
        raise TilecraftError("TC502", span=op.span, detail="T.copy of a partial fragment",
                             hint="copy whole fragments")
    v = _frag_vector_width(lay, frag, mem) if mem.buffer.dtype.bits >= 8 else 1
    if v > 1:
        _note_vector(em, mem.buffer, v * mem.buffer.dtype.bits // 8)
    rep = replica_index(lay, "tid") if to_mem else None
    if rep:
        em.open(f"if ({rep} == 0)")
    em.w("#pragma unroll")
    em.open(f"for (int li = 0; li < {lay.local_size}; li += {v})" if v > 1 else
            f"for (int li = 0; li < {lay.local_size}; ++li)")
    coords = [c for c, n in zip(frag_coords(lay, "tid", "li"), frag.buffer.shape) if n != 1]
    mi = region_index(em, mem, coords)
    addr = f"&{_mem_ptr(em, mem.buffer)}[{em.flat_index(mem.buffer, mi)}]"
    g = in_bounds(em, mem, mi)  # with v > 1 the vector is wholly inside or wholly outside
    mt, ft = ctype(mem.dtype), ctype(frag.dtype)
    conv = (lambda x, t: x) if frag.dtype == mem.dtype else (lambda x, t: f"tc::cast<{t}>({x})")
    if to_mem:
        if v > 1:
            em.w(f"tc::Vec<{mt}, {v}> val;")
            for j in range(v):
                em.w(f"val.v[{j}] = {conv(f'{em.name_buf(frag.buffer)}[li + {j}]', mt)};")
            st = f"tc::store_vec({addr}, val);"
        else:
            st = f"*{addr} = {conv(f'{em.name_buf(frag.buffer)}[li]', mt)};"
        em.w(f"if ({g}) {st}" if g else st)
    elif v > 1:
        em.w(f"tc::Vec<{mt}, {v}> val;")
        em.w(f"if ({g}) val = tc::load_vec<{mt}, {v}>({addr}); else val = tc::Vec<{mt}, {v}>{{}};"
             if g else f"val = tc::load_vec<{mt}, {v}>({addr});")
        for j in range(v):
            em.w(f"{em.name_buf(frag.buffer)}[li + {j}] = {conv(f'val.v[{j}]', ft)};")
    else:
        val = conv(f"*{addr}", ft)
        em.w(f"{em.name_buf(frag.buffer)}[li] = ({g}) ? {val} : {zero(ft)};" if g else
             f"{em.name_buf(frag.buffer)}[li] = {val};")
    em.close()
    if rep:
        em.close()


def _frag_to_frag(em, op: Copy) -> None:
    ls, ld = em.state.layouts[op.src.buffer], em.state.layouts[op.dst.buffer]
    if ls != ld:
        raise TilecraftError("TC501", span=op.span, buffer=op.dst.buffer.name,
                             detail=f"T.copy from {op.src.buffer.name} ({ls}) needs the same "
                             f"layout, it has {ld}", hint="copy through shared memory")
    t = ctype(op.dst.dtype)
    em.w("#pragma unroll")
    em.w(f"for (int li = 0; li < {ls.local_size}; ++li) {em.name_buf(op.dst.buffer)}[li] = "
         f"tc::cast<{t}>({em.name_buf(op.src.buffer)}[li]);")


def _local_copy(em, op: Copy) -> None:
    """T.alloc_local arrays are private to each thread, so every thread copies the whole tile
    (unrolled: a local array stays in registers only under constant indices). Into memory, every
    thread stores the same values (tid-independent code gives every thread the same local
    array, as the interpreter's single copy). A fragment gives each thread only its own
    elements, so fragment -> local goes through shared memory instead."""
    s, d = op.src.buffer, op.dst.buffer
    if s.scope == "fragment" and d.scope == "local":
        raise TilecraftError("TC502", span=op.span, detail="T.copy from a fragment to a local "
                             "array (each thread holds only part of the fragment)",
                             hint="copy the fragment to shared memory, then shared -> local")
    if s.scope == "fragment" or d.scope == "fragment":
        return _frag_mem(em, op)  # local -> fragment: each thread reads its elements
    if {s.scope, d.scope} <= {"local", "global", "shared"}:
        return _scalar_copy(em, op, loop=_thread_loop)
    raise TilecraftError("TC502", span=op.span, detail=f"T.copy from {s.scope} to {d.scope}",
                         hint="")


def _thread_loop(em, total: int, body) -> None:
    """Every thread runs `body` for c = 0 .. total - 1 (for its private arrays)."""
    em.w("#pragma unroll")
    em.open(f"for (int c = 0; c < {total}; ++c)")
    body()
    em.close()
