"""What one block of a lowered program does: bytes per memory level and operations per unit.

Requires a block program (the pass pipeline's result, `lowered_program(state)`); guarantees a
`BlockCounts` that cost.py turns into a time. Nothing is compiled and nothing runs.

    counts = count_block(program)
    counts.global_read, counts.tensor_flops, counts.sites   # per block, averaged over blocks

Every statement is weighted by the trip counts of the loops around it. A loop whose extent
depends on the block index (a causal attention's key loop) counts its mean over the grid; an
`if` counts both branches once (the pipeline's guards of its last iterations, a masked tile).
Each global read is also a `Site`: its bytes per block and the part of its offset that moves
with the block index, from which cost.py counts the distinct tiles a wave of blocks reads (the
L2 reuse between blocks: a GEMM's blocks in one row share their A panel).

Per instruction:
- load_global, copy_async, copy_async_bulk: a global read (a site); the copies also write
  shared memory;
- store_global: a global write; atomic_global: a read and a write;
- load_shared, store_shared: shared bytes;
- dot, dot_shared: tensor-core flops 2 M N K; dot_shared also its shared operands' bytes;
- parallel: per element, one CUDA-core op per arithmetic node, one SFU op per transcendental,
  its global and shared loads and stores as bytes;
- cast, unary, binary, fill, reduce, cumsum: one CUDA-core op per element;
- the rest (UNCOUNTED: allocations, views, waits, barriers) nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from tilecraft.block import compute, dot_shared, mbarrier, parallel, transfer
from tilecraft.block.instructions import (
    AllocateGlobal,
    AllocateRegister,
    AllocateShared,
    Exit,
    Instruction,
    Print,
    Synchronize,
    ViewGlobal,
)
from tilecraft.block.tensors import SharedTensor
from tilecraft.ir import For, LetStmt, SeqStmt, Stmt
from tilecraft.ir.expr import (
    BinOp,
    BufferLoad,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Select,
    Var,
    const_int,
)
from tilecraft.ir.rewrite import substitute
from tilecraft.ir.stmt import BufferStore
from tilecraft.ir.visitor import stmt_children, stmt_exprs, walk, walk_expr

#: intrinsics the SFU (MUFU) computes: one op per element each
SFU_CALLS = frozenset({"exp", "exp2", "log", "log2", "rsqrt", "sqrt", "sin", "cos", "tanh",
                       "sigmoid", "rcp", "pow", "erf", "expm1", "log1p"})


@dataclass(frozen=True)
class Site:
    """A global read: `bytes` per block (all its trip counts) from `tensor`, at an offset whose
    block-dependent part is `key` (one array of grid-wide values per offset coordinate, in launch
    order; None: unknown, every block reads its own bytes)."""

    tensor: str
    bytes: float
    key: tuple[np.ndarray, ...] | None


@dataclass
class BlockCounts:
    """Per block, averaged over the grid's blocks."""

    blocks: int = 1
    threads: int = 0
    global_read: float = 0.0
    global_write: float = 0.0
    shared_bytes: float = 0.0
    tensor_flops: float = 0.0
    tensor_dtype: str = ""  # the dot operands' dtype ("float16", ...); "" without dots
    alu_ops: float = 0.0  # CUDA-core operations (an FMA is one)
    sfu_ops: float = 0.0
    iterations: float = 0.0  # trip count of the innermost loops that move global tiles
    stages: int = 1  # the deepest software pipeline (T.Pipelined num_stages)
    registers: int = 0  # estimated per thread (may exceed 255: the block would spill)
    dynamic: bool = False  # a grid extent or loop bound the model could not evaluate (taken as 1)
    sites: list[Site] = field(default_factory=list)


#: instructions the model gives no bytes or operations of their own: allocations, views, waits,
#: barriers (their cost is the per-iteration latency term, cost.py), debugging. Every block
#: instruction is counted by `_Counter.instruction` or listed here (tests/tune).
UNCOUNTED = (AllocateShared, AllocateGlobal, ViewGlobal, Synchronize, Exit, Print, compute.View,
             transfer.SharedSlice, transfer.CopyAsyncCommitGroup, transfer.CopyAsyncWaitGroup,
             dot_shared.DotWaitGroup, mbarrier.MbarrierInit, mbarrier.MbarrierExpect,
             mbarrier.MbarrierWait, mbarrier.MbarrierArrive)
