"""Verifier of block programs: every check raises a TC6xx TilecraftError at the instruction's span.

Requires: a `BlockProgram`. Guarantees, when it returns: every tensor is allocated (or a
parameter) before use, in scope; every register layout has its tensor's shape (TC601) and spans
the block's threads (TC602); loads/stores/copies give one offset per dimension and cover valid
dims with equal dtypes; arithmetic operands share out's layout and out has the op's dtype; casts
keep the layout; views keep the bits per thread (TC604); dot shapes agree (TC603).
"""

from __future__ import annotations

from collections.abc import Callable

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import For, If, LetStmt, SeqStmt, Stmt, While
from tilecraft.ir.visitor import walk
from tilecraft.layout import Fragment, LayoutError, check_view

from .compute import (
    BinaryOp,
    Cast,
    CastBytes,
    CastPlanes,
    Dot,
    Fma,
    ReduceRegister,
    UnaryOp,
    View,
    operands,
    result_dtype,
)
from .dot_shared import DotShared, check_dot_shared
from .instructions import AllocateGlobal, AllocateRegister, AllocateShared, Instruction, ViewGlobal
from .mbarrier import CopyAsyncBulk
from .parallel import AtomicGlobal
from .program import BlockProgram
from .roles import REGISTER_FILE, WarpRoles
from .tensors import GlobalTensor, RegisterTensor, SharedTensor
from .transfer import (
    CopyAsync,
    LoadGlobal,
    LoadShared,
    SharedSlice,
    StoreGlobal,
    StoreShared,
    Tiled,
)

_DEFINES = (AllocateRegister, AllocateShared, AllocateGlobal, ViewGlobal, SharedSlice)
_CHECKS: dict[type, Callable] = {DotShared: check_dot_shared}


def _check(*classes: type):
    def deco(fn):
        for c in classes:
            _CHECKS[c] = fn
        return fn

    return deco


def _bad(s: Instruction, detail: str) -> TilecraftError:
    name = s.name if isinstance(s, (BinaryOp, Fma, UnaryOp)) else s.NAME  # `add`, `exp`, ...
    return TilecraftError("TC603", s.span, instr=name, detail=detail)


def verify(program: BlockProgram) -> None:
    """Raise the first TC6xx error of `program`; return None when it is well formed."""
    scope = {p for p in program.params if isinstance(p, GlobalTensor)}
    top = program.body.stmts if isinstance(program.body, SeqStmt) else (program.body,)
    for s in walk(program.body):  # the split ends the kernel: no thread returns from a role
        if isinstance(s, WarpRoles) and s is not top[-1]:
            raise TilecraftError("TC603", s.span, instr="warp_roles",
                                 detail="warp_roles must be the last statement of the kernel's "
                                 "body, outside any loop or branch")
    _stmt(program, program.body, scope)


def _stmt(program: BlockProgram, s: Stmt, scope: set) -> None:
    if isinstance(s, SeqStmt):
        for c in s.stmts:
            _stmt(program, c, scope)
    elif isinstance(s, (For, While)):
        _stmt(program, s.body, set(scope))
    elif isinstance(s, WarpRoles):
        _roles(program, s, scope)
    elif isinstance(s, If):
        _stmt(program, s.then_body, set(scope))
        if s.else_body is not None:
            _stmt(program, s.else_body, set(scope))
    elif isinstance(s, Instruction):
        _instruction(program, s, scope)
    elif not isinstance(s, LetStmt):
        pass  # scalar statements (BufferStore, Evaluate) are the Tile IR's own


def _roles(program: BlockProgram, s: WarpRoles, scope: set) -> None:
    """Two roles: a producer of other than the block's thread count touches no register tensor,
    neither role nests another split, and the registers fit the register file."""
    for body in (s.producer, s.consumer):
        if any(isinstance(x, WarpRoles) for x in walk(body)):
            raise TilecraftError("TC603", s.span, instr="warp_roles", detail="a role splits again")
    for x in walk(s.producer):  # (register layouts span the block's num_threads threads)
        if s.producer_threads != program.num_threads and isinstance(x, Instruction) and any(
                isinstance(t, RegisterTensor) for t in x.reads() + x.writes()):
            raise _bad(x, f"the producer role of warp_roles ({s.producer_threads} threads) "
                       f"touches register tensors, whose layouts are over {program.num_threads}")
    if s.producer_threads % 128 or program.num_threads % 128:
        raise TilecraftError("TC603", s.span, instr="warp_roles",
                             detail=f"roles of {s.producer_threads} and {program.num_threads} "
                             "threads: each must be whole warpgroups (128 threads)")
    need = s.producer_threads * s.producer_regs + program.num_threads * s.consumer_regs
    if need > REGISTER_FILE:
        raise TilecraftError("TC603", s.span, instr="warp_roles",
                             detail=f"the roles ask for {need} registers, the SM has "
                             f"{REGISTER_FILE}")
    _stmt(program, s.producer, set(scope))
    _stmt(program, s.consumer, set(scope))


