"""Instruction selection for block programs by layout division (Tilus section 7).

`select_instructions(program)` returns a typed plan per instruction it can map onto a hardware
instruction; the printer prints the plan and falls back to its SIMT form where there is none.

`dot` on mma.sync m16n8k16 (f16 x f16 or bf16 x bf16 -> f32): the operand layouts must be the
atom's layouts times an outer layout over the warps (`A = qa * atom.a`, `B = qb * atom.b`,
`C = qc * atom.c`, found by division), and for every register block `lc` of C and every k block,
each warp must hold the A and B blocks that C block needs at one register block index, the same
on every warp (replicas allowed). The plan lists, per C block in order, its k steps: (C block,
A block, B block) register-block indices.

    ACC = spatial(4, 1) * atom.c     A = spatial(4, 1) * atom.a     B = replicate(4) * atom.b
    -> qc = spatial(4, 1), one C block per warp, one k step: [(0, 0, 0)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilecraft.ir.simplify import linear_form
from tilecraft.layout.algebra import quotient
from tilecraft.layout.atoms import MMA_M16N8K16_F16, MmaAtom

from .compute import Dot
from .program import BlockProgram
from .tensors import SharedTensor
from .transfer import CopyAsync, LoadGlobal, LoadShared, StoreGlobal, StoreShared

_MMA_FUNCS = {("float16", "float32"): "tc::mma_m16n8k16_f16_f32",
              ("bfloat16", "float32"): "tc::mma_m16n8k16_bf16_f32"}


@dataclass(frozen=True)
class MmaPlan:
    """`dot` as mma.sync: `func` on the register blocks `steps` (C block, A block, B block)."""

    atom: MmaAtom
    func: str
    steps: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class CopyAsyncPlan:
    """`copy_async` as cp.async.cg of 16-byte chunks of `chunk` elements (zero-filled where the
    source is out of bounds); the source tensor's data pointer must be 16-byte aligned."""

    chunk: int
    tensor: str  # the global tensor's name (its pointer alignment becomes a launch check)


@dataclass(frozen=True)
class VectorPlan:
    """A load/store moving `width` consecutive elements per access (each thread's registers
    g*width .. g*width+width-1 are consecutive along the tile's last dimension); `tensor`, a
    global tensor's name, gets a pointer alignment check of `width` elements (None: shared)."""

    width: int
    tensor: str | None


@dataclass(frozen=True)
class FromSharedPlan:
    """A dot on mma.sync whose operands come straight from `load_shared` instructions just
    before it (a transposed operand through a `view` of the loaded tile): per k step, each
    operand register block that step needs is loaded once (ldmatrix where it delivers the
    layout's registers, else element by element: block/ldmatrix.py), then the step's mmas
    run; the loads run `ahead` k steps before the mmas that use them (register double
    buffering). The loads, views and the operands' allocations are `Fused` (not printed on
    their own)."""

    mma: MmaPlan
    loads: dict  # operand tensor -> the LoadShared instruction that fills it
    tiles: dict  # operand tensor -> the tensor that load fills (the operand, or what it views)
    ksteps: tuple  # ldmatrix.KStep per k step
    bases: dict  # operand -> the Ldmatrix whose lane address its others are relative to
    ahead: int = 1


@dataclass(frozen=True)
class Fused:
    """An instruction printed as part of another one's plan."""

    into: int  # id of that instruction
    where: str = "the dot below"  # (the comment left in its place)


