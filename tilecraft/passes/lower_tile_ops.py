"""lower_tile_ops: the kernel's Tile IR -> a block-instruction program (DESIGN 2.3 step 4,
docs/block_ir.md "Lowering").

Requires: `layouts` (a Fragment per fragment buffer and per T.Parallel loop, the gemm warp grids)
and `swizzles` (which shared tiles are swizzled). Guarantees (`block_program`):
state.block_program (or, for now, state.lowering_refusal: see `lower_tile_ops`) is a
`BlockProgram` with the kernel's parameters, grid, threads and block indices, in which every
tile op and T.Parallel loop is block instructions on tensors with explicit layouts (each with
the span of the statement it comes from), and the scalar code (lets, stores outside
T.Parallel, if/for/while, break, T.call_extern) is the kernel's own. It verifies
(`block.verify`), and the VM running it computes what the interpreter computes on the
Tile IR (tests/passes/test_lower_tile_ops.py). The rules, per op class: passes/lowering/.

    A_s = T.alloc_shared((64, 32), "float16")      A_s = allocate_shared(float16[64, 32], ...)
    acc = T.alloc_fragment((64, 64), "float32")    acc = allocate_register(float32[64, 64], ...)
    T.clear(acc)                                   fill(acc, 0.0)
    for k in T.Pipelined(4, num_stages=2):         for k in range(4):  # pipelined
        T.copy(A[by * 64, k * 32], A_s)                A_s_t1 = allocate_register(...)
                                                       load_global(A, ..., out=A_s_t1)
                                                       store_shared(A_s_t1, A_s, ...)
        T.gemm(A_s, B_s, acc)                          ... dot(A_s_t2, B_s_t3, acc, out=acc)

Scalar code (outside tile ops and T.Parallel) may read and write global, shared, local and
var buffers: the VM runs it as the interpreter does (block/vm_scalar.py for shared elements) and
the CUDA printer runs a block-level store to memory once per block (codegen/block_cuda/
scalar.py). Fragments there, and the tiles a T.Pipelined loop stages, are TC502. Tile ops on
local/var buffers (copy, fill, cumsum) become that scalar code (lowering/local.py).
"""

from __future__ import annotations

import dataclasses

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BlockProgram,
    GlobalTensor,
    Instruction,
    RegisterTensor,
    SharedTensor,
)
from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    If,
    KernelLaunch,
    LetStmt,
    ParallelLoop,
    SeqStmt,
    Stmt,
    TileOp,
    While,
)
from tilecraft.ir.visitor import stmt_exprs, walk_expr

from .context import KernelState
from .lowering import RULES, LowerContext
from .lowering.context import not_lowered
from .lowering.local import lower_local, on_local


def lower_tile_ops(state: KernelState) -> None:
    """The pipeline's pass. While the CUDA backend prints from the Tile IR, a kernel that holds
    what lowering cannot express yet (TC502, or a layout check) still compiles: the refusal is
    recorded in state.lowering_refusal (and shown in IR dumps) and state.block_program stays
    None. Python exceptions (bugs of the lowering) are raised."""
    try:
        state.block_program = build_block_program(state)
    except TilecraftError as err:  # (any code: the CUDA backend decides what it refuses)
        state.block_program, state.lowering_refusal = None, err


def lowered_program(state: KernelState) -> BlockProgram:
    """The lowered (and pipelined) program of a state the pipeline filled; the refusal raised
    when the kernel could not be lowered."""
    if state.block_program is None:
        if state.lowering_refusal is not None:
            raise state.lowering_refusal
        raise RuntimeError("the pipeline did not run lower_tile_ops")
    return state.block_program


def build_block_program(state: KernelState) -> BlockProgram:
    """The kernel as a block program; TC502 at the statement that cannot be lowered yet."""
    cx = LowerContext(state)
    kernel = state.kernel
    prologue = _outside_kernel(state.func.body, kernel)
    body = SeqStmt.create(prologue + [_stmt(cx, kernel.body)])
    params = tuple(GlobalTensor.of(p) if isinstance(p, Buffer) else p for p in state.func.params)
    program = BlockProgram.create(state.func.name, params, kernel.grid, kernel.num_threads,
                                  body, block_vars=kernel.block_vars, span=kernel.span)
    return dataclasses.replace(program, thread_vars=tuple(kernel.thread_vars),
                               thread_extents=tuple(kernel.threads), cluster=kernel.cluster)