def _instruction(program: BlockProgram, s: Instruction, scope: set) -> None:
    defined = s.writes() if isinstance(s, _DEFINES) else ()
    used = (s.src,) if isinstance(s, SharedSlice) else ()  # (it reads no element)
    for t in s.reads() + s.writes() + used:
        if t not in scope and t not in defined:
            raise TilecraftError("TC606", s.span, tensor=t.name)
        if isinstance(t, RegisterTensor):
            _register(program, s, t)
    lay = getattr(s, "layout", None)  # `parallel` runs over a layout of its own
    if isinstance(lay, Fragment) and lay.num_threads != program.num_threads:
        raise TilecraftError("TC602", s.span, tensor=f"({s.NAME})", layout=repr(lay),
                             got=lay.num_threads, threads=program.num_threads)
    check = _CHECKS.get(type(s))
    if check is not None:
        check(s)
    scope.update(defined)


def _register(program: BlockProgram, s: Instruction, t: RegisterTensor) -> None:
    lay = t.layout
    if tuple(lay.shape) != tuple(t.shape):
        raise TilecraftError("TC601", s.span, tensor=t.name, layout=repr(lay),
                             layout_shape=list(lay.shape), shape=list(t.shape))
    if lay.num_threads != program.num_threads:
        raise TilecraftError("TC602", s.span, tensor=t.name, layout=repr(lay),
                             got=lay.num_threads, threads=program.num_threads)


@_check(ViewGlobal)
def _view_global(s: ViewGlobal) -> None:
    a, b = s.src.buffer, s.out.buffer
    na, nb = a.numel(), b.numel()
    if na is not None and nb is not None and na * a.dtype.bits != nb * b.dtype.bits:
        raise _bad(s, f"`{a.name}` holds {na} x {a.dtype.bits} bits, `{b.name}` "
                   f"{nb} x {b.dtype.bits} bits")


@_check(LoadGlobal, LoadShared, StoreGlobal, StoreShared, CopyAsync, AtomicGlobal, CopyAsyncBulk)
def _tiled(s: Tiled) -> None:
    tile, big = s.tile, s.whole
    if tile.dtype != big.dtype:
        raise _bad(s, f"`{tile.name}` is {tile.dtype} but `{big.name}` is {big.dtype} (moving "
                   "data does not convert; cast in registers)")
    if len(s.offset) != big.ndim:
        raise _bad(s, f"{len(s.offset)} offset(s) for the rank-{big.ndim} tensor `{big.name}`")
    for o in s.offset:
        if not o.dtype.is_integer:
            raise _bad(s, f"offset `{o}` is {o.dtype}, not an integer")
    dims = s.dims
    if len(dims) != tile.ndim or list(dims) != sorted(set(dims)) or \
            any(not 0 <= d < big.ndim for d in dims):
        raise _bad(s, f"the rank-{tile.ndim} tile `{tile.name}` cannot cover dims {list(dims)} "
                   f"of the rank-{big.ndim} tensor `{big.name}` (increasing, one per tile dim)")
    for d, extent in zip(dims, tile.shape):  # global tiles may run past the end (clipped)
        size = big.shape[d]
        if isinstance(big, SharedTensor) and extent > size:
            raise _bad(s, f"the tile `{tile.name}` takes {extent} elements of dimension {d} of "
                       f"`{big.name}`, which has {size}")


def _same_layout(s: Instruction, a: RegisterTensor, b: RegisterTensor) -> None:
    if a.layout != b.layout:
        raise _bad(s, f"`{a.name}` has layout {a.layout!r} but `{b.name}` has {b.layout!r} "
                   "(element-wise instructions keep the layout)")


def _broadcast(s, small: RegisterTensor, out: RegisterTensor) -> None:
    """`small` broadcasts to out's shape and every thread holds what it reads of it."""
    from .broadcast import broadcast_slots, broadcastable

    if not broadcastable(tuple(small.shape), tuple(out.shape)):
        raise _bad(s, f"`{small.name}` of shape {list(small.shape)} does not broadcast to "
                   f"{list(out.shape)} (same rank, each extent equal or 1)")
    if (broadcast_slots(out.layout, small.layout) < 0).any():
        raise _bad(s, f"the layout {small.layout!r} of `{small.name}` does not give every "
                   f"thread the elements it broadcasts to the elements it holds of "
                   f"{out.layout!r} (reduce with keepdim over the same layout)")