COUNTED = (AllocateRegister, transfer.CopyAsync, mbarrier.CopyAsyncBulk, transfer.LoadGlobal,
           transfer.StoreGlobal, parallel.AtomicGlobal, transfer.LoadShared, transfer.StoreShared,
           compute.Dot, dot_shared.DotShared, parallel.ParallelCompute, compute.Cast,
           compute.CastPlanes, compute.CastBytes, compute.UnaryOp, compute.BinaryOp, compute.Fma,
           compute.Fill, parallel.CumSumRegister, compute.ReduceRegister)


class GridValues:
    """The block variables' values over the whole grid, in launch order (blockIdx.x fastest,
    rasterized like tc::rasterize under T.use_swizzle), and a numpy evaluator of integer
    expressions over them (None for what it cannot evaluate)."""

    def __init__(self, program: Any, swizzle: Any = None):
        grid = [_int(g) for g in program.grid]
        self.ok = all(g is not None and g > 0 for g in grid)
        self.grid = tuple(g if g is not None else 1 for g in grid)
        self.count = prod(self.grid)
        self.values: dict[Var, np.ndarray] = {}
        if not self.ok:
            return
        lin = np.arange(self.count, dtype=np.int64)
        idx, rest = [], lin
        for g in self.grid:
            idx.append(rest % g)
            rest = rest // g
        if swizzle is not None and len(self.grid) >= 2:
            idx[0], idx[1] = _rasterize(lin, self.grid[0], self.grid[1], swizzle.panel_size,
                                        swizzle.order == "col")
        self.values = dict(zip(program.block_vars, idx))

    def evaluate(self, e: Expr, zero: frozenset = frozenset()) -> np.ndarray | None:
        """`e` over the grid; variables in `zero` (loop and thread variables) read as 0."""
        try:
            out = _eval(e, self.values, zero)
        except (_Unknown, ZeroDivisionError, FloatingPointError):
            return None
        return np.broadcast_to(np.asarray(out, dtype=np.int64), (self.count,))


def _rasterize(lin, gx: int, gy: int, panel: int, col: bool):
    if not col:
        per = panel * gx
        p, off = lin // per, lin % per
        rows = np.minimum(panel, gy - p * panel)
        return off // rows, p * panel + off % rows
    per = panel * gy
    p, off = lin // per, lin % per
    cols = np.minimum(panel, gx - p * panel)
    return p * panel + off % cols, off // cols


class _Unknown(Exception):
    pass


def _eval(e: Expr, env: dict, zero: frozenset):
    if isinstance(e, Const):
        if e.dtype.is_float:
            raise _Unknown
        return int(e.value)
    if isinstance(e, Var):
        if e in env:
            return env[e]
        if e in zero:
            return 0
        raise _Unknown
    if isinstance(e, Cast):
        if e.dtype.is_float:
            raise _Unknown
        return _eval(e.value, env, zero)
    if isinstance(e, BinOp):
        a, b = _eval(e.a, env, zero), _eval(e.b, env, zero)
        ops = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide,
               "%": np.mod, "min": np.minimum, "max": np.maximum}
        if e.op not in ops:
            raise _Unknown
        if e.op in ("//", "%") and np.any(np.asarray(b) == 0):
            raise _Unknown
        return ops[e.op](a, b)
    if isinstance(e, Select):
        c = _eval_cond(e.cond, env, zero)
        return np.where(c, _eval(e.a, env, zero), _eval(e.b, env, zero))
    raise _Unknown


def _eval_cond(e: Expr, env: dict, zero: frozenset):
    if isinstance(e, Compare):
        a, b = _eval(e.a, env, zero), _eval(e.b, env, zero)
        ops = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal}
        if e.op not in ops:
            raise _Unknown
        return ops[e.op](a, b)
    raise _Unknown


def _int(e: Any) -> int | None:
    return const_int(e)


