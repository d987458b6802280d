"""ldmatrix for the operands of a dot on mma.sync that reads them from shared memory.

Requires a dot with an `MmaPlan` whose operands come from `load_shared` (possibly through a
`view`, as a transposed operand does): `FromSharedPlan` (select.py). Guarantees a plan, grouped
by k step, that loads every register block of the operands each k step needs once, then runs
that k step's mmas; each block (or group of blocks: the four 8x8 matrices of one A block, the
two of each of two B blocks) is loaded by one `ldmatrix.x{4,2}[.trans]` where that instruction
delivers exactly the registers the load's layout says, else by scalar loads (`ScalarBlock`).

What ldmatrix delivers (PTX ISA, m8n8 .b16): lane l gives the address of row l % 8 of matrix
l // 8 (16 contiguous bytes, 16-byte aligned); thread t receives in its u32 q (two b16,
registers r, r + 1) row t // 4, columns 2 (t % 4) + {0, 1} of matrix q, or with .trans the
transpose: rows 2 (t % 4) + {0, 1}, column t // 4. The check evaluates this on the shared
offsets of every (thread, register) of the load (the register layout, the load's offset and
the shared layout with its swizzle), for every warp of the block:

    A block b in atom.a, A_s row-major (swizzled):  x4,       regs (8b, 8b + 2, 8b + 4, 8b + 6)
    B blocks b, b' in atom.b, B_s stored [K, N]:     x4.trans, regs (4b, 4b + 2, 4b', 4b' + 2)

Lane l's row address is the shared offset of an element some thread of its warp holds: the
one at register `regs[l // 8]` (+ l % 2 with .trans) of lane (l % 8) * 4 (.trans: (l % 8) / 2).
The plan records these as `LaneTerm`s; the printer prints the element's offset through the
same layouts (`frag_coords`, the shared layout's offset function). Per operand, one lane
address (the first ldmatrix's) is printed in full and the others as `(base ^ X) + Y`
(`relative_addresses`: checked on every thread), one address register per operand.

The check (`find_move`, `delivers`, `shared_offsets`, `relative_addresses`) is shared with a
load_shared or store_shared on its own (ldst_matrix.py: ldmatrix, and stmatrix on sm_90).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from tilecraft.ir.expr import const_int
from tilecraft.layout.algebra import quotient

from .tensors import RegisterTensor


@dataclass(frozen=True)
class LaneTerm:
    """`(lane / div % mod) * mul` of the lane (tid % 32)."""

    div: int
    mod: int
    mul: int

    def __call__(self, lane):
        return (lane // self.div) % self.mod * self.mul


@dataclass(frozen=True)
class MatrixMove:
    """One warp-wide move of `len(regs)` 8x8 b16 matrices between shared memory and registers:
    matrix q is registers regs[q], regs[q] + 1 of `operand` (`func`: tc::{OP}_x{num}[_trans]).
    Lane l's row address: the shared element that the thread of lane sum(lane_thread)(l) of
    the same warp holds at register regs[0] + sum(lane_register)(l)."""

    operand: RegisterTensor
    func: str
    trans: bool
    regs: tuple[int, ...]
    lane_thread: tuple[LaneTerm, ...]
    lane_register: tuple[LaneTerm, ...]
    xor: int | None = None  # not None: lane address = (the operand's base ^ xor) + add
    add: int = 0
    OP: ClassVar[str] = ""


@dataclass(frozen=True)
class Ldmatrix(MatrixMove):
    """ldmatrix (sm_75+): the matrices from shared memory into the registers."""

    OP: ClassVar[str] = "ldmatrix"


@dataclass(frozen=True)
class ScalarBlock:
    """Register block `block` (`size` registers) of `operand`, loaded element by element."""

    operand: RegisterTensor
    block: int
    size: int


@dataclass(frozen=True)
class KStep:
    """The loads of one k step's operand blocks, then its mma steps (C, A, B blocks)."""

    loads: tuple[Ldmatrix | ScalarBlock, ...]
    mmas: tuple[tuple[int, int, int], ...]


