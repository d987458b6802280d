"""`BlockProgram`: a kernel written in block instructions (Tilus section 6.2, Figure 7).

    prog = BlockProgram.create("matmul", params=(ga, gb, gc), grid=(M // 64, N // 8),
                               num_threads=128, body=[...], block_vars=("bi", "bj"))
    print(prog)            # Tilus-style script (printer.py)
    prog.verify()          # TC6xx at the offending instruction's line (verifier.py)
    prog.run(a, b, c)      # the CPU virtual machine (vm.py), on numpy arrays, in place

The body is ordinary Tile IR control flow (SeqStmt, For, If, While, LetStmt) around block
instructions; every block runs it with `block_vars` bound to its grid index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilecraft.diagnostics import Span
from tilecraft.ir import Expr, SeqStmt, Stmt, Var, as_expr

from .tensors import GlobalTensor, user_span

_DEFAULT_BLOCK_VARS = ("bi", "bj", "bk")


@dataclass(frozen=True)
class BlockProgram:
    """A block-level program: name, parameters (global tensors and scalar Vars), grid, threads
    per block, the grid index variables and the body."""

    name: str
    params: tuple[GlobalTensor | Var, ...]
    grid: tuple[Expr, ...]
    num_threads: int
    block_vars: tuple[Var, ...]
    body: Stmt
    span: Span | None = field(default=None, compare=False)
    # grid axes launched last index first (a schedule, not the program's meaning:
    # passes/schedule_blocks.py), outermost block variable first
    reversed_axes: tuple[bool, ...] = ()
    # T.get_thread_binding's variables: threadIdx.x, .y, .z of a block of `thread_extents`
    # threads along each (x fastest in the flat thread index)
    thread_vars: tuple[Var, ...] = ()
    thread_extents: tuple[int, ...] = ()
    # T.Kernel's cluster_dims (one entry per grid axis), or None (language/cluster.py)
    cluster: tuple[int, ...] | None = None

    @classmethod
    def create(cls, name: str, params: Any, grid: Any, num_threads: int, body: Any,
               block_vars: Any = None, span: Span | None = None) -> BlockProgram:
        """Normalise: grid entries become Exprs, `block_vars` may be names (default bi, bj, bk)
        or Vars, `body` may be a list of statements."""
        grid = tuple(as_expr(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        if block_vars is None:
            block_vars = _DEFAULT_BLOCK_VARS[: len(grid)]
        bvars = tuple(v if isinstance(v, Var) else Var.create(v) for v in block_vars)
        if isinstance(body, (list, tuple)):
            body = SeqStmt.create(body)
        return cls(name, tuple(params), grid, int(num_threads), bvars, body, user_span(span))

    def verify(self) -> None:
        """Check shapes, dtypes, layouts, thread counts and offsets (TC6xx at the line)."""
        from .verifier import verify

        verify(self)

    def run(self, *args: Any) -> None:
        """Run on the CPU virtual machine: numpy arrays (written in place) and numbers."""
        from .vm import run

        run(self, list(args))

    def script(self) -> str:
        """The program as Tilus-style script."""
        from .printer import program_str

        return program_str(self)

    def __str__(self) -> str:
        return self.script()