@_check(BinaryOp, Fma, UnaryOp)
def _elementwise(s: BinaryOp | Fma | UnaryOp) -> None:
    args = operands(s)
    tensors = [x for x in args if isinstance(x, RegisterTensor)]
    if not tensors:
        raise _bad(s, "needs at least one register tensor operand")
    for t in tensors:
        if tuple(t.shape) != tuple(s.out.shape) and isinstance(s, (BinaryOp, Fma)):
            _broadcast(s, t, s.out)
        else:
            _same_layout(s, t, s.out)
    want = result_dtype(s.op, args)
    if s.out.dtype != want:
        raise _bad(s, f"`{s.name}` of these operands is {want}, but `{s.out.name}` is "
                   f"{s.out.dtype} (convert with a separate cast)")


@_check(Cast)
def _cast(s: Cast) -> None:
    from tilecraft.layout.permute import local_permutation

    if s.src.layout != s.out.layout and local_permutation(s.src.layout, s.out.layout) is None:
        raise _bad(s, f"`{s.src.name}` has layout {s.src.layout!r} but `{s.out.name}` has "
                   f"{s.out.layout!r}: a cast may reorder each thread's elements (the same way "
                   "in every thread), not move them between threads")


@_check(CastPlanes)
def _cast_planes(s: CastPlanes) -> None:
    from tilecraft.layout.permute import local_permutation

    t, hi, lo = s.dtype, s.hi.dtype, s.lo.dtype
    if not t.is_float or t.has_nan or t.has_inf or t.bits > 8:
        raise _bad(s, f"{t} is not a float of at most 8 bits with every code finite")
    if hi.kind != "uint" or lo.kind != "uint" or hi.bits + lo.bits != t.bits:
        raise _bad(s, f"the planes {hi} and {lo} (unsigned, top bits first) do not make "
                   f"{t.bits}-bit codes")
    for x in (s.hi, s.lo):
        if tuple(x.shape) != tuple(s.out.shape) or (
                x.layout != s.out.layout and local_permutation(x.layout, s.out.layout) is None):
            raise _bad(s, f"`{x.name}` {list(x.shape)} ({x.layout!r}) does not hold the elements "
                       f"of `{s.out.name}` {list(s.out.shape)} ({s.out.layout!r}) in each thread")


@_check(CastBytes)
def _cast_bytes(s: CastBytes) -> None:
    out, size = s.out.layout, 4 * s.dtype.bits
    if out.local_size % 32:
        raise _bad(s, f"`{s.out.name}` holds {out.local_size} elements a thread: {s.dtype} "
                   f"codes in bytes come in groups of 32 ({size} bytes)")
    if not s.parts:
        raise _bad(s, "no parts: the bytes come from one or more uint8 register tensors")
    groups, per_group = out.local_size // 32, 0
    for x in s.parts:
        if x.dtype.name != "uint8" or x.layout.num_threads != out.num_threads \
                or x.layout.local_size % groups:
            raise _bad(s, f"part `{x.name}` ({x.dtype}, {x.layout!r}) is not uint8 bytes over "
                       f"the {out.num_threads} threads of `{s.out.name}` in {groups} equal groups")
        per_group += x.layout.local_size // groups
    if per_group != size:
        raise _bad(s, f"the parts give each group of 32 codes {per_group} bytes, not {size}")


@_check(View)
def _view(s: View) -> None:
    try:
        check_view(s.src.layout, s.src.dtype.bits, s.out.layout, s.out.dtype.bits)
    except LayoutError as err:
        raise TilecraftError("TC604", s.span, tensor=s.src.name,
                             target=f"{s.out.dtype} `{s.out.name}` ({s.out.layout!r})",
                             detail=str(err)) from None


@_check(Dot)
def _dot(s: Dot) -> None:
    a, b, c, out = s.a, s.b, s.c, s.out
    if any(t.ndim != 2 for t in (a, b, c, out)):
        raise _bad(s, "a, b, c and out must be rank-2 tiles")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or tuple(c.shape) != (m, n) or tuple(out.shape) != (m, n):
        raise _bad(s, f"a{list(a.shape)} @ b{list(b.shape)} + c{list(c.shape)} -> "
                   f"out{list(out.shape)}: need a[M, K], b[K, N], c and out [M, N]")
    if c.dtype != out.dtype:
        raise _bad(s, f"c is {c.dtype} but out is {out.dtype}")
    _same_layout(s, c, out)


@_check(ReduceRegister)
def _reduce(s: ReduceRegister) -> None:
    src, out = s.src, s.out
    if not 0 <= s.dim < src.ndim:
        raise _bad(s, f"dim {s.dim} of the rank-{src.ndim} tensor `{src.name}`")
    dropped = tuple(x for d, x in enumerate(src.shape) if d != s.dim)
    kept = tuple(1 if d == s.dim else x for d, x in enumerate(src.shape))
    if tuple(out.shape) not in (dropped, kept) and not (dropped == () and out.shape == (1,)):
        raise _bad(s, f"reducing `{src.name}`{list(src.shape)} over dim {s.dim} gives "
                   f"{list(dropped)}, but `{out.name}` has shape {list(out.shape)}")
