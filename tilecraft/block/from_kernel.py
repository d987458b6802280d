"""A kernel written at the Tilus level (`T.allocate_register`, `T.load_global`, `T.dot`, ...) as
a BlockProgram, and running one on the block VM with torch tensors or numpy arrays."""

from __future__ import annotations

from typing import Any

from tilecraft.ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    KernelLaunch,
    ParallelLoop,
    PrimFunc,
    TileOp,
)
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .instructions import Instruction
from .program import BlockProgram
from .tensors import GlobalTensor


def block_program_of(func: PrimFunc) -> BlockProgram | None:
    """The block program of a kernel written with block instructions only; None for a kernel
    with tile-level statements (tile ops, T.Parallel, T.alloc_shared/fragment), which the pass
    pipeline lowers — block instructions among them included (`is_mixed`)."""
    kernel = next((s for s in walk(func.body) if isinstance(s, KernelLaunch)), None)
    if kernel is None or not any(isinstance(s, Instruction) for s in walk(kernel.body)):
        return None
    if is_mixed(func):
        return None
    params = tuple(GlobalTensor.of(p) if isinstance(p, Buffer) else p for p in func.params)
    return BlockProgram(func.name, params, tuple(kernel.grid), kernel.num_threads,
                        tuple(kernel.block_vars), kernel.body, func.span,
                        thread_vars=tuple(kernel.thread_vars),
                        thread_extents=tuple(kernel.threads), cluster=kernel.cluster)


def is_mixed(func: PrimFunc) -> bool:
    """The kernel holds block instructions and tile-level statements (both language levels):
    tile ops, T.Parallel, T.alloc_shared/fragment, or an element of a register tensor (a
    fragment) read or written, which only T.Parallel may do (the pass pipeline says so at the
    line)."""
    kernel = next((s for s in walk(func.body) if isinstance(s, KernelLaunch)), None)
    if kernel is None or not any(isinstance(s, Instruction) for s in walk(kernel.body)):
        return False
    return any(isinstance(s, (TileOp, ParallelLoop)) or (
        isinstance(s, Allocate) and s.buffer.scope in ("fragment", "shared"))
        or _indexes_a_fragment(s) for s in walk(kernel.body))


def _indexes_a_fragment(s) -> bool:
    if isinstance(s, Instruction):
        return False
    if isinstance(s, BufferStore) and s.buffer.scope == "fragment":
        return True
    return any(isinstance(x, BufferLoad) and x.buffer.scope == "fragment"
               for e in stmt_exprs(s) for x in walk_expr(e))


def run_on_vm(program: BlockProgram, args: list[Any]) -> None:
    """Run `program` on the block VM: CPU torch tensors and numpy arrays in place, tensors on
    another device copied in and back."""
    from tilecraft.args import is_torch, to_numpy_view

    from .vm import run

    arrays, copies = [], []
    for a in args:
        if is_torch(a):
            if a.device.type != "cpu":
                host = a.detach().cpu()
                copies.append((a, host))
                a = host
            a = to_numpy_view(a.detach())
        arrays.append(a)
    run(program, arrays)
    for dev, host in copies:
        dev.copy_(host)
