"""T.print and T.device_assert: device printf, and a trap that names the user's line.

Lines start like the interpreter's (interp/ops/misc.py), `[tilecraft block (bx, by)] msg: x = `,
with the block variables' values (the logical tile, also under T.use_swizzle):

    T.print(s, "s")       ->  if (tid == 0) printf("[tilecraft block (%d,)] s: s = %g\\n", bx, ..);
    T.print(A_s, "tile")  ->  __syncthreads(); thread 0 prints the interpreter's header line,
                              then one line per 8 values: `[tilecraft block (0,)]   [3, 8:16] ..`
    T.print(acc)          ->  thread 0 prints the header; then every thread prints the registers
                              it owns, one line each: `[tilecraft block (0,) thread 5]   [2, 7] ..`
    T.device_assert(c, m) ->  if (!(c)) { printf(block, thread, m, file:line);
                                          __assertfail(m, file, line, kernel, 1); }

Values print with %g (floats) or as integers (tc::dbg in debug.cuh). Coordinates are indices into
the printed tile (its size-1 dimensions dropped), as in the interpreter's array. Fragments print
where they live (no gather through shared memory, which would need a planned scratch buffer):
the order of their lines is the hardware's, sort them to read the tile. A scalar whose value
involves the thread index prints from every thread (with `thread %d`), any other from thread 0.
`__assertfail` is what CUDA's `assert` calls: the kernel stops with cudaErrorAssert
("device-side assert triggered") and the driver prints file, line, block and thread.
"""

from __future__ import annotations

import math

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import BufferRegion, DeviceAssert, LetStmt, Print, Var
from tilecraft.ir.visitor import walk, walk_expr

from .cexpr import ctype, zero
from .emit_copy import _coords
from .indexing import frag_coords, replica_index
from .regions import in_bounds, region_index, tile_dims, tile_shape

ROW_CHUNK = 8  # values per printed line of a memory tile (printf takes at most 32 arguments)


def c_string(text: str, printf: bool = False) -> str:
    """`text` as a C string literal (a printf format when `printf`: % doubled)."""
    if printf:
        text = text.replace("%", "%%")
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def value_format(dtype) -> str:
    """printf conversion of tc::dbg(x) for an IR dtype."""
    if dtype.is_float:
        return "%g"
    if dtype.name == "bool":
        return "%d"
    return "%llu" if dtype.name.startswith("uint") else "%lld"


def _prefix(em, thread: bool) -> tuple[str, list[str]]:
    """printf format and arguments of `[tilecraft block (..)` (+ ` thread %d`) `]`."""
    bvars = list(em.state.kernel.block_vars)
    inner = ", ".join("%d" for _ in bvars) + ("," if len(bvars) == 1 else "")
    fmt = f"[tilecraft block ({inner})" + (" thread %d" if thread else "") + "]"
    return fmt, [em.name(v) for v in bvars] + (["tid"] if thread else [])


def _printf(fmt: str, args: list[str]) -> str:
    return "printf(" + ", ".join(['"' + fmt + '\\n"', *args]) + ");"


def _fmt(text: str) -> str:
    """User text inside a printf format (without the quotes)."""
    return c_string(text, printf=True)[1:-1]


def emit_print(em, op: Print) -> None:
    what = op.value.buffer.name if isinstance(op.value, BufferRegion) else "a value"
    em.comment(op, f"T.print {what}")
    head = _fmt((f"{op.msg}: " if op.msg else "") + f"{op.value} =")
    if not isinstance(op.value, BufferRegion):
        return _print_scalar(em, op, head)
    shape = tile_shape(op.value)
    if not all(isinstance(n, int) for n in shape):
        raise TilecraftError("TC502", span=op.span, detail=f"T.print of `{op.value}`, a region "
                             "of dynamic shape", hint="print a tile of constant shape")
    if op.value.buffer.scope == "fragment":
        return _print_fragment(em, op.value, head)
    _print_memory(em, op.value, shape, head)


def _thread_dependent(em, expr) -> bool:
    """`expr` involves the thread index, directly or through `let` variables (T.get_thread_binding
    binds one). Values stored in T.alloc_var scalars are not followed."""
    lets = {s.var: s.value for s in walk(em.state.kernel.body) if isinstance(s, LetStmt)}
    seen, todo = set(), [expr]
    threads = set(em.state.kernel.thread_vars)
    while todo:
        for x in walk_expr(todo.pop()):
            if isinstance(x, Var) and x not in seen:
                if x in threads:
                    return True
                seen.add(x)
                if x in lets:
                    todo.append(lets[x])
    return False


def _print_scalar(em, op: Print, head: str) -> None:
    per_thread = _thread_dependent(em, op.value)
    pfmt, pargs = _prefix(em, per_thread)
    call = _printf(f"{pfmt} {head} {value_format(op.value.dtype)}",
                   [*pargs, f"tc::dbg({em.p(op.value)})"])
    em.w(call if per_thread else f"if (tid == 0) {call}")


