"""print_cuda: a block-instruction program (tilecraft/block) as one CUDA C++ kernel.

The printer takes no decision of its own: each instruction prints as the per-thread code its
layouts say (every thread loops over its `local_size` registers, `frag_coords` gives the logical
index of register `li` of thread `tid`), or as the plan instruction selection chose for it
(block/select.py: mma.sync for `dot`, cp.async for `copy_async`). Without a plan, the SIMT
forms: `dot` and `reduce` stage their operands through shared memory (each thread then computes
the outputs it holds), `copy_async` copies when issued (a program the VM accepts never touches
a pending copy's destination before the wait, so it cannot tell the difference).

Control flow and allocation are here; the kernel's scalar code (stores once per block, while,
break, local arrays and vars, 64-bit lets) in scalar.py; transfers in transfer.py, computation
in compute.py.

Names: the printer owns every identifier. User tensors and variables print as `name_` (the
CUDA emitter's rule: a trailing underscore no printer-declared name has); `tid`, `li`, `k`,
`tc_smem`, `acc` are the printer's.

Packed types (sub-byte ints, custom floats; subbyte.py): parameters and shared tensors are
`unsigned char*`, register tensors `tc::u32` words; the instructions in PACKED_OK take them, any
other instruction on such a tensor is a TC502 at its line.

Not printed yet (TC502 at the instruction's line): `allocate_global`, `print` of packed
tensors. Thread indices (T.get_thread_binding) are digits of `tid` (program.thread_vars).
"""

from __future__ import annotations

from typing import NamedTuple

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BlockProgram,
    ParallelCompute,
    RegisterTensor,
)
from tilecraft.block.roles import WarpRoles, launch_threads
from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import Break, BufferLoad, Call, For, If, LetStmt, SeqStmt, UseSwizzle, Var
from tilecraft.ir.expr import const_int
from tilecraft.ir.ranges import bound
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from ..cuda.cexpr import ExprPrinter, ctype, is_packed, storage_ctype
from .cast import CastPrinter
from .compute import ComputePrinter
from .debug import DebugPrinter
from .parallel import ParallelPrinter
from .scalar import ScalarPrinter
from .scan import ScanPrinter
from .subbyte import SubbytePrinter, words
from .tma import TmaPrinter
from .transfer import TransferPrinter
from .wgmma import WgmmaPrinter

#: the instructions printed for tensors of packed types (the others refuse them: TC502)
PACKED_OK = frozenset({"AllocateRegister", "AllocateShared", "ViewGlobal", "LoadGlobal",
                       "LoadShared", "StoreGlobal", "StoreShared", "CopyAsync", "SharedSlice",
                       "Cast", "CastPlanes", "CastBytes", "View", "Fill", "BinaryOp", "Fma",
                       "UnaryOp", "ParallelCompute"})