def select_instructions(program: BlockProgram, target=None) -> dict[int, object]:
    """id(instruction) -> its plan, for the instructions a hardware instruction computes
    (`target`, a tilecraft.targets.Target: what it has, e.g. wgmma; None: none of that)."""
    from tilecraft.ir import SeqStmt
    from tilecraft.ir.visitor import walk

    from .dot_shared import DotShared
    from .ldst_matrix import MatrixSelector
    from .mbarrier import CopyAsyncBulk
    from .select_cast import Cast, select_cast
    from .select_tma import select_tma
    from .select_wgmma import select_dot_shared

    plans: dict[int, object] = {}
    matrix = MatrixSelector(program, target)  # ldmatrix / stmatrix (ldst_matrix.py)
    lets = _let_values(program)
    for s in walk(program.body):
        plan = None
        if isinstance(s, Dot):
            plan = select_dot(s, program.num_threads)
        elif isinstance(s, DotShared):
            plan = select_dot_shared(s, program.num_threads, target)
        elif isinstance(s, CopyAsync):
            plan = select_copy_async(s, lets)
        elif isinstance(s, CopyAsyncBulk):
            plan = select_tma(s.dst, s.src, s.dims, s.offset)
        elif isinstance(s, Cast):
            plan = select_cast(s, target)  # fast register casts (select_cast.py)
        elif isinstance(s, (LoadGlobal, StoreGlobal, LoadShared, StoreShared)):
            plan = matrix.select(s) or select_vector(s, lets)
        if plan is not None:
            plans[id(s)] = plan
    readers = _readers(program)
    for seq in walk(program.body):
        if isinstance(seq, SeqStmt):
            _fuse_cast_readers(seq.stmts, plans, readers, target)
            _fuse_plane_sums(seq.stmts, plans, readers)
            _fuse_operand_loads(seq.stmts, plans)
    return plans


def _let_values(program: BlockProgram) -> dict:
    """let variable -> its value with the lets it uses expanded (a variable is bound once), so
    an offset through lets (`g0 = bs * 64`, `S[.., g0]`) shows its linear form."""
    from tilecraft.ir import LetStmt
    from tilecraft.ir.rewrite import substitute
    from tilecraft.ir.visitor import walk

    lets = {s.var: s.value for s in walk(program.body) if isinstance(s, LetStmt)}
    for _ in range(8):  # (nested lets: a few rounds reach the fixpoint)
        expanded = {v: substitute(e, lets) for v, e in lets.items()}
        if all(expanded[v] is lets[v] for v in lets):
            break
        lets = expanded
    return lets


def _offset_form(offset, lets: dict | None):
    """linear_form of `offset` with its lets expanded."""
    from tilecraft.ir.rewrite import substitute

    return linear_form(substitute(offset, lets) if lets else offset)


def _readers(program: BlockProgram) -> dict:
    """tensor -> the instructions that read it, over the whole program."""
    from tilecraft.ir.visitor import walk

    out: dict = {}
    for s in walk(program.body):
        reads = getattr(s, "reads", None)
        if callable(reads):
            for t in reads():
                out.setdefault(t, []).append(s)
    return out


def _fuse_cast_readers(stmts, plans: dict, readers: dict, target) -> None:
    """A fast cast whose only reader, later in the same sequence, subtracts a whole constant
    or multiplies by a power of two, or subtracts per-element whole zero points
    (`fused_codes`), nothing writing the cast's sources in between: that reader prints as the
    cast with the constant joined to its trick (select_cast.fused_reader). A `cast_bytes` of
    integer codes likewise takes per-element zero points into its per-pair subtrahends
    (select_cast.fused_bytes_codes: the quantized matmul's zero codes)."""
    from .compute import CastBytes
    from .select_cast import Cast, CastPlan, fused_bytes_codes, fused_codes, fused_reader

    for i, cast in enumerate(stmts):
        plan = plans.get(id(cast))
        fast = isinstance(cast, Cast) and isinstance(plan, CastPlan)
        if not fast and not (isinstance(cast, CastBytes) and plan is None):
            continue
        users = readers.get(cast.out, [])
        if len(users) != 1:
            continue
        sub = users[0]
        j = next((j for j in range(i + 1, len(stmts)) if stmts[j] is sub), None)
        sources = (cast.src,) if fast else cast.parts
        if j is None or any(t in _writes(x) for x in stmts[i + 1:j] for t in sources):
            continue
        fused = fused_reader(sub, cast, plan, target) if fast else None
        if fused is None:  # per-element zero points, unchanged from their cast to `sub`
            made = {t: x for x in stmts[:j] for t in _writes(x)}  # (the last writer)
            fused = fused_codes(sub, cast, plan, made) if fast else \
                fused_bytes_codes(sub, cast, made)
            if fused is not None:
                k = next(k for k, x in enumerate(stmts[:j]) if x is made[sub.b])
                if any(fused.codes in _writes(x) for x in stmts[k + 1:j]):
                    fused = None
        if fused is not None:
            plans[id(sub)] = fused
            what = "multiplication" if getattr(fused, "scale", 0) else \
                "subtraction of its zero point"
            plans[id(cast)] = Fused(id(sub), f"the {what} below")