def _outside_kernel(root: Stmt, kernel: KernelLaunch) -> list[Stmt]:
    """The lets before `T.Kernel` (scalar code every block runs first)."""
    if root is kernel or isinstance(root, KernelLaunch):
        return []
    stmts = root.stmts if isinstance(root, SeqStmt) else (root,)
    out = []
    for s in stmts:
        if isinstance(s, KernelLaunch):
            continue
        if not isinstance(s, LetStmt):
            raise not_lowered(s.span, f"{type(s).__name__} outside T.Kernel")
        out.append(s)
    return out


def _scalar(cx: LowerContext, s: Stmt) -> None:
    """Scalar code may not touch fragments (each thread holds only part of one: only tile ops
    and T.Parallel do) nor the shared tiles a pipelined loop stages."""
    bufs = [s.buffer] if isinstance(s, BufferStore) else []
    bufs += [x.buffer for e in stmt_exprs(s) for x in walk_expr(e) if isinstance(x, BufferLoad)]
    for b in bufs:
        if b.scope == "fragment":
            raise not_lowered(s.span, f"`{b.name}` ({b.scope}) accessed outside T.Parallel and "
                              "tile operations", hint="use a T.Parallel loop or a tile op")
        if b.scope == "shared" and b in cx.staged:
            raise not_lowered(s.span, f"the pipelined tile `{b.name}` accessed outside "
                              "T.Parallel and tile operations",
                              hint="use a T.Parallel loop or a tile op")


def _stmt(cx: LowerContext, s: Stmt) -> Stmt:
    if isinstance(s, SeqStmt):
        return SeqStmt.create([_stmt(cx, c) for c in s.stmts])
    with at_span(s.span):
        if isinstance(s, (For, While)):
            _scalar(cx, s)
            return dataclasses.replace(s, body=_stmt(cx, s.body))
        if isinstance(s, If):
            _scalar(cx, s)
            other = None if s.else_body is None else _stmt(cx, s.else_body)
            return dataclasses.replace(s, then_body=_stmt(cx, s.then_body), else_body=other)
        if isinstance(s, Allocate):
            if s.buffer.scope in ("local", "var"):
                return s
            t = cx.define(s.buffer)
            cls = AllocateShared if s.buffer.scope == "shared" else AllocateRegister
            return cls.create(t, span=s.span)
        if isinstance(s, TileOp) and on_local(s):  # per-thread arrays: scalar code
            _scalar(cx, s)
            return SeqStmt.create(lower_local(cx, s))
        if isinstance(s, Instruction):  # written at the Tilus level: kept, on lowered tensors
            return _block_instruction(cx, s)
        rule = RULES.get(type(s))
        if rule is not None:
            if not isinstance(s, ParallelLoop):
                _scalar(cx, s)  # region starts and fill values are scalar code
            return SeqStmt.create(rule(cx, s))
        if isinstance(s, (TileOp, KernelLaunch)):
            raise not_lowered(s.span, type(s).__name__)
        _scalar(cx, s)  # lets, stores, evaluate, break: the kernel's scalar code
        return s


def _block_instruction(cx: LowerContext, s: Instruction) -> Stmt:
    """A block instruction of a kernel that mixes both levels: a tile-level shared buffer it
    names becomes the tensor lowering gave that buffer (its planned layout: the instruction's
    meaning is logical, so the layout changes nothing but where the bytes lie); a tile-level
    fragment (allocated with `layout=`, a strict constraint of layout inference) is the
    register tensor of that layout. A register tensor the instruction defines is the tensor
    later tile ops on its fragment use (inference gave the fragment its layout)."""
    def adopt(t):
        if isinstance(t, RegisterTensor) and t.buffer not in cx.tensors:
            cx.tensors[t.buffer] = t
        elif isinstance(t, (SharedTensor, RegisterTensor)) and t.buffer in cx.tensors:
            mine = cx.tensors[t.buffer]
            if isinstance(t, RegisterTensor) and mine.layout != t.layout:
                raise TilecraftError("TC501", span=s.span, buffer=t.name, detail="it "
                                     f"has layout {mine.layout!r} (inferred) but the block "
                                     f"instruction `{s.NAME}` uses it as {t.layout!r}",
                                     hint="give the fragment `layout=` in T.alloc_fragment")
            return mine
        return t

    changes = {}
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)  # (a tensor, or a tuple of them: cast_bytes's parts)
        if isinstance(value, tuple):
            new = tuple(adopt(t) for t in value)
            if any(a is not b for a, b in zip(new, value)):
                changes[f.name] = new
        elif (new := adopt(value)) is not value:
            changes[f.name] = new
    return dataclasses.replace(s, **changes) if changes else s