def _label(tile_coords: list[str], last: tuple[str, str] | None = None) -> tuple[str, list[str]]:
    """`[%d, %d:%d]`-style coordinates of a printed line and their arguments."""
    parts = ["%d"] * len(tile_coords) + (["%d:%d"] if last else [])
    return "[" + ", ".join(parts) + "]", [*tile_coords, *(last or ())]


def _print_memory(em, r: BufferRegion, shape: tuple[int, ...], head: str) -> None:
    """Global, shared, local and var tiles: thread 0 prints all of it (its own local array)."""
    if r.buffer.scope in ("global", "shared"):
        em.sync()  # every thread's earlier stores are visible to thread 0
    pfmt, pargs = _prefix(em, False)
    lead, n = (shape[:-1], shape[-1]) if shape else ((), 1)
    rows = math.prod(lead)
    unroll = r.buffer.scope in ("local", "var")  # registers need constant indices
    em.open("if (tid == 0)")
    em.w(_printf(f"{pfmt} {head}", pargs))
    if unroll:
        em.w("#pragma unroll")
    em.open(f"for (int c = 0; c < {rows}; ++c)")
    row = _coords(lead, "c") if lead else []
    full, tail = divmod(n, ROW_CHUNK)
    if full:
        if unroll:
            em.w("#pragma unroll")
        em.open(f"for (int it = 0; it < {n - tail}; it += {ROW_CHUNK})")
        _print_values(em, r, shape, row, "it", ROW_CHUNK, pfmt, pargs)
        em.close()
    if tail:
        _print_values(em, r, shape, row, str(n - tail), tail, pfmt, pargs)
    em.close()
    em.close()


def _print_values(em, r, shape, row: list[str], col0: str, count: int, pfmt, pargs) -> None:
    values = []
    for j in range(count):
        col = col0 if j == 0 else f"{col0} + {j}"
        idx = region_index(em, r, row + [col] if shape else [])
        ref = em.ref(r.buffer, idx)
        g = in_bounds(em, r, idx)
        values.append(f"tc::dbg(({g}) ? {ref} : {zero(ctype(r.dtype))})" if g else f"tc::dbg({ref})")
    end = f"{col0} + {count}" if col0 != "0" else str(count)
    lfmt, largs = _label(row, (col0, end) if shape else None)
    fmt = f"{pfmt}   {lfmt} " + " ".join([value_format(r.dtype)] * count)
    em.w(_printf(fmt, [*pargs, *largs, *values]))


def _print_fragment(em, r: BufferRegion, head: str) -> None:
    b = r.buffer
    lay = em.state.layouts[b]
    pfmt, pargs = _prefix(em, False)
    em.w(f"if (tid == 0) {_printf(f'{pfmt} {head}', pargs)}")
    em.sync()  # the header comes first
    tfmt, targs = _prefix(em, True)
    rep = replica_index(lay, "tid")
    if rep:
        em.open(f"if ({rep} == 0)")  # one thread of each replica group
    em.w("#pragma unroll")
    em.open(f"for (int li = 0; li < {lay.local_size}; ++li)")
    coords = frag_coords(lay, "tid", "li")
    inside, tile = [], []
    dims = set(tile_dims(r))
    for d, (c, s, e, n) in enumerate(zip(coords, r.starts, r.extents, b.shape)):
        s = em.p(s)
        rel = c if s == "0" else f"({c}) - ({s})"
        if not (s == "0" and e == n):
            inside.append(f"({c}) >= {s} && ({c}) < {s} + {e}" if s != "0" else f"({c}) < {e}")
        if d in dims:
            tile.append(rel)
    lfmt, largs = _label(tile)
    call = _printf(f"{tfmt}   {lfmt} {value_format(b.dtype)}",
                   [*targs, *largs, f"tc::dbg({em.name_buf(b)}[li])"])
    em.w(f"if ({' && '.join(inside)}) {call}" if inside else call)
    em.close()
    if rep:
        em.close()


def emit_device_assert(em, op: DeviceAssert) -> None:
    em.comment(op, "T.device_assert")
    span = op.span
    file, line = (span.file, span.line) if span is not None else ("<unknown>", 0)
    what = op.msg or str(op.cond)
    pfmt, pargs = _prefix(em, True)
    em.open(f"if (!({em.p(op.cond)}))")
    em.w(_printf(f"{pfmt} device assertion failed: {_fmt(what)} at {_fmt(f'{file}:{line}')}",
                 pargs))
    em.w(f"__assertfail({c_string(what)}, {c_string(file)}, {line}, "
         f"{c_string(em.state.func.name)}, sizeof(char));")
    em.close()
