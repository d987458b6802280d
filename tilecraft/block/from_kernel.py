"""A kernel written at the Tilus level (`T.allocate_register`, `T.load_global`, `T.dot`, ...) as
a BlockProgram, and running one on the block VM with torch tensors or numpy arrays."""

from __future__ import annotations

from typing import Any

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Allocate, Buffer, KernelLaunch, ParallelLoop, PrimFunc, SeqStmt, TileOp
from tilecraft.ir.visitor import walk

from .instructions import Instruction
from .program import BlockProgram
from .tensors import GlobalTensor


def block_program_of(func: PrimFunc) -> BlockProgram | None:
    """The block program of a kernel written with block instructions; None for a Tile IR kernel.
    Tile ops, T.Parallel loops or tile-level allocations beside block instructions are TC502 at
    the first of them (the two levels do not mix in one kernel yet)."""
    kernel = next((s for s in walk(func.body) if isinstance(s, KernelLaunch)), None)
    if kernel is None or not any(isinstance(s, Instruction) for s in walk(kernel.body)):
        return None
    outside = func.body.stmts if isinstance(func.body, SeqStmt) else (func.body,)
    for s in [*walk(kernel.body), *(x for x in outside if x is not kernel)]:
        if s is not kernel and (isinstance(s, (TileOp, ParallelLoop, KernelLaunch)) or (
                isinstance(s, Allocate) and s.buffer.scope in ("fragment", "shared"))):
            raise TilecraftError("TC502", span=s.span, detail="a tile-level statement in a "
                                 "kernel written with block instructions (the two levels do "
                                 "not mix in one kernel yet)",
                                 hint="write this kernel with T.load_global / T.dot / "
                                 "T.store_global / ... only, or with tile ops only")
    params = tuple(GlobalTensor.of(p) if isinstance(p, Buffer) else p for p in func.params)
    return BlockProgram(func.name, params, tuple(kernel.grid), kernel.num_threads,
                        tuple(kernel.block_vars), kernel.body, func.span,
                        thread_vars=tuple(kernel.thread_vars),
                        thread_extents=tuple(kernel.threads))


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