class BlockPrinter(CastPrinter, WgmmaPrinter, TmaPrinter, TransferPrinter, ComputePrinter,
                   ParallelPrinter, ScanPrinter, DebugPrinter, ScalarPrinter, SubbytePrinter):
    def __init__(self, program: BlockProgram, plans: dict | None = None):
        self.program = program
        self.plans = plans or {}  # id(instruction) -> its selection plan (block/select.py)
        self.par = None  # the parallel instruction being printed (parallel.py)
        self.helpers: dict[str, str] = {}  # device functions printed before the kernel (wgmma)
        self.tensor_maps: dict[str, tuple] = {}  # TMA map parameters (tma.py)
        self.current = None  # the statement being printed
        self.lines: list[str] = []
        self.depth = 1
        self.bar_sync = "__syncthreads();"  # a synchronize: inside a role, its named barrier
        self.role = None  # inside warp_roles: "producer" or "consumer"
        self.names: dict[object, str] = {}
        self.smem_plan = None  # the shared tensors' offsets (block/smem_plan.py)
        self.scratch = 0  # bytes of the largest staging in the first scratch area
        self.scratch_b = 0  # in the second (used where the first may still be read)
        # the two scratch areas after the arena: may a thread read it (compute.py `stage`)
        self.scratch_read = {"SCRATCH": False, "SCRATCH_B": False}
        self.elem: dict[Var, str] = {}  # element placeholders -> C (inside per-register loops)
        self.written_by_one: set = set()  # global buffers thread 0 alone updates: no __restrict__
        self.exprs = ExprPrinter(self.var_name, self.load, {})
        self.scalar_setup()  # per-thread values, 64-bit lets (scalar.py)

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
        if e.buffer.scope in ("local", "var"):  # each thread's own copy (scalar.py)
            return self.scalar_ref(self.current, e.buffer, e.indices)
        if self.par is not None:
            return self.par_load(e)
        # block-level scalar code: every thread reads the element (scalar.py)
        return self.scalar_get(self.current, e.buffer, e.indices)

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
        if not isinstance(s, SeqStmt):
            self.current = s  # the statement a refusal points at
        span = getattr(s, "span", None)
        if span is None:
            return self.stmt_here(s)
        with at_span(span):  # (errors of the expression printer point at the statement)
            self.stmt_here(s)

    def stmt_here(self, s) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, For) and s.kind in ("serial", "unrolled", "pipelined", "vectorized"):
            v = self.var_name(s.var)
            start, end = self.p(s.start), self.p(s.start + s.extent)
            lo, n = bound(s.start, self.exprs.ranges), bound(s.extent, self.exprs.ranges)
            if lo is not None and n is not None and n[1] > 0:  # plain C arithmetic on indices
                self.exprs.ranges[s.var] = (lo[0], lo[1] + n[1] - 1)
            if any(getattr(x, "asynchronous", False) for x in walk(s.body)):
                # ptxas (NVRTC 13.0, 13.5) was seen to hoist accumulator reads of the code after
                # an unrolled wgmma mainloop above its final wait
                self.w("#pragma unroll 1")
            elif s.kind == "unrolled":
                self.w("#pragma unroll")
            elif s.pipeline is not None and s.pipeline.unroll > 1:  # (T.Pipelined(unroll=))
                self.w(f"#pragma unroll {s.pipeline.unroll}")
            if reads_memory(s.start + s.extent):  # (evaluated once, as the interpreter does)
                self.w(f"const int {v}end = {end};")
                end = f"{v}end"
            self.open(f"for (int {v} = {start}; {v} < {end}; ++{v})")
            self.loop_body(s.body, runs=n is not None and n[0] > 0)
            self.close()
        elif isinstance(s, WarpRoles):
            self.warp_roles(s)
            self.scratch_dirty()
        elif isinstance(s, If):
            self.open(f"if ({self.p(s.cond)})")
            saved, before = dict(self.exprs.ranges), dict(self.scratch_read)
            self.exprs.ranges.update(refined(s.cond, self.exprs.ranges))
            self.stmt(s.then_body)
            self.exprs.ranges.clear()
            self.exprs.ranges.update(saved)
            self.close()
            after, self.scratch_read = self.scratch_read, before
            if s.else_body is not None:
                self.open("else")
                self.stmt(s.else_body)
                self.close()
            for k, v in after.items():  # (read on either path)
                self.scratch_read[k] |= v
        elif isinstance(s, LetStmt):
            self.let(s)  # (scalar.py: 64-bit where it feeds a 64-bit index)
        elif type(self.plans.get(id(s))).__name__ == "Fused":
            where = self.plans[id(s)].where
            self.w(f"// {type(s).__name__} of `{s.out.buffer.name}`: inside {where}")
        else:
            handler = getattr(self, f"_{type(s).__name__}", None)
            if handler is None:
                raise self.refuse(s, f"`{type(s).__name__}`")
            self.refuse_packed(s)
            self.origin(s)
            handler(s)

    def loop_body(self, body, runs: bool = False) -> None:
        """A loop's body: its first iteration follows what came before, the others its own end
        (unknown here: the scratch areas count as read at its start). After it: its end, and
        also what came before unless it surely `runs` at least once; read anywhere when a
        `break` may leave it."""
        before = dict(self.scratch_read)
        self.scratch_dirty()
        self.stmt(body)
        if any(isinstance(x, Break) for x in walk(body)):
            self.scratch_dirty()
        elif not runs:
            for k, v in before.items():
                self.scratch_read[k] |= v

    def scratch_dirty(self) -> None:
        self.scratch_read = dict.fromkeys(self.scratch_read, True)

    def scratch_clean(self) -> None:
        """After a barrier of the whole block."""
        self.scratch_read = dict.fromkeys(self.scratch_read, False)

    def warp_roles(self, s: WarpRoles) -> None:
        """The producer warpgroups after the consumer's threads, with their own `tid`; each role
        sets its register count and synchronizes on its own named barrier (block/roles.py)."""
        n, p = self.program.num_threads, s.producer_threads
        self.w(f"// {s.script_head()}")
        self.open(f"if (threadIdx.x >= {n})")
        self.w(f"tc::setmaxnreg_dec<{s.producer_regs}>();  // the producer's {p} threads")
        self.w(f"const int tid = threadIdx.x - {n};  // (numbered from 0 in the role)")
        self.role_body(s.producer, f"tc::named_barrier_sync(2, {p});", "producer")
        self.close()
        self.open("else")
        self.w(f"tc::setmaxnreg_inc<{s.consumer_regs}>();  // the consumer's {n} threads")
        self.role_body(s.consumer, f"tc::named_barrier_sync(1, {n});", "consumer")
        self.close()

    def role_body(self, body, bar_sync: str, role: str) -> None:
        saved, self.bar_sync, self.role = self.bar_sync, bar_sync, role
        try:
            self.stmt(body)
        finally:
            self.bar_sync, self.role = saved, None

    def refuse_packed(self, s) -> None:
        """TC502 at `s` when it is an instruction PACKED_OK lacks touching a packed tensor."""
        from tilecraft.block import Instruction

        if not isinstance(s, Instruction) or type(s).__name__ in PACKED_OK:
            return
        for t in (*s.reads(), *s.writes()):
            if hasattr(t, "dtype") and is_packed(t.dtype):
                raise self.refuse(s, f"`{getattr(s, 'NAME', '') or type(s).__name__}` of the "
                                  f"{t.dtype} tensor `{t.name}`")

    def origin(self, s) -> None:
        """A comment naming the instruction and the user's line it comes from."""
        from tilecraft.block import AllocateRegister, Instruction, instruction_str

        if not isinstance(s, Instruction) or isinstance(s, AllocateRegister):
            return
        line = getattr(s.span, "line", None)
        text = instruction_str(s).splitlines()[0]
        self.w(f"// {text}" + (f"  (line {line})" if line else ""))

    def per_register(self, t: RegisterTensor) -> None:
        self.w("#pragma unroll")
        self.open(f"for (int li = 0; li < {t.layout.local_size}; ++li)")

    def _AllocateRegister(self, s: AllocateRegister) -> None:
        t = s.out
        n = t.layout.local_size
        if is_packed(t.dtype):  # the thread's bit string in words (zeroed: no undefined bits)
            self.w(f"__align__(16) tc::u32 {self.tensor(t)}[{words(n, t.dtype.bits)}] = {{}};  "
                   f"// {n} x {t.dtype}: {t.layout}")
        else:
            self.w(f"__align__(16) {ctype(t.dtype)} {self.tensor(t)}[{n}];  // {t.layout}")
        if s.init is not None:
            self.per_register(t)
            self.w(self.reg_set(t, "li", self.cast(t.dtype, s.init)))
            self.close()

    def _UseSwizzle(self, s) -> None:
        self.w("// T.use_swizzle: the block indices above")

    def _AllocateShared(self, s: AllocateShared) -> None:
        t = s.out
        offset = self.smem_plan.offsets[t.buffer]  # (block/smem_plan.py)
        c = storage_ctype(t.dtype)
        if c == "unsigned char":
            self.w(f"unsigned char* {self.tensor(t)} = tc_smem + {offset};  // "
                   f"{t.dtype} {t.layout}")
            return
        self.w(f"{c}* {self.tensor(t)} = reinterpret_cast<{c}*>(tc_smem + {offset});  // "
               f"{t.layout}")

    def viewed(self, p) -> bool:
        """Global tensor `p` is also accessed through a view_global (so not __restrict__)."""
        from tilecraft.block import ViewGlobal

        return any(isinstance(x, ViewGlobal) and x.src.buffer == p.buffer
                   for x in walk(self.program.body))

    def _ViewGlobal(self, s) -> None:
        """The same bytes under another name and type (the verifier checked the bit counts)."""
        c = storage_ctype(s.out.dtype)
        self.w(f"{c}* const {self.tensor(s.out)} = reinterpret_cast<{c}*>"
               f"({self.tensor(s.src)});  // {s.out.dtype}{list(s.out.shape)}")

    def cast(self, dtype, e) -> str:
        return f"tc::cast<{ctype(dtype)}>({self.p(e)})"


