"""print_cuda: a block-instruction program (tilecraft/block) as one CUDA C++ kernel.

The printer takes no decision of its own: each instruction prints as the per-thread code its
layouts say (every thread loops over its `local_size` registers, `frag_coords` gives the logical
index of register `li` of thread `tid`). This first printer is the SIMT baseline the issue asks
for where no hardware atom applies: `dot` and `reduce` stage their operands through shared
memory (each thread then computes the outputs it holds), `copy_async` copies synchronously when
issued (a program the VM accepts never touches a pending copy's destination before the wait, so
it cannot tell the difference). Instruction selection by layout division (mma/ldmatrix/cp.async/
vector widths) will replace those bodies, recorded on the IR, not here.

Names: the printer owns every identifier. User tensors and variables print as `name_` (the
CUDA emitter's rule: a trailing underscore no printer-declared name has); `tid`, `li`, `k`,
`tc_smem`, `acc` are the printer's.

Not printed yet (TC502 at the instruction's line): `allocate_global`, `view_global`, `view`,
`print`, and scalar stores or loops other than serial/unrolled `for`, `if` and `let`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from tilecraft.block import (AllocateRegister, AllocateShared, BinaryOp, BlockProgram, Cast,
                             CopyAsync, CopyAsyncCommitGroup, CopyAsyncWaitGroup, Dot, Exit, Fill,
                             LoadGlobal, LoadShared, ReduceRegister, RegisterTensor, SharedTensor,
                             StoreGlobal, StoreShared, Synchronize, UnaryOp)
from tilecraft.block.compute import elementwise_expr
from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.ops.reduce import accumulator_dtype
from tilecraft.ir import BufferLoad, For, If, LetStmt, SeqStmt, Var
from tilecraft.ir.expr import const_int

from ..cuda.cexpr import ExprPrinter, ctype, zero
from ..cuda.indexing import frag_coords

_COMBINE = {"sum": "{a} + {b}", "abssum": "{a} + {b}", "max": "tc::maximum<{t}>({a}, {b})",
            "absmax": "tc::maximum<{t}>({a}, {b})", "min": "tc::minimum<{t}>({a}, {b})"}


class _C(str):
    """C text that the layout algebra can compute with (non-negative integer operands)."""

    def _op(self, o, fmt: str) -> _C:
        if isinstance(o, int) and not isinstance(o, bool):
            o = str(o)
        return _C(fmt.format(a=self, b=o))

    def __add__(self, o):
        return self if o == 0 else self._op(o, "({a} + {b})")

    __radd__ = __add__

    def __mul__(self, o):
        return self if o == 1 else _C("0") if o == 0 else self._op(o, "({a} * {b})")

    __rmul__ = __mul__

    def __floordiv__(self, o):
        return self if o == 1 else self._op(o, "({a} / {b})")

    def __mod__(self, o):
        return self._op(o, "({a} % {b})")

    def __xor__(self, o):
        return self._op(o, "({a} ^ {b})")

    def __rshift__(self, o):
        return self._op(o, "({a} >> {b})")

    def __and__(self, o):
        return self._op(o, "({a} & {b})")


class BlockPrinter:
    def __init__(self, program: BlockProgram, plans: dict | None = None):
        self.program = program
        self.plans = plans or {}  # id(instruction) -> its selection plan (block/select.py)
        self.lines: list[str] = []
        self.depth = 1
        self.names: dict[object, str] = {}
        self.smem = 0  # bytes of the arena given out (user tensors, then scratch)
        self.scratch = 0  # bytes of the largest dot/reduce staging area
        self.elem: dict[Var, str] = {}  # element placeholders -> C (inside per-register loops)
        self.exprs = ExprPrinter(self.var_name, self.load, {})

    # ---- names and expressions ----------------------------------------------------------------
    def name(self, key, user: str) -> str:
        n = self.names.get(key)
        if n is None:
            base, n, k = f"{user}_", f"{user}_", 1
            while n in self.names.values():
                n, k = f"{base}{k}_", k + 1
            self.names[key] = n
        return n

    def tensor(self, t) -> str:
        return self.name(t.buffer, t.buffer.name)

    def var_name(self, v: Var) -> str:
        return self.elem.get(v) or self.name(v, v.name)

    def load(self, e: BufferLoad) -> str:
        raise TilecraftError("TC502", detail="a scalar load of a tensor element in a block "
                             "program on the GPU", hint="load tiles with load_global/load_shared")

    def p(self, e) -> str:
        return self.exprs(e)

    def w(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def open(self, head: str) -> None:
        self.w(head + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.w("}")

    def refuse(self, s, what: str) -> TilecraftError:
        return TilecraftError("TC502", span=s.span, detail=f"{what} in a block program on the GPU",
                              hint="run it on the block VM (program.run) for now")

    # ---- statements ---------------------------------------------------------------------------
    def stmt(self, s) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For) and s.kind in ("serial", "unrolled", "pipelined"):
            v = self.var_name(s.var)
            start, end = self.p(s.start), self.p(s.start + s.extent)
            lo, n = const_int(s.start), const_int(s.extent)
            if lo is not None and n is not None and n > 0:
                self.exprs.ranges[s.var] = (lo, lo + n - 1)  # plain C arithmetic on indices
            self.open(f"for (int {v} = {start}; {v} < {end}; ++{v})")
            self.stmt(s.body)
            self.close()
        elif isinstance(s, If):
            self.open(f"if ({self.p(s.cond)})")
            self.stmt(s.then_body)
            self.close()
            if s.else_body is not None:
                self.open("else")
                self.stmt(s.else_body)
                self.close()
        elif isinstance(s, LetStmt):
            self.w(f"const {ctype(s.var.dtype)} {self.var_name(s.var)} = {self.p(s.value)};")
        else:
            handler = getattr(self, f"_{type(s).__name__}", None)
            if handler is None:
                raise self.refuse(s, f"`{type(s).__name__}`")
            handler(s)

    def per_register(self, t: RegisterTensor) -> None:
        self.w("#pragma unroll")
        self.open(f"for (int li = 0; li < {t.layout.local_size}; ++li)")

    def _AllocateRegister(self, s: AllocateRegister) -> None:
        t = s.out
        self.w(f"__align__(16) {ctype(t.dtype)} {self.tensor(t)}[{t.layout.local_size}];  "
               f"// {t.layout}")
        if s.init is not None:
            self.per_register(t)
            self.w(f"{self.tensor(t)}[li] = {self.cast(t.dtype, s.init)};")
            self.close()

    def _AllocateShared(self, s: AllocateShared) -> None:
        t = s.out
        self.smem = -(-self.smem // 128) * 128
        self.w(f"{ctype(t.dtype)}* {self.tensor(t)} = reinterpret_cast<{ctype(t.dtype)}*>"
               f"(tc_smem + {self.smem});  // {t.layout}")
        self.smem += t.layout.cosize * t.dtype.bits // 8

    def cast(self, dtype, e) -> str:
        return f"tc::cast<{ctype(dtype)}>({self.p(e)})"

    # ---- transfers ----------------------------------------------------------------------------
    def tile_index(self, s, coords: list[str]) -> list[str]:
        """Per dimension of the big tensor: offset + the tile's coordinate where covered."""
        idx = [self.p(o) for o in s.offset]
        for k, d in enumerate(s.dims):
            idx[d] = f"({idx[d]} + {coords[k]})"
        return idx

    def global_flat(self, t, idx: list[str]) -> tuple[str, str]:
        """(flat element index, in-bounds condition) of `idx` in global tensor `t`."""
        shape = [int(d) for d in t.buffer.shape]
        flat = idx[0]
        for i, n in zip(idx[1:], shape[1:]):
            flat = f"({flat}) * {n} + {i}"
        ok = " && ".join(f"{i} >= 0 && {i} < {n}" for i, n in zip(idx, shape))
        return flat, ok

    def shared_offset(self, s, t: SharedTensor, idx: list[str]) -> str:
        """The layout's own offset function, evaluated on C text (indices are non-negative)."""
        return str(t.layout.offset(*(_C(f"({i})") for i in idx)))

    def _LoadGlobal(self, s: LoadGlobal) -> None:
        out = s.out
        self.per_register(out)
        flat, ok = self.global_flat(s.src, self.tile_index(s, frag_coords(out.layout, "tid", "li")))
        self.w(f"{self.tensor(out)}[li] = ({ok}) ? {self.tensor(s.src)}[{flat}] : "
               f"{zero(ctype(out.dtype))};")
        self.close()

    def _StoreGlobal(self, s: StoreGlobal) -> None:
        src = s.src
        self.per_register(src)
        flat, ok = self.global_flat(s.dst, self.tile_index(s, frag_coords(src.layout, "tid", "li")))
        self.w(f"if ({ok}) {self.tensor(s.dst)}[{flat}] = {self.tensor(src)}[li];")
        self.close()

    def _LoadShared(self, s: LoadShared) -> None:
        out = s.out
        self.per_register(out)
        off = self.shared_offset(s, s.src, self.tile_index(s, frag_coords(out.layout, "tid", "li")))
        self.w(f"{self.tensor(out)}[li] = {self.tensor(s.src)}[{off}];")
        self.close()

    def _StoreShared(self, s: StoreShared) -> None:
        src = s.src
        self.per_register(src)
        off = self.shared_offset(s, s.dst, self.tile_index(s, frag_coords(src.layout, "tid", "li")))
        self.w(f"{self.tensor(s.dst)}[{off}] = {self.tensor(src)}[li];")
        self.close()

    def _CopyAsync(self, s: CopyAsync) -> None:
        plan = self.plans.get(id(s))
        if plan is not None:
            return self.cp_async(s, plan)
        dst = s.dst
        shape = [int(d) for d in dst.shape]
        n, nt = math.prod(shape), self.program.num_threads
        self.w(f"// copy_async {s.src.buffer.name} -> {dst.buffer.name}: copied when issued")
        self.open(f"for (int e = tid; e < {n}; e += {nt})")
        coords = [f"(e / {math.prod(shape[k + 1:])}) % {shape[k]}" for k in range(len(shape))]
        flat, ok = self.global_flat(s.src, self.tile_index(s, coords))
        off = self.shared_offset(s, dst, coords)
        self.w(f"{self.tensor(dst)}[{off}] = ({ok}) ? {self.tensor(s.src)}[{flat}] : "
               f"{zero(ctype(dst.dtype))};")
        self.close()

    def cp_async(self, s: CopyAsync, plan) -> None:
        """The plan's 16-byte cp.async chunks, spread over the threads (block/select.py)."""
        dst, c = s.dst, plan.chunk
        shape = [int(d) for d in dst.shape]
        per_row = shape[-1] // c
        n, nt = math.prod(shape) // c, self.program.num_threads
        self.w(f"// copy_async {s.src.buffer.name} -> {dst.buffer.name}: cp.async, {n} chunks "
               f"of 16 bytes")
        self.open(f"for (int e = tid; e < {n}; e += {nt})")
        coords = [f"(e / {per_row * math.prod(shape[k + 1:-1])}) % {shape[k]}"
                  for k in range(len(shape) - 1)] + [f"(e % {per_row}) * {c}"]
        flat, ok = self.global_flat(s.src, self.tile_index(s, coords))
        off = self.shared_offset(s, dst, coords)
        src = self.tensor(s.src)
        self.w(f"const bool ok = {ok};")
        self.w(f"tc::cp_async_16(&{self.tensor(dst)}[{off}], ok ? (const void*)&{src}[{flat}] "
               f": (const void*){src}, ok);")
        self.close()
        self.async_copies = True

    def _CopyAsyncCommitGroup(self, s: CopyAsyncCommitGroup) -> None:
        self.w("tc::cp_async_commit();")

    def _CopyAsyncWaitGroup(self, s: CopyAsyncWaitGroup) -> None:
        self.w(f"tc::cp_async_wait<{s.n}>();")

    def _Synchronize(self, s: Synchronize) -> None:
        self.w("__syncthreads();")

    def _Exit(self, s: Exit) -> None:
        self.w("return;")

    # ---- compute ------------------------------------------------------------------------------
    def elementwise(self, op: str, operands, out: RegisterTensor, s=None) -> None:
        args = []
        for o in operands:
            if isinstance(o, RegisterTensor):
                v = Var.create(f"e{len(args)}", o.dtype)
                self.elem[v] = f"{self.tensor(o)}[{self.broadcast_slot(s, o, out)}]"
                args.append(v)
            else:
                args.append(o)
        self.per_register(out)
        self.w(f"{self.tensor(out)}[li] = {self.p(elementwise_expr(op, tuple(args)))};")
        self.close()

    def broadcast_slot(self, s, o: RegisterTensor, out: RegisterTensor) -> str:
        """`li`, or for an operand broadcast to out's shape the register of it that element li
        of out reads (the same on every thread: a constant table the unrolled loop folds)."""
        if tuple(o.shape) == tuple(out.shape):
            return "li"
        from tilecraft.block.broadcast import broadcast_slots

        slots = broadcast_slots(out.layout, o.layout)
        if not (slots == slots[0]).all():
            raise self.refuse(s, f"a broadcast of `{o.buffer.name}` whose registers differ "
                                 "between threads")
        name = f"bslot{len(self.lines)}"
        self.w(f"const int {name}[{len(slots[0])}] = {{{', '.join(map(str, slots[0]))}}};")
        return f"{name}[li]"

    def _BinaryOp(self, s: BinaryOp) -> None:
        self.elementwise(s.op, (s.a, s.b), s.out, s)

    def _UnaryOp(self, s: UnaryOp) -> None:
        self.elementwise(s.op, (s.src,), s.out)

    def _Cast(self, s: Cast) -> None:
        self.per_register(s.out)
        self.w(f"{self.tensor(s.out)}[li] = tc::cast<{ctype(s.out.dtype)}>({self.tensor(s.src)}[li]);")
        self.close()

    def _Fill(self, s: Fill) -> None:
        self.per_register(s.out)
        self.w(f"{self.tensor(s.out)}[li] = {self.cast(s.out.dtype, s.value)};")
        self.close()

    def stage(self, tensors: list[RegisterTensor]) -> list[str]:
        """Write register tensors row-major into the scratch area (after a barrier); returns
        their pointers. Replicas write the same values."""
        self.w("__syncthreads();  // the scratch area may still be read")
        ptrs, off = [], 0
        for t in tensors:
            p = f"stage{len(ptrs)}"
            shape = [int(d) for d in t.shape]
            self.w(f"{ctype(t.dtype)}* {p} = reinterpret_cast<{ctype(t.dtype)}*>(tc_smem + "
                   f"SCRATCH + {off});")
            self.per_register(t)
            c = frag_coords(t.layout, "tid", "li")
            flat = c[0]
            for i, n in zip(c[1:], shape[1:]):
                flat = f"({flat}) * {n} + {i}"
            self.w(f"{p}[{flat}] = {self.tensor(t)}[li];")
            self.close()
            off += -(-math.prod(shape) * t.dtype.bits // 8 // 16) * 16
            ptrs.append(p)
        self.scratch = max(self.scratch, off)
        self.w("__syncthreads();")
        return ptrs

    def _Dot(self, s: Dot) -> None:
        plan = self.plans.get(id(s))
        if plan is not None:
            return self.mma(s, plan)
        (m, k), n = (int(x) for x in s.a.shape), int(s.b.shape[1])
        self.open("")
        a, b = self.stage([s.a, s.b])
        self.per_register(s.out)
        i, j = frag_coords(s.out.layout, "tid", "li")
        t = ctype(s.c.dtype)
        self.w(f"{t} acc = {self.tensor(s.c)}[li];")
        self.w(f"for (int k = 0; k < {k}; ++k) acc += tc::cast<{t}>({a}[({i}) * {k} + k]) * "
               f"tc::cast<{t}>({b}[k * {n} + {j}]);")
        self.w(f"{self.tensor(s.out)}[li] = acc;")
        self.close()
        self.close()
        del m

    def mma(self, s: Dot, plan) -> None:
        """The plan's mma.sync steps on the operands' register blocks (block/select.py)."""
        atom = plan.atom
        na, nb, nc = atom.a.local_size, atom.b.local_size, atom.c.local_size
        a, b, c, out = (self.tensor(t) for t in (s.a, s.b, s.c, s.out))
        self.w(f"// dot {s.a.buffer.name} @ {s.b.buffer.name}: {len(plan.steps)} x "
               f"{atom.name} (layout division)")
        if out != c:
            self.per_register(s.out)
            self.w(f"{out}[li] = {c}[li];")
            self.close()
        for lc, la, lb in plan.steps:
            self.w(f"{plan.func}(&{out}[{lc * nc}], reinterpret_cast<const tc::u32*>(&{a}"
                   f"[{la * na}]), reinterpret_cast<const tc::u32*>(&{b}[{lb * nb}]), "
                   f"&{out}[{lc * nc}]);")

    def _ReduceRegister(self, s: ReduceRegister) -> None:
        acc = accumulator_dtype(s.src.dtype, s.out.dtype)
        t = ctype(acc)
        shape = [int(d) for d in s.src.shape]
        self.open("")
        (src,) = self.stage([s.src])
        self.per_register(s.out)
        kept = frag_coords(s.out.layout, "tid", "li")
        if len(kept) == len(shape):  # keepdim: the reduced dimension has extent 1
            kept = [c for d, c in enumerate(kept) if d != s.dim]
        idx = list(kept)
        idx.insert(s.dim, "r")
        flat = idx[0]
        for x, n in zip(idx[1:], shape[1:]):
            flat = f"({flat}) * {n} + {x}"
        x = f"tc::cast<{t}>({src}[{flat}])"
        if s.kind in ("abssum", "absmax"):
            x = f"({x} < {zero(t)} ? -{x} : {x})"
        comb = _COMBINE[s.kind]
        ident = {"max": f"tc::lowest<{t}>()", "absmax": f"tc::lowest<{t}>()",
                 "min": f"tc::highest<{t}>()"}.get(s.kind, zero(t))
        # as the CUDA emitter and the interpreter: fold the row, then combine with the old value
        self.w(f"{t} acc = {ident};")
        self.w(f"for (int r = 0; r < {shape[s.dim]}; ++r) acc = {comb.format(a='acc', b=x, t=t)};")
        if not s.clear:
            old = f"tc::cast<{t}>({self.tensor(s.out)}[li])"
            self.w(f"acc = {comb.format(a=old, b='acc', t=t)};")
        self.w(f"{self.tensor(s.out)}[li] = tc::cast<{ctype(s.out.dtype)}>(acc);")
        self.close()
        self.close()


class PrintedKernel(NamedTuple):
    source: str
    name: str
    smem: int  # bytes of dynamic shared memory
    align: dict  # tensor name -> bytes its data pointer must be a multiple of


def print_cuda(program: BlockProgram) -> PrintedKernel:
    """The CUDA source, entry name, dynamic shared memory and pointer alignments of `program`
    (verified first; instructions selected by block/select.py)."""
    from tilecraft.block.select import CopyAsyncPlan, select_instructions

    from ..cuda.build import include_lines

    program.verify()
    plans = select_instructions(program)
    pr = BlockPrinter(program, plans)
    pr.w("extern __shared__ __align__(1024) unsigned char tc_smem[];")
    pr.w("const int tid = threadIdx.x;")
    for v, axis, g in zip(program.block_vars, "xyz", program.grid):
        pr.w(f"const int {pr.var_name(v)} = blockIdx.{axis};")
        if const_int(g) is not None:
            pr.exprs.ranges[v] = (0, const_int(g) - 1)
    pr.stmt(program.body)
    user = -(-pr.smem // 128) * 128
    body = "\n".join(pr.lines).replace("SCRATCH", str(user))
    sig = []
    for p in program.params:
        if isinstance(p, Var):
            sig.append(f"const {ctype(p.dtype)} {pr.var_name(p)}")
        else:
            sig.append(f"{ctype(p.dtype)}* __restrict__ {pr.tensor(p)}")
    name = f"{program.name}_kernel"
    code = (f'extern "C" __global__ void __launch_bounds__({program.num_threads}, 1)\n'
            f"{name}({', '.join(sig)}) {{\n{body}\n}}\n")
    source = (f"// Generated by tilecraft from the block program `{program.name}`.\n"
              f"{include_lines(code)}\n\n{code}")
    align = {p.tensor: 16 for p in plans.values() if isinstance(p, CopyAsyncPlan)}
    return PrintedKernel(source, name, user + pr.scratch, align)
