"""`print`, and the Tile IR's T.print of a scalar, T.device_assert and T.annotate_layout kept in
a block program, as CUDA: the interpreter's lines (`[tilecraft block (bx, by)] msg: x =`,
interp/ops/misc.py). A mixin of
`BlockPrinter` (printer.py).

    T.print(s, "s")           ->  if (tid == 0) printf("[tilecraft block (%d,)] s: s = %g\\n", ..);
    print(S_shared)           ->  __syncthreads(); thread 0 prints the header, then one line per
                                  8 values: `[tilecraft block (0,)]   [3, 8:16] v ..`
    print(tile, gather=True)  ->  (a memory region's T.print) the register tile staged row-major
                                  through the scratch area, then printed as a shared tile
    print(acc)                ->  thread 0 prints the header, a barrier, then each thread (one per
                                  replica group) its registers: `[.. thread 5]   [2, 7] v`
    T.device_assert(c, m)     ->  if (!(c)) { printf(block, thread, m, file:line);
                                              __assertfail(m, file, line, kernel, 1); }

Tile coordinates are indices into the printed tile (the region's size-1 dimensions dropped).
A scalar whose value involves a thread index (a variable no statement of the program binds)
prints from every thread, with `thread %d`. A print of a tensor holds barriers: under a
thread-dependent `if` it deadlocks, as on the CUDA emitter's path.
"""

from __future__ import annotations

import math

from tilecraft.block import Print, RegisterTensor, SharedTensor
from tilecraft.ir import BufferRegion, DeviceAssert

from ..cuda.indexing import frag_coords, replica_index
from .text import ROW_CHUNK, c_string, value_format


def _printf(fmt: str, args: list[str]) -> str:
    return "printf(" + ", ".join(['"' + fmt + '\\n"', *args]) + ");"


def _fmt(text: str) -> str:
    """User text inside a printf format (without the quotes)."""
    return c_string(text, printf=True)[1:-1]