def _fuse_plane_sums(stmts, plans: dict, readers: dict) -> None:
    """An add of bit planes' fast casts (each times its weight, the last minus a zero point)
    prints as one cast of the planes (select_planes.py); the outermost add of a chain is taken
    first, its inner adds, casts and their fused readers print inside it. (Measured on the
    quantized matmul: 3.5-6% faster at decode, 1-13% at M = 4096, benchmarks/NOTES.md session
    17.)"""
    from .select_planes import plane_sum

    writers: dict = {}
    for i, s in enumerate(stmts):
        for t in _writes(s):
            writers.setdefault(t, []).append((i, s))
    for at in reversed(range(len(stmts))):
        s = stmts[at]
        if id(s) in plans:
            continue
        plan = plane_sum(s, at, stmts, plans, readers, writers)
        if plan is not None:
            plans[id(s)] = plan
            for part in plan.parts:
                plans[part] = Fused(id(s), "the plane sum below")


def _writes(s) -> set:
    from tilecraft.ir.visitor import walk

    out = set()
    for x in walk(s):
        writes = getattr(x, "writes", None)
        if callable(writes):
            out.update(writes())
    return out


def _fuse_operand_loads(stmts, plans: dict) -> None:
    """A dot with an mma plan, preceded (with nothing but allocations, loads, views and
    barriers in between: no shared memory changes) by the load_shared of an operand (or of a
    tile the operand views, same dtype: the same registers) that nothing else reads: the dot
    loads the operand's blocks itself, k step by k step."""
    from .compute import View
    from .instructions import AllocateRegister, Synchronize
    from .ldmatrix import plan_operand_loads

    for i, dot in enumerate(stmts):
        if not isinstance(dot, Dot) or not isinstance(plans.get(id(dot)), MmaPlan):
            continue
        loads, views = {}, {}  # operand -> load; viewed tile -> (operand, view)
        for prev in reversed(stmts[:i]):
            if isinstance(prev, View) and prev.out in (dot.a, dot.b) \
                    and prev.src.dtype == prev.out.dtype and prev.out not in loads:
                views[prev.src] = (prev.out, prev)
            elif isinstance(prev, LoadShared) and prev.out in (dot.a, dot.b):
                loads.setdefault(prev.out, prev)
            elif isinstance(prev, LoadShared) and prev.out in views:
                loads.setdefault(views[prev.out][0], prev)
            elif not isinstance(prev, (LoadShared, AllocateRegister, Synchronize, View)):
                break
        tiles = {op: ld.out for op, ld in loads.items()}
        used = [v for t, (op, v) in views.items() if tiles.get(op) == t]
        fused = set(tiles) | set(tiles.values())
        allocs = {s.out: s for s in stmts[:i] if isinstance(s, AllocateRegister) and s.out in fused}
        users = [s for s in stmts
                 if s is not dot and not any(s is v for v in used) and _reads(s) & fused]
        if not loads or users or len(allocs) != len(fused) or dot.out in fused:
            continue
        nt = dot.out.layout.num_threads  # the block's (verified)
        mma = plans[id(dot)]
        steps, bases = plan_operand_loads(dot, mma, {op: (loads[op], tiles[op]) for op in loads},
                                          nt)
        plans[id(dot)] = FromSharedPlan(mma, loads, tiles, steps, bases)
        for s in (*loads.values(), *used, *allocs.values()):
            plans[id(s)] = Fused(id(dot))


def _reads(s) -> set:
    from tilecraft.ir.visitor import walk

    out = set()
    for x in walk(s):
        reads = getattr(x, "reads", None)
        if callable(reads):
            out.update(t for t in reads() if hasattr(t, "layout"))
    return out


def select_copy_async(s: CopyAsync, lets: dict | None = None) -> CopyAsyncPlan | None:
    """16-byte chunks when every chunk is whole on both sides: the tile's last dimension is the
    source's rows (a multiple of the chunk long, its offset provably a multiple of the chunk),
    and the shared layout keeps each chunk's elements consecutive from a multiple of the chunk
    (a 16-byte swizzle does)."""
    bits = s.dst.dtype.bits
    if bits not in (8, 16, 32) or s.src.dtype != s.dst.dtype:
        return None
    chunk = 128 // bits
    shape = [d if isinstance(d, int) else None for d in s.src.buffer.shape]
    dst = [int(d) for d in s.dst.shape]
    if None in shape or s.dims[-1] != len(shape) - 1 or shape[-1] % chunk or dst[-1] % chunk:
        return None
    form = _offset_form(s.offset[-1], lets)
    if form is None or form[1] % chunk or any(c % chunk for c in form[0].values()):
        return None
    offs = np.asarray(s.dst.layout.offsets()).reshape(-1, chunk)
    if (offs[:, 0] % chunk).any() or ((offs - offs[:, :1]) != np.arange(chunk)).any():
        return None
    return CopyAsyncPlan(chunk, s.src.buffer.name)