def plan_operand_loads(dot, mma, tiles: dict, num_threads: int):
    """(k steps, bases): the k steps of `mma` (an MmaPlan of `dot`) with the loads of the
    operands in `tiles` (operand -> (its load_shared, the tensor the load fills: the operand or
    what it views)); per operand, the ldmatrix whose lane address the others are relative to."""
    qa = quotient(dot.a.layout, mma.atom.a)
    order: dict[int, list] = {}
    for step in mma.steps:
        order.setdefault(int(qa.map(0, step[1])[1]), []).append(step)
    offs = {op: shared_offsets(load, tile, num_threads) for op, (load, tile) in tiles.items()}
    out = []
    for k in sorted(order):
        steps = order[k]
        loads: list = []
        for pos, operand, atom in ((1, dot.a, mma.atom.a), (2, dot.b, mma.atom.b)):
            if operand in tiles:
                blocks = list(dict.fromkeys(s[pos] for s in steps))
                loads += _blocks(operand, offs[operand], blocks, atom.local_size)
        out.append(KStep(tuple(loads), tuple(steps)))
    bases = {}
    for op, (load, _) in tiles.items():
        const = all(const_int(o) is not None for o in load.offset)
        base, rel = relative_addresses([x for k in out for x in k.loads
                                        if isinstance(x, Ldmatrix) and x.operand == op],
                                       offs[op], const)
        if base is not None:
            bases[op] = base
            out = [KStep(tuple(rel.get(id(x), x) for x in k.loads), k.mmas) for k in out]
    return tuple(out), bases