def _elements(tensor: Any) -> int:
    n = 1
    for d in tensor.shape:
        v = _int(d)
        n *= v if v is not None else 1
    return n


def _nbytes(tensor: Any) -> float:
    return _elements(tensor) * tensor.dtype.bits / 8


def count_block(program: Any) -> BlockCounts:
    """The per-block counts of `program` (a BlockProgram)."""
    from tilecraft.ir import UseSwizzle

    swizzle = next((s for s in walk(program.body) if isinstance(s, UseSwizzle)), None)
    grid = GridValues(program, swizzle)
    counter = _Counter(grid, program.num_threads)
    counter.fused = _fused_operands(program)
    counter.stmt(program.body, 1.0, {}, frozenset(program.thread_vars))
    c = counter.counts
    c.blocks, c.threads = grid.count, program.num_threads
    c.dynamic = c.dynamic or not grid.ok
    words = sorted(counter.register_words, reverse=True) + [0, 0]
    # the largest register tensor is live throughout (an accumulator); the others mostly in
    # turn (a cast's output replaces its input chunk by chunk): calibrated against ptxas on
    # the GEMM and attention examples (sm_90a)
    c.registers = int(16 + 2 * min(counter.address_regs, 8) + words[0] + 0.4 * words[1]
                      + 0.15 * sum(words[2:]))
    return c


def _fused_operands(program: Any) -> set:
    """Register tensors loaded from shared memory (and their views) that feed a dot: selection
    fuses them into the mma loop, loaded a k step at a time (block/select.py)."""
    views = {x.src: x.out for x in walk(program.body) if isinstance(x, compute.View)}
    operands = {t for x in walk(program.body) if isinstance(x, (compute.Dot,
                                                                 dot_shared.DotShared))
                for t in (x.a, x.b)}
    fused = set()
    for x in walk(program.body):
        if isinstance(x, transfer.LoadShared):
            chain = [x.out]
            while chain[-1] in views:
                chain.append(views[chain[-1]])
            if any(t in operands for t in chain):
                fused.update(chain)
    return fused