class PrintedKernel(NamedTuple):
    source: str
    name: str
    smem: int  # bytes of dynamic shared memory
    align: dict  # tensor name -> bytes its data pointer must be a multiple of
    dims: tuple = ()  # the dynamic dimensions (Vars), passed after the parameters
    maps: dict = {}  # TMA tensor map parameters, passed last: name -> (tensor, box, swizzle)


def reads_memory(e) -> bool:
    """Whether expression `e` loads from memory (a loop's end read once before it)."""
    return any(isinstance(x, (BufferLoad, Call)) for x in walk_expr(e))


def cluster_attribute(program: BlockProgram) -> str:
    """`__cluster_dims__(x, y, z) ` of a kernel with clusters (declared in the source, so a
    plain launch makes them), else nothing."""
    if program.cluster is None:
        return ""
    dims = (*program.cluster, 1, 1)[:3]
    return f"__cluster_dims__({', '.join(str(d) for d in dims)}) "


def print_cuda(program: BlockProgram, target=None, min_blocks: int = 1,
               prepared=None) -> PrintedKernel:
    """The CUDA source, entry name, dynamic shared memory and pointer alignments of `program`
    (verified, its arena planned, its barriers inserted and its instructions selected for
    `target` by block/prepare.py, unless `prepared` holds that already; `target`: a
    tilecraft.targets.Target or an arch string, None selects nothing a chip may lack, e.g.
    wgmma); `min_blocks`: the blocks per SM `__launch_bounds__` asks ptxas to make room for."""
    from tilecraft.block.prepare import prepare
    from tilecraft.block.select import CopyAsyncPlan, VectorPlan

    from ..cuda.build import include_lines
    from .tidy import tidy_source

    if program.cluster is not None and not (resolve_target(target) is not None
                                            and resolve_target(target).has_clusters):
        arch = getattr(target, "arch", target)
        raise TilecraftError("TC502", program.span, detail=f"cluster_dims on {arch}",
                             hint="tilecraft builds thread-block clusters for the chips it "
                             "knows that have them: sm_90 / sm_90a (H100, H200)")
    if prepared is None:
        prepared = prepare(program, resolve_target(target))
    program, smem, plans = prepared.program, prepared.arena, prepared.plans
    pr = BlockPrinter(program, plans)
    pr.smem_plan = smem
    pr.w("extern __shared__ __align__(1024) unsigned char tc_smem[];")
    pr.w("const int tid = threadIdx.x;")
    stride = 1
    used = {v for s in walk(program.body) for e in stmt_exprs(s) for v in walk_expr(e)}
    used |= {v for s in walk(program.body) if isinstance(s, ParallelCompute)
             for x in walk(s.body) for e in stmt_exprs(x) for v in walk_expr(e)}
    for v, n in zip(program.thread_vars, program.thread_extents):  # T.get_thread_binding
        if v in used:
            c = "tid" if stride == 1 else f"tid / {stride}"
            if stride * n < program.num_threads:
                c = f"{c if stride == 1 else f'({c})'} % {n}"
            pr.w(f"const int {pr.var_name(v)} = {c};")
            pr.exprs.ranges[v] = (0, n - 1)
        stride *= n
    swz = next((s for s in walk(program.body) if isinstance(s, UseSwizzle)), None)
    if swz is not None and program.cluster is not None:
        raise TilecraftError("TC502", swz.span, detail="T.use_swizzle in a kernel with "
                             "cluster_dims", hint="clusters are consecutive blocks: drop one")
    bvars = program.block_vars
    if swz is not None and len(bvars) >= 2:  # T.use_swizzle: the block order (L2 reuse)
        b0, b1 = pr.var_name(bvars[0]), pr.var_name(bvars[1])
        pr.w(f"int {b0}, {b1};  // T.use_swizzle({swz.panel_size}, order={swz.order!r})")
        pr.w(f"tc::rasterize({swz.panel_size}, {'true' if swz.order == 'col' else 'false'}, "
             f"{b0}, {b1});")
    for k, (v, axis, g) in enumerate(zip(bvars, "xyz", program.grid)):
        if not (swz is not None and len(bvars) >= 2 and k < 2):
            if k < len(program.reversed_axes) and program.reversed_axes[k]:
                pr.w(f"const int {pr.var_name(v)} = gridDim.{axis} - 1 - blockIdx.{axis};  "
                     "// the blocks with the longest loops start first")
            else:
                pr.w(f"const int {pr.var_name(v)} = blockIdx.{axis};")
        # a dynamic grid's extent is at most the hardware's (2^31 - 1 blocks in x, 65535 in y, z)
        top = const_int(g) if const_int(g) is not None else (2**31 - 1 if k == 0 else 65535)
        pr.exprs.ranges[v] = (0, top - 1)
    pr.stmt(program.body)
    user = -(-smem.size // 128) * 128
    area = -(-pr.scratch // 16) * 16  # (the first area; the second after it, where used)
    body = tidy_source("\n".join(pr.lines))
    second = "SCRATCH_B" in body
    body = body.replace("SCRATCH_B", str(user + area)).replace("SCRATCH", str(user))
    sig = []
    for p in program.params:
        if isinstance(p, Var):
            sig.append(f"const {ctype(p.dtype)} {pr.var_name(p)}")
        else:
            restrict = "" if p.buffer in pr.written_by_one or pr.viewed(p) else " __restrict__"
            sig.append(f"{storage_ctype(p.dtype)}*{restrict} {pr.tensor(p)}")
    dims = dynamic_dims(program)
    sig += [f"const int {pr.var_name(v)}" for v in dims]
    sig += [f"const __grid_constant__ tc::TensorMap {m}" for m in pr.tensor_maps]
    name = f"{program.name}_kernel"
    code = ("".join(f"{h}\n" for h in pr.helpers.values()) +
            f'extern "C" __global__ void {cluster_attribute(program)}'
            f'__launch_bounds__({launch_threads(program)}, {min_blocks})\n'
            f"{name}({', '.join(sig)}) {{\n{body}\n}}\n")
    source = (f"// Generated by tilecraft from the block program `{program.name}`.\n"
              f"{include_lines(code)}\n\n{code}")
    align: dict[str, int] = {}
    for plan in plans.values():  # pointer alignments the selected accesses rely on
        if isinstance(plan, CopyAsyncPlan):
            align[plan.tensor] = max(align.get(plan.tensor, 0), 16)
        elif isinstance(plan, VectorPlan) and plan.tensor is not None:
            tensor = next(p for p in program.params if getattr(p, "name", None) == plan.tensor)
            need = plan.width * tensor.dtype.bits // 8
            align[plan.tensor] = max(align.get(plan.tensor, 0), need)
    scratch = area + pr.scratch_b if second else pr.scratch
    return PrintedKernel(source, name, user + scratch, align, dims, dict(pr.tensor_maps))


def resolve_target(target):
    """A Target for `target` (an arch string: its reference chip; an arch tilecraft has no
    reference for: None, no special instructions)."""
    if isinstance(target, str):
        from tilecraft.targets import target_from_arch

        try:
            return target_from_arch(target)
        except ValueError:
            return None
    return target


def refined(cond, ranges: dict) -> dict:
    """Tighter intervals that `cond` proves inside `if (cond)`: for `a * v + c < n` (and <=)
    with constants a > 0 and n, v <= (n - 1 - c) // a (the pipeline's `if ko + 2 < n` refills;
    `k2 * 2 + 3 < n` where unroll_pairs runs two iterations a trip)."""
    from tilecraft.ir.expr import Compare
    from tilecraft.ir.simplify import linear_form

    if not isinstance(cond, Compare) or cond.op not in ("<", "<="):
        return {}
    rhs = const_int(cond.b)
    form = linear_form(cond.a)
    if rhs is None or form is None or len(form[0]) != 1:
        return {}
    (v, coeff), = form[0].items()
    if not isinstance(v, Var) or not isinstance(coeff, int) or coeff < 1 or v not in ranges:
        return {}
    hi = (rhs - form[1] - (1 if cond.op == "<" else 0)) // coeff
    lo, old = ranges[v]
    return {v: (lo, min(old, hi))} if min(old, hi) >= lo else {}


def dynamic_dims(program: BlockProgram) -> tuple[Var, ...]:
    """The Vars in the global tensors' shapes that are not parameters (T.dynamic dims: the
    runtime binds them from the tensors' shapes)."""
    out: list[Var] = []
    for p in program.params:
        for d in getattr(getattr(p, "buffer", None), "shape", ()):
            if isinstance(d, Var) and d not in program.params and d not in out:
                out.append(d)
    return tuple(out)