class DebugPrinter:
    def prefix(self, thread: bool) -> tuple[str, list[str]]:
        """printf format and arguments of `[tilecraft block (..)` (+ ` thread %d`) `]`."""
        bvars = self.program.block_vars
        inner = ", ".join("%d" for _ in bvars) + ("," if len(bvars) == 1 else "")
        fmt = f"[tilecraft block ({inner})" + (" thread %d" if thread else "") + "]"
        return fmt, [self.var_name(v) for v in bvars] + (["tid"] if thread else [])

    def _Print(self, s) -> None:
        if not isinstance(s, Print):  # the Tile IR's T.print, kept for a scalar
            return self.print_scalar(s)
        t = s.tensor
        label = s.label or t.name
        if not all(isinstance(d, int) for d in t.shape):
            raise self.refuse(s, f"a print of `{label}`, of dynamic shape")
        self.w(f"// print {label}")
        head = _fmt((f"{s.msg}: " if s.msg else "") + f"{label} =")
        if isinstance(t, RegisterTensor) and not s.gather:
            return self.print_registers(t, head)
        self.open("")
        if isinstance(t, RegisterTensor):
            (ptr,) = self.stage([t])  # row-major in the scratch area (barriers around)
        else:
            self.w(f"{self.bar_sync}  // every thread's earlier stores are visible to thread 0")
            ptr = self.tensor(t)
        self.print_rows(t, ptr, head)
        self.close()

    def print_rows(self, t, ptr: str, head: str) -> None:
        """Thread 0 prints the header, then each row of `t` in lines of ROW_CHUNK values."""
        shape = [int(d) for d in t.shape]
        pfmt, pargs = self.prefix(False)
        lead, n = shape[:-1], shape[-1]
        self.open("if (tid == 0)")
        self.w(_printf(f"{pfmt} {head}", pargs))
        self.open(f"for (int c = 0; c < {math.prod(lead)}; ++c)")
        row = [_digit("c", math.prod(lead[k + 1:]), d, k == 0) for k, d in enumerate(lead)]
        full, tail = divmod(n, ROW_CHUNK)
        if full:
            self.open(f"for (int it = 0; it < {n - tail}; it += {ROW_CHUNK})")
            self.print_values(t, ptr, row, "it", ROW_CHUNK, pfmt, pargs)
            self.close()
        if tail:
            self.print_values(t, ptr, row, str(n - tail), tail, pfmt, pargs)
        self.close()
        self.close()

    def print_values(self, t, ptr: str, row: list[str], col0: str, count: int, pfmt: str,
                     pargs: list[str]) -> None:
        shape = [int(d) for d in t.shape]
        values = []
        for j in range(count):
            idx = row + [col0 if j == 0 else f"{col0} + {j}"]
            if isinstance(t, SharedTensor):
                off = self.shared_offset(None, t, idx)
            elif isinstance(t, RegisterTensor):  # staged row-major
                off = idx[0]
                for i, n in zip(idx[1:], shape[1:]):
                    off = f"({off}) * {n} + {i}"
            else:  # a whole global tensor
                off, _ = self.global_flat(t, idx)
            values.append(f"tc::dbg({ptr}[{off}])")
        end = f"{col0} + {count}" if col0 != "0" else str(count)
        lfmt = "[" + ", ".join(["%d"] * len(row) + ["%d:%d"]) + "]"
        fmt = f"{pfmt}   {lfmt} " + " ".join([value_format(t.dtype)] * count)
        self.w(_printf(fmt, [*pargs, *row, col0, end, *values]))

    def print_registers(self, t: RegisterTensor, head: str) -> None:
        """Thread 0 prints the header; after a barrier, one thread of each replica group
        prints each register it holds with its tile coordinates (the hardware's order)."""
        pfmt, pargs = self.prefix(False)
        self.w(f"if (tid == 0) {_printf(f'{pfmt} {head}', pargs)}")
        self.w(f"{self.bar_sync}  // the header comes first")
        tfmt, targs = self.prefix(True)
        rep = replica_index(t.layout, "tid")
        if rep:
            self.open(f"if (({rep}) == 0)")  # one thread of each replica group
        self.per_register(t)
        coords = frag_coords(t.layout, "tid", "li")
        lfmt = "[" + ", ".join(["%d"] * len(coords)) + "]"
        self.w(_printf(f"{tfmt}   {lfmt} {value_format(t.dtype)}",
                       [*targs, *coords, f"tc::dbg({self.tensor(t)}[li])"]))
        self.close()
        if rep:
            self.close()

    def print_scalar(self, s) -> None:
        head = _fmt((f"{s.msg}: " if s.msg else "") + f"{s.value} =")
        if isinstance(s.value, BufferRegion):
            return self.print_local(s.value, head)
        per_thread = self.per_thread(s)
        pfmt, pargs = self.prefix(per_thread)
        call = _printf(f"{pfmt} {head} {value_format(s.value.dtype)}",
                       [*pargs, f"tc::dbg({self.p(s.value)})"])
        self.w(f"// T.print {s.value}")
        self.w(call if per_thread else f"if (tid == 0) {call}")

    def print_local(self, r: BufferRegion, head: str) -> None:
        """A local array's region (lowering keeps its T.print): thread 0 prints its own copy,
        as a memory tile (constant indices keep the array in registers)."""
        if r.buffer.scope not in ("local", "var"):  # (lowering turns other tiles into `print`)
            raise self.refuse(self.current, f"T.print of the {r.buffer.scope} tile `{r}`")
        if not all(isinstance(e, int) for e in r.extents):
            raise self.refuse(self.current, f"T.print of `{r}`, a region of dynamic shape")
        self.w(f"// T.print {r.buffer.name}")
        shape = [e for e in r.extents if e != 1]
        lead, n = shape[:-1], shape[-1] if shape else 1
        pfmt, pargs = self.prefix(False)
        fmt = value_format(r.dtype)
        self.open("if (tid == 0)")
        self.w(_printf(f"{pfmt} {head}", pargs))
        for c in range(math.prod(lead)):
            row = [c // math.prod(lead[k + 1:]) % d for k, d in enumerate(lead)]
            for col in range(0, n, ROW_CHUNK):
                count = min(ROW_CHUNK, n - col)
                values = [f"tc::dbg({self.p(_local_element(r, row + [col + j]))})"
                          for j in range(count)]
                last = [f"{col}:{col + count}"] if shape else []
                lfmt = "[" + ", ".join([*map(str, row), *last]) + "]"
                self.w(_printf(f"{pfmt}   {lfmt} " + " ".join([fmt] * count), pargs + values))
        self.close()

    def per_thread(self, s) -> bool:
        """Statement `s` runs on values that differ between threads (a thread index, a
        per-thread local: block/threads.py) or under control flow on them."""
        return self.threads.per_thread(s)

    def _DeviceAssert(self, s: DeviceAssert) -> None:
        span = s.span
        file, line = (span.file, span.line) if span is not None else ("<unknown>", 0)
        what = s.msg or str(s.cond)
        pfmt, pargs = self.prefix(True)
        self.w("// T.device_assert")
        self.open(f"if (!({self.p(s.cond)}))")
        self.w(_printf(f"{pfmt} device assertion failed: {_fmt(what)} at "
                       f"{_fmt(f'{file}:{line}')}", pargs))
        self.w(f"__assertfail({c_string(what)}, {c_string(file)}, {line}, "
               f"{c_string(self.program.name)}, sizeof(char));")
        self.close()

    def _AnnotateLayout(self, s) -> None:
        self.w("// T.annotate_layout: the layouts above")



def _local_element(r: BufferRegion, tile: list[int]):
    """The element of region `r` at coordinates `tile` of the printed (squeezed) tile; 0
    outside the buffer (the interpreter's tile read)."""
    from tilecraft.ir import BufferLoad
    from tilecraft.ir.expr import BinOp, Compare, Select, cast, const_int

    it, idx, conds = iter(tile), [], []
    for start, e, size in zip(r.starts, r.extents, r.buffer.shape):
        i = start + next(it) if e != 1 else start
        k = const_int(i)
        idx.append(i)
        if k is None or not isinstance(size, int) or not 0 <= k < size:
            conds += [Compare.create(">=", i, 0), Compare.create("<", i, size)]
    load = BufferLoad.create(r.buffer, tuple(idx))
    if not conds:
        return load
    ok = conds[0]
    for c in conds[1:]:
        ok = BinOp.create("and", ok, c)
    return Select.create(ok, load, cast(r.buffer.dtype, 0))


def _digit(flat: str, stride: int, n: int, first: bool) -> str:
    """C text of the digit of `flat` of size n at `stride` (no `% n` on the leading one)."""
    x = flat if stride == 1 else f"{flat} / {stride}"
    return x if first else f"({x}) % {n}"