def lane_addresses(plan: MatrixMove, offs: np.ndarray) -> np.ndarray:
    """[threads]: the row address (element offset) each thread supplies."""
    threads, nregs = offs.shape
    lane = np.arange(32)
    holder = sum(t(lane) for t in plan.lane_thread)
    reg = plan.regs[0] + sum((t(lane) for t in plan.lane_register), np.zeros(32, np.int64))
    return offs.reshape(threads // 32, 32, nregs)[:, holder, reg].reshape(-1)


def relative_addresses(loads: list, offs, xor_ok: bool):
    """(base, {id(load): load with xor/add}): each load's lane addresses as (base ^ X) + Y of
    the first one's, X and Y the same on every thread (a swizzle flips chunk bits, whole swizzle
    periods add), as CUTLASS's swizzled iterators keep one address register per operand. X
    only when `xor_ok` (no symbolic offset that XOR would have to commute with)."""
    if len(loads) < 2:
        return None, {}
    base = lane_addresses(loads[0], offs)
    addrs = [lane_addresses(x, offs) for x in loads]

    def const(v: np.ndarray) -> int | None:
        return int(v[0]) if (v == v[0]).all() else None

    xs = {0} | ({c for a in addrs if (c := const(a ^ base)) is not None} if xor_ok else set())
    out = {}
    for x, a in zip(loads, addrs):
        for cx in sorted(xs):
            cy = const(a - (base ^ cx))
            if cy is not None:
                out[id(x)] = replace(x, xor=cx, add=cy)
                break
    return loads[0], out


def _blocks(operand, offs, blocks: list[int], n: int) -> list:
    """ldmatrix.x4 over groups of blocks holding four matrices (n / 2 each), else one
    ldmatrix per block, else scalar loads."""
    per = n // 2  # matrices (u32 registers) per block
    group = 4 // per if per in (1, 2, 4) else 0
    out: list = []
    for g in range(0, len(blocks), max(group, 1)):
        chunk = blocks[g:g + group] if group else blocks[g:g + 1]
        if len(chunk) > 1 and len(chunk) == group:
            found = find_move(operand, offs, tuple(b * n + 2 * q for b in chunk
                                                   for q in range(per)))
            if found is not None:
                out.append(found)
                continue
        for b in chunk:
            one = find_move(operand, offs, tuple(b * n + 2 * q for q in range(per)))
            out.append(one if one is not None else ScalarBlock(operand, b, n))
    return out


def find_move(operand, offs, regs: tuple[int, ...], cls: type = Ldmatrix) -> MatrixMove | None:
    """A `cls` move (Ldmatrix, or ldst_matrix.Stmatrix) of the matrices at register pairs
    `regs` of `operand` that moves exactly the elements at their shared offsets `offs`
    ([threads, registers]), plain or .trans (`delivers`); None when neither does."""
    num = len(regs)
    if offs is None or num not in (1, 2, 4):
        return None
    d1 = regs[1] - regs[0] if num > 1 else 0
    d2 = regs[2] - regs[0] if num == 4 else 0
    if num == 4 and regs[3] - regs[2] != d1:
        return None  # the matrix's register is not affine in the lane's digits
    for trans in (False, True):
        reg_terms = [LaneTerm(8, 2, d1)] if num > 1 else []
        reg_terms += [LaneTerm(16, 2, d2)] if num == 4 else []
        reg_terms += [LaneTerm(1, 2, 1)] if trans else []
        thread = (LaneTerm(2, 4, 1),) if trans else (LaneTerm(1, 8, 4),)
        plan = cls(operand, f"tc::{cls.OP}_x{num}{'_trans' if trans else ''}", trans, regs,
                   thread, tuple(t for t in reg_terms if t.mul))
        if delivers(plan, offs):
            return plan
    return None


def delivers(plan: MatrixMove, offs: np.ndarray) -> bool:
    """True when `plan` moves, for every thread and every register of `plan.regs` (and the
    next), the element at its shared offset in `offs` ([threads, registers]): ldmatrix's
    semantics (stmatrix's are the same map, the other way) evaluated on the row addresses the
    lanes supply."""
    threads, nregs = offs.shape
    if threads % 32 or any(r % 2 or r + 1 >= nregs for r in plan.regs):
        return False
    o = offs.reshape(threads // 32, 32, nregs)
    lane = np.arange(32)
    rows = 8 * len(plan.regs)
    addr = lane_addresses(plan, offs).reshape(-1, 32)[:, :rows]  # each used lane's row
    if (addr % 8).any():  # 16 bytes of b16
        return False
    for q, r in enumerate(plan.regs):
        for e in (0, 1):
            if plan.trans:
                want = addr[:, 8 * q + 2 * (lane % 4) + e] + lane // 4
            else:
                want = addr[:, 8 * q + lane // 4] + 2 * (lane % 4) + e
            if not (o[:, :, r + e] == want).all():
                return False
    return True


def shared_offsets(load, tile: RegisterTensor, num_threads: int) -> np.ndarray | None:
    """[threads, registers] shared element offset of each register of `tile` (what `load`, a
    load_shared or store_shared, fills or stores), swizzle included. A non-constant offset of
    a dimension the tile does not cover must move every element by the same multiple of 16
    bytes (then it is taken as 0); None otherwise, or when the dtype is not 16-bit."""
    src = load.whole
    if src.dtype.bits != 16 or tile.layout.num_threads != num_threads:
        return None
    table = tile.layout.index_table()  # [threads, registers, tile dims]
    full = src.layout.offsets()
    idx = []
    for d, off in enumerate(load.offset):
        c = const_int(off)
        if c is None and (d in load.dims or not _separable(full, d)):
            return None
        idx.append(np.full(table.shape[:2], c or 0, np.int64))
    for k, d in enumerate(load.dims):
        idx[d] = idx[d] + table[..., k]
    shape = full.shape
    if any((i < 0).any() or (i >= n).any() for i, n in zip(idx, shape)):
        return None
    return full[tuple(idx)]


def _separable(full: np.ndarray, d: int) -> bool:
    delta = full - np.take(full, [0], axis=d)
    axes = tuple(a for a in range(full.ndim) if a != d)
    lo, hi = delta.min(axis=axes), delta.max(axis=axes)
    return bool((lo == hi).all() and not (lo % 8).any())
