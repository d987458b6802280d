"""The VM semantics of `dot_shared` and `dot_wait_group` (block/dot_shared.py).

`dot_shared` computes exactly what `dot` computes on the same values: the logical tiles (shared
operands read through their layouts, transposed where the instruction says) go through the
interpreter's gemm rule, float64 products rounded to float32 (vm_ops.py `_dot`).

Asynchronous ones: the result is computed when issued (a and b cannot change while it is
pending, that is an error) and kept in a group; `dot_wait_group(n)` completes the oldest groups
until n remain, writing their results to `out`. While a group is pending, any instruction that
reads or writes its `out` (or `c`), or writes its a or b, is TC611 at that instruction; an
asynchronous dot_shared whose c is out may accumulate into a pending out (it chains on the
pending value, as wgmma on one accumulator does).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.interp.values import store_cast
from tilecraft.ir import Gemm

from .dot_shared import DotShared, DotWaitGroup
from .instructions import Instruction
from .tensors import RegisterTensor, SharedTensor
from .verifier import _DEFINES
from .vm import BlockVM, shared_offsets
from .vm_ops import _run_tile_op, rule


@dataclass
class PendingDot:
    """One committed asynchronous dot_shared: its result, and what it must not see change."""

    instr: DotShared
    value: np.ndarray  # the logical result [M, N]
    span: Span | None
    operands: tuple  # the shared elements of a and b when issued (a shared_slice's name may
    # mean another stage later)


def _groups(vm: BlockVM) -> list[PendingDot]:
    return vm.dot_groups


def _logical(vm: BlockVM, t, trans: bool) -> np.ndarray:
    if isinstance(t, RegisterTensor):
        tile = vm.to_logical(t)
    else:
        pos = shared_offsets(t.layout)
        vm.check_pending(t, pos, "read")
        tile = vm.shared(t)[pos]
    return np.ascontiguousarray(tile.T if trans else tile)


def _pending_value(vm: BlockVM, out: RegisterTensor) -> np.ndarray | None:
    for g in reversed(_groups(vm)):
        if g.instr.out == out:
            return g.value
    return None


@rule(DotShared)
def _dot_shared(vm: BlockVM, s: DotShared) -> None:
    a, b = _logical(vm, s.a, s.trans_a), _logical(vm, s.b, s.trans_b)
    chained = _pending_value(vm, s.out) if s.asynchronous and s.c == s.out else None
    c = chained if chained is not None else vm.to_logical(s.c)
    acc = np.array(store_cast(s.out.dtype, c))
    m, n, k = s.mnk
    inputs = [(SimpleNamespace(name="a", shape=(m, k), dtype=s.a.dtype), a),
              (SimpleNamespace(name="b", shape=(k, n), dtype=s.b.dtype), b), (s.out, acc)]
    *_, result = _run_tile_op(vm, lambda x, y, z: Gemm(x, y, z), inputs)
    if s.asynchronous:
        mem = tuple(vm.smem[t] for t in (s.a, s.b) if isinstance(t, SharedTensor))
        _groups(vm).append(PendingDot(s, result, s.span, mem))
    else:
        vm.regs[s.out] = vm.to_threads(s.out, result)


@rule(DotWaitGroup)
def _dot_wait(vm: BlockVM, s: DotWaitGroup) -> None:
    groups = _groups(vm)
    while len(groups) > s.n:
        g = groups.pop(0)
        vm.regs[g.instr.out] = vm.to_threads(g.instr.out, g.value)


def _overlaps(vm: BlockVM, t: SharedTensor, g: PendingDot) -> bool:
    mem = vm.smem.get(t)  # shared_slice views of one tensor share its elements
    return mem is not None and any(np.shares_memory(mem, x) for x in g.operands)


def check_dot_pending(vm: BlockVM, s: Instruction) -> None:
    """TC611 when `s` touches what a pending asynchronous dot_shared reads or writes."""
    reads, writes = s.reads(), s.writes()
    for g in _groups(vm):
        d = g.instr
        for t in reads + writes:
            if isinstance(t, RegisterTensor) and t in (d.out, d.c):
                chain = isinstance(s, DotShared) and s.asynchronous and t == s.c == s.out \
                    and t == d.out
                if not chain:
                    access = "written" if t in writes and t not in reads else "read"
                    raise _error(t, access, "writes" if t == d.out else "reads", g)
        for t in writes:
            if isinstance(t, RegisterTensor) and t == d.a:
                raise _error(t, "written", "reads", g)
            if isinstance(s, _DEFINES):  # allocations and slices move no data
                continue
            if isinstance(t, SharedTensor) and _overlaps(vm, t, g):
                raise _error(t, "written", "reads", g)


def _error(t, access: str, role: str, g: PendingDot) -> TilecraftError:
    line = g.span.line if g.span is not None else "?"
    return TilecraftError("TC611", tensor=t.name, access=access, role=role, line=line)


__all__ = ["PendingDot", "check_dot_pending"]