class _Counter:
    def __init__(self, grid: GridValues, threads: int):
        self.grid = grid
        self.threads = threads
        self.counts = BlockCounts()
        self.register_words: list[int] = []
        self.fused: set = set()
        self.address_regs = 0

    # ---- control flow -------------------------------------------------------------------
    def stmt(self, s: Stmt, weight: float, lets: dict, zero: frozenset) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:  # a let binds its variable for the rest of the sequence
                if isinstance(x, LetStmt):
                    lets = {**lets, x.var: substitute(x.value, lets) if lets else x.value}
                else:
                    self.stmt(x, weight, lets, zero)
        elif isinstance(s, For):
            trips = self._trips(s, lets, zero)
            self.stmt(s.body, weight * trips, lets, zero | {s.var})
            if any(isinstance(x, (transfer.CopyAsync, mbarrier.CopyAsyncBulk,
                                  transfer.LoadGlobal)) for x in walk(s.body)):
                self.counts.iterations = max(self.counts.iterations, weight * trips)
        elif isinstance(s, Instruction):
            self.instruction(s, weight, lets, zero)
        else:  # If, While (their bodies once), anything else holding statements
            for c in stmt_children(s):
                self.stmt(c, weight, lets, zero)

    def _trips(self, s: For, lets: dict, zero: frozenset) -> float:
        extent = substitute(s.extent, lets) if lets else s.extent
        n = _int(extent)
        if n is not None:
            return float(max(n, 0))
        values = self.grid.evaluate(extent, zero)
        if values is None:
            self.counts.dynamic = True
            return 1.0  # a dynamic extent: one iteration (the model knows no sizes)
        return float(np.maximum(values, 0).mean())

    # ---- instructions -------------------------------------------------------------------
    def instruction(self, s: Any, w: float, lets: dict, zero: frozenset) -> None:
        c = self.counts
        if isinstance(s, AllocateRegister) and s.out not in self.fused:
            words = -(-s.out.layout.local_size * s.out.dtype.bits // 32)
            self.register_words.append(words)
        elif isinstance(s, (transfer.CopyAsync, mbarrier.CopyAsyncBulk)):
            b = _nbytes(s.dst)
            self._site(s.src, s.offset, b * w, lets, zero)
            c.global_read += b * w
            c.shared_bytes += b * w
            self.address_regs += 1
        elif isinstance(s, transfer.LoadGlobal):
            b = _elements(s.out) * s.src.dtype.bits / 8
            self._site(s.src, s.offset, b * w, lets, zero)
            c.global_read += b * w
            self.address_regs += 1
        elif isinstance(s, transfer.StoreGlobal):
            c.global_write += _elements(s.src) * s.dst.dtype.bits / 8 * w
        elif isinstance(s, parallel.AtomicGlobal):
            b = _elements(s.src) * s.dst.dtype.bits / 8 * w
            c.global_write += b
            c.global_read += b
        elif isinstance(s, (transfer.LoadShared, transfer.StoreShared)):
            c.shared_bytes += _nbytes(s.out if isinstance(s, transfer.LoadShared) else s.src) * w
        elif isinstance(s, (compute.Dot, dot_shared.DotShared)):
            m, n = (_int(d) or 1 for d in s.c.shape)
            a_shape = [(_int(d) or 1) for d in s.a.shape]
            k = a_shape[0] if getattr(s, "trans_a", False) else a_shape[-1]
            c.tensor_flops += 2.0 * m * n * k * w
            c.tensor_dtype = c.tensor_dtype or s.a.dtype.name
            if isinstance(s, dot_shared.DotShared):
                a_bytes = _nbytes(s.a) if isinstance(s.a, SharedTensor) else 0
                c.shared_bytes += (_nbytes(s.b) + a_bytes) * w
        elif isinstance(s, parallel.ParallelCompute):
            self._parallel(s, w, lets, zero)
        elif isinstance(s, (compute.Cast, compute.CastPlanes, compute.CastBytes, compute.UnaryOp,
                            compute.BinaryOp, compute.Fma, compute.Fill,
                            parallel.CumSumRegister)):
            c.alu_ops += _elements(s.out) * w
        elif isinstance(s, compute.ReduceRegister):
            c.alu_ops += _elements(s.src) * w
        else:
            for child in stmt_children(s):
                self.stmt(child, w, lets, zero)

    def _parallel(self, s: Any, w: float, lets: dict, zero: frozenset) -> None:
        c = self.counts
        elements = prod(int(e) for e in s.extents) * w
        alu = sfu = 0
        for st in walk(s.body):
            if isinstance(st, BufferStore):
                scope = st.buffer.scope
                if scope == "global":
                    c.global_write += st.buffer.dtype.bits / 8 * elements
                elif scope == "shared":
                    c.shared_bytes += st.buffer.dtype.bits / 8 * elements
            for e in stmt_exprs(st):
                for x in walk_expr(e):
                    if isinstance(x, Call):
                        sfu += x.op in SFU_CALLS
                        alu += x.op not in SFU_CALLS
                    elif isinstance(x, (BinOp, Select, Compare)):
                        alu += 1
                    elif isinstance(x, BufferLoad):
                        scope = x.buffer.scope
                        if scope == "global":
                            c.global_read += x.buffer.dtype.bits / 8 * elements
                            c.sites.append(Site(x.buffer.name, x.buffer.dtype.bits / 8 *
                                                elements, None))
                        elif scope == "shared":
                            c.shared_bytes += x.buffer.dtype.bits / 8 * elements
        c.alu_ops += max(alu, 1) * elements
        c.sfu_ops += sfu * elements

    def _site(self, tensor: Any, offset: tuple, nbytes: float, lets: dict,
              zero: frozenset) -> None:
        key: list | None = []
        for o in offset:
            e = substitute(o, lets) if lets else o
            # loop and thread variables move the tile along the loop, not with the block: at
            # 0, what remains is the offset's block-dependent part
            free = {v for v in walk_expr(e) if isinstance(v, Var)} - set(self.grid.values)
            values = self.grid.evaluate(e, frozenset(free)) if self.grid.ok else None
            if values is None:
                key = None
                break
            key.append(values)
        self.counts.sites.append(Site(tensor.name, nbytes, tuple(key) if key is not None
                                      else None))
