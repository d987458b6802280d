"""ldmatrix / stmatrix for a `load_shared` / `store_shared` of its own (Tilus section 7:
selection by the layouts; select.py records the plan, codegen/block_cuda/ldst_matrix.py prints
it). A load_shared whose tile a dot reads straight away is fused into the dot instead
(ldmatrix.py's k-step plan); this is every other one.

Requires a load_shared (any target: ldmatrix is sm_75+) or a store_shared (sm_90+: stmatrix)
of a 16-bit register tile, shared tensor of the same dtype, run by every thread of the block
(not under control flow that differs between threads, offsets the same in every thread: a
warp-wide instruction). Guarantees a `MatrixPlan` whose moves cover every register of every
thread exactly once, each register pair (r, r + 1) one row piece of an 8x8 matrix, when that
holds for the load's layouts: the per-thread check of ldmatrix.py (`find_move`: the shared
offsets of every (thread, register) of the tile, offset and swizzle included, for every warp,
against ldmatrix's map of lanes to rows and registers, plain or .trans; stmatrix is the same
map the other way). Pairs are grouped greedily, x4 where four consecutive pairs move in one
instruction, else x2, else x1. None (the printer's vector or element loop) otherwise.

    load_shared(A_s f16[64, 16] row-major, out: spatial(4, 1) * mma.a)   -> 1 x ldmatrix.x4
    load_shared(B_s f16[16, 8] row-major, out: replicate(4) * mma.b)     -> 1 x ldmatrix.x2.trans
    store_shared(acc16: spatial(4, 1) * mma.c [64, 8], C_s), sm_90       -> 1 x stmatrix.x2
    store_shared(acc16, C_s) on sm_80, or rows of 9 elements               -> None

Each lane's row address is the shared offset of an element its warp holds (ldmatrix.py); the
first move's is printed in full, the others as (that ^ X) + Y where X and Y are the same on
every thread (`relative_addresses`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from tilecraft.ir.expr import const_int

from .ldmatrix import Ldmatrix, MatrixMove, find_move, relative_addresses, shared_offsets
from .tensors import SharedTensor
from .transfer import LoadShared, SharedSlice, StoreShared


@dataclass(frozen=True)
class Stmatrix(MatrixMove):
    """stmatrix (sm_90+): the matrices from the registers into shared memory."""

    OP: ClassVar[str] = "stmatrix"


@dataclass(frozen=True)
class MatrixPlan:
    """A load_shared as ldmatrix / a store_shared as stmatrix: `moves` cover the tile's
    registers once; `base` is the move whose lane address is printed in full (None: each move
    prints its own), the others carry `xor`/`add` relative to it."""

    moves: tuple[MatrixMove, ...]
    base: MatrixMove | None = None


def has_stmatrix(target) -> bool:
    """`target` (a tilecraft.targets.Target; None: nothing a chip may lack) compiles for
    sm_90 or later (its arch string decides: a Hopper chip compiled for sm_80 has none)."""
    m = re.match(r"sm_(\d+)", getattr(target, "arch", "") or "")
    return m is not None and int(m.group(1)) >= 90


class MatrixSelector:
    """Selects `MatrixPlan`s for the load_shared / store_shared of one program for `target`."""

    def __init__(self, program, target) -> None:
        from tilecraft.ir.visitor import walk

        self.program = program
        self.stmatrix = has_stmatrix(target)
        self.slices = {s.out: s for s in walk(program.body) if isinstance(s, SharedSlice)}
        self._threads = None

    def select(self, s) -> MatrixPlan | None:
        """The plan of `s` (a LoadShared or StoreShared), or None."""
        if isinstance(s, LoadShared):
            tile, cls = s.out, Ldmatrix
        elif isinstance(s, StoreShared) and self.stmatrix:
            tile, cls = s.src, Stmatrix
        else:
            return None
        shared = s.whole
        if tile.dtype != shared.dtype or tile.dtype.bits != 16 or tile.layout.local_size % 2:
            return None
        if not self.aligned(shared) or self.threads().per_thread(s):
            return None
        offs = shared_offsets(s, tile, self.program.num_threads)
        if offs is None:
            return None
        moves = cover(tile, offs, cls)
        if moves is None:
            return None
        const = all(const_int(o) is not None for o in s.offset)
        base, rel = relative_addresses(list(moves), offs, const)
        return MatrixPlan(tuple(rel.get(id(m), m) for m in moves), base)

    def aligned(self, t: SharedTensor) -> bool:
        """Offset 0 of `t` is 16-byte aligned: an allocation (the arena aligns it) or a slice
        whose leading strides keep it so."""
        while t in self.slices:
            sl = self.slices[t]
            lay = sl.src.layout
            k = sl.src.ndim - sl.out.ndim
            if any(lay.mode_strides[g[0]] * t.dtype.bits % 128 for g in lay.dim_modes[:k]):
                return False
            t = sl.src
        return True

    def threads(self):
        if self._threads is None:
            from .threads import ThreadValues

            self._threads = ThreadValues(self.program.body, self.program.thread_vars)
        return self._threads


def cover(tile, offs, cls: type) -> tuple[MatrixMove, ...] | None:
    """`cls` moves of all register pairs of `tile` in order, x4 where four consecutive pairs go
    in one, else x2, else x1; None when some pair is not a matrix row piece."""
    n = offs.shape[1]
    moves: list[MatrixMove] = []
    r = 0
    while r < n:
        for num in (4, 2, 1):
            move = find_move(tile, offs, tuple(r + 2 * q for q in range(num)), cls) \
                if r + 2 * num <= n else None
            if move is not None:
                moves.append(move)
                r += 2 * num
                break
        else:
            return None
    return tuple(moves)