def select_dot(s: Dot, num_threads: int) -> MmaPlan | None:
    a, b, c, out = s.a, s.b, s.c, s.out
    func = _MMA_FUNCS.get((a.dtype.name, c.dtype.name))
    if func is None or b.dtype != a.dtype or out.dtype != c.dtype or out.layout != c.layout:
        return None
    atom = MMA_M16N8K16_F16
    qa, qb, qc = (quotient(t.layout, f) for t, f in ((a, atom.a), (b, atom.b), (c, atom.c)))
    warps = num_threads // 32
    if None in (qa, qb, qc) or any(q.num_threads != warps for q in (qa, qb, qc)):
        return None
    (mq, kq), (kq_b, nq) = qa.shape, qb.shape
    if kq_b != kq or tuple(qc.shape) != (mq, nq):
        return None
    steps = []
    for lc in range(qc.local_size):
        for k in range(kq):
            blocks = set()
            for w in range(warps):
                i, j = qc.map(w, lc)
                la = next((x for x in range(qa.local_size) if qa.map(w, x) == (i, k)), None)
                lb = next((x for x in range(qb.local_size) if qb.map(w, x) == (k, j)), None)
                if la is None or lb is None:
                    return None
                blocks.add((la, lb))
            if len(blocks) != 1:  # the register block would depend on the warp
                return None
            steps.append((lc, *blocks.pop()))
    return MmaPlan(atom, func, tuple(steps))


_TRANSFER_SIDES = {LoadGlobal: ("out", "src"), LoadShared: ("out", "src"),
                   StoreGlobal: ("src", "dst"), StoreShared: ("src", "dst")}


def select_vector(s, lets: dict | None = None) -> VectorPlan | None:
    """The widest vector (up to 16 bytes) for which every thread's register groups are
    consecutive elements of the tile's last dimension, which is the memory tensor's rows (a
    multiple of the vector long, the tile's offset provably aligned, and for shared memory a
    layout that keeps each group consecutive from an aligned offset)."""
    reg_name, mem_name = _TRANSFER_SIDES[type(s)]
    reg, mem = getattr(s, reg_name), getattr(s, mem_name)
    bits = reg.dtype.bits
    if bits not in (8, 16, 32, 64) or mem.dtype != reg.dtype or s.dims[-1] != mem.ndim - 1:
        return None
    shape = [d if isinstance(d, int) else None for d in mem.buffer.shape]
    if None in shape:
        return None
    idx = reg.layout.index_table()  # [threads, local, ndim]
    form = _offset_form(s.offset[-1], lets)
    width = 128 // bits
    while width > 1:
        if _groups_consecutive(idx, width) and shape[-1] % width == 0 and form is not None \
                and form[1] % width == 0 and not any(c % width for c in form[0].values()) \
                and (not isinstance(mem, SharedTensor) or _shared_groups(mem, width)):
            return VectorPlan(width, None if isinstance(mem, SharedTensor) else mem.buffer.name)
        width //= 2
    return None


def _groups_consecutive(idx: np.ndarray, width: int) -> bool:
    threads, local, _ = idx.shape
    if local % width:
        return False
    g = idx.reshape(threads, local // width, width, -1)
    start = g[:, :, :1, :]
    step = np.zeros(g.shape[-1], np.int64)
    step[-1] = 1
    want = start + np.arange(width)[None, None, :, None] * step
    return bool((g == want).all() and (start[..., -1] % width == 0).all())


def _shared_groups(t: SharedTensor, width: int) -> bool:
    offs = np.asarray(t.layout.offsets())
    if offs.shape[-1] % width:
        return False
    offs = offs.reshape(-1, width)
    return bool(((offs - offs[:, :1]) == np.arange(width)).all() and not (offs[:, 0] % width).any())
