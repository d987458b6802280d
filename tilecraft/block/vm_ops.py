"""The semantics of each block instruction on the VM (vm.py), registered per instruction class.

Values have one meaning across tilecraft: arithmetic evaluates the Tile IR expression of the op
with the interpreter's evaluator (interp/evaluate.py), casts convert with the interpreter's
`store_cast`, and dot/reduce run the interpreter's own gemm/reduce rules (interp/ops) on the
logical tiles.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.evaluate import compute_type
from tilecraft.interp.ops import run_tile_op
from tilecraft.interp.packed import PackedArray, codes_of, is_packed, values_of, view_bytes
from tilecraft.interp.values import np_type, store_cast
from tilecraft.ir import Buffer, Gemm, Reduce, Var

from . import instructions as bi
from . import transfer as tr
from .compute import (
    BinaryOp,
    Cast,
    CastBytes,
    CastPlanes,
    Dot,
    Fill,
    Fma,
    ReduceRegister,
    UnaryOp,
    View,
    elementwise_expr,
    operands,
)
from .tensors import RegisterTensor, SharedTensor
from .vm import BlockVM, ExitBlock, PendingCopy, shared_offsets

_RULES: dict[type, Callable] = {}


def rule(cls: type):
    """Register the VM semantics of instruction class `cls`: fn(vm, instruction)."""

    def deco(fn):
        _RULES[cls] = fn
        return fn

    return deco


def run_instruction(vm: BlockVM, s: bi.Instruction) -> None:
    fn = _RULES.get(type(s))
    if fn is None:
        raise TilecraftError("TC608", detail=f"instruction `{s.NAME}`")
    fn(vm, s)


def _uninitialised(dtype, shape) -> np.ndarray:
    """Poison: NaN for floats, all bits set for integers (-1, or the largest unsigned value;
    the arena's 0xFF bytes): reading uninitialised registers or shared memory shows, where
    zeros could pass for the right value (a row index read before it was stored)."""
    arr = np.zeros(shape, dtype=np_type(dtype))
    if dtype.is_float:
        arr[...] = np.nan
    elif arr.dtype.kind in "iu":
        arr[...] = ~arr
    return arr


# ---- allocation -----------------------------------------------------------------------------
@rule(bi.AllocateRegister)
def _alloc_register(vm: BlockVM, s: bi.AllocateRegister) -> None:
    t = s.out
    shape = (t.layout.num_threads, t.layout.local_size)
    if s.init is None:
        vm.regs[t] = _uninitialised(t.dtype, shape)
    else:
        vm.regs[t] = np.full(shape, store_cast(t.dtype, vm.ev.eval(s.init)))


@rule(bi.AllocateShared)
def _alloc_shared(vm: BlockVM, s: bi.AllocateShared) -> None:
    t = s.out
    if vm.arena_plan is not None and np_type(t.dtype).itemsize * 8 == t.dtype.bits:
        off = vm.arena_plan.offsets[t.buffer]
        n = t.layout.cosize * np_type(t.dtype).itemsize
        # (no poison written: an allocation is no access, and until the tensor's first access
        # its bytes may still hold a tensor that shares them, read after this allocation)
        vm.smem[t] = vm.arena[off:off + n].view(np_type(t.dtype))
    else:
        vm.smem[t] = _uninitialised(t.dtype, (t.layout.cosize,))
    vm.pending[s.out] = np.zeros(s.out.layout.cosize, dtype=np.int32)


@rule(bi.AllocateGlobal)
def _alloc_global(vm: BlockVM, s: bi.AllocateGlobal) -> None:
    buf = s.out.buffer
    if buf not in vm.buffers:  # one zeroed workspace per launch, shared by all blocks
        shape = tuple(int(vm.ev.scalar(d)) for d in buf.shape)
        vm.buffers[buf] = PackedArray.zeros(shape, buf.dtype) if is_packed(buf.dtype) else \
            np.zeros(shape, dtype=np_type(buf.dtype))


@rule(bi.ViewGlobal)
def _view_global(vm: BlockVM, s: bi.ViewGlobal) -> None:
    """out aliases src's bytes (any two dtypes, packed ones included; equal total bits)."""
    src = vm.buffers[s.src.buffer]
    out = s.out.buffer
    shape = tuple(int(vm.ev.scalar(d)) for d in out.shape)
    try:
        vm.buffers[out] = view_bytes(src, shape, out.dtype)
    except ValueError as err:
        raise TilecraftError("TC603", s.span, instr="view_global",
                             detail=f"`{s.src.name}` as {out.dtype}{list(shape)}: {err}") from None


# ---- tiles of global and shared tensors -----------------------------------------------------
def _tile_index(vm: BlockVM, s, big_shape, tile_shape) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Indices into the big tensor of every tile element, and which of them lie inside it."""
    offs = [int(vm.ev.scalar(o)) for o in s.offset]
    grids = np.indices(tile_shape) if tile_shape else np.zeros((0,), dtype=np.int64)
    idx = []
    for d, (o, n) in enumerate(zip(offs, big_shape)):
        g = o + grids[s.dims.index(d)] if d in s.dims else np.full(tile_shape, o)
        idx.append(np.asarray(g, dtype=np.int64))
    inside = np.ones(tile_shape, dtype=bool)
    for g, n in zip(idx, big_shape):
        inside &= (g >= 0) & (g < n)
    return tuple(idx), inside


def _read_global(vm: BlockVM, s, src, tile_shape) -> np.ndarray:
    arr = vm.buffers[src.buffer]
    idx, inside = _tile_index(vm, s, arr.shape, tile_shape)
    out = np.zeros(tile_shape, dtype=arr.dtype)  # outside the tensor: 0
    out[inside] = arr[tuple(i[inside] for i in idx)]
    return out


def _shared_positions(vm: BlockVM, s, tensor, tile_shape) -> np.ndarray:
    idx, inside = _tile_index(vm, s, tensor.layout.shape, tile_shape)
    if not inside.all():
        bad = tuple(int(i[~inside][0]) for i in idx)
        raise TilecraftError("TC401", buffer=tensor.name, shape=list(tensor.shape),
                             detail=f"index {bad} of the tile at block {vm.block_index}")
    return shared_offsets(tensor.layout)[idx]


@rule(tr.LoadGlobal)
def _load_global(vm: BlockVM, s: tr.LoadGlobal) -> None:
    vm.regs[s.out] = vm.to_threads(s.out, _read_global(vm, s, s.src, s.out.shape))


@rule(tr.StoreGlobal)
def _store_global(vm: BlockVM, s: tr.StoreGlobal) -> None:
    tile = vm.to_logical(s.src)
    arr = vm.buffers[s.dst.buffer]
    idx, inside = _tile_index(vm, s, arr.shape, s.src.shape)
    arr[tuple(i[inside] for i in idx)] = tile[inside]  # outside the tensor: dropped


@rule(tr.LoadShared)
def _load_shared(vm: BlockVM, s: tr.LoadShared) -> None:
    pos = _shared_positions(vm, s, s.src, s.out.shape)
    vm.check_pending(s.src, pos, "read")
    vm.regs[s.out] = vm.to_threads(s.out, vm.shared(s.src)[pos])


@rule(tr.StoreShared)
def _store_shared(vm: BlockVM, s: tr.StoreShared) -> None:
    tile = vm.to_logical(s.src)
    pos = _shared_positions(vm, s, s.dst, s.src.shape)
    vm.check_pending(s.dst, pos, "written")
    vm.shared(s.dst)[pos] = tile


@rule(tr.CopyAsync)
def _copy_async(vm: BlockVM, s: tr.CopyAsync) -> None:
    data = _read_global(vm, s, s.src, s.dst.shape)
    pos = shared_offsets(s.dst.layout)
    vm.shared(s.dst)
    vm.check_pending(s.dst, pos, "written by another copy_async")
    vm.pending[s.dst][pos] += 1
    vm.open_group.append(PendingCopy(s.dst, pos, data, s.span, vm.smem[s.dst], vm.pending[s.dst]))


@rule(tr.SharedSlice)
def _shared_slice(vm: BlockVM, s: tr.SharedSlice) -> None:
    base = int(vm.ev.scalar(s.base))
    n = s.out.layout.cosize
    if base < 0 or base + n > s.src.layout.cosize:
        raise TilecraftError("TC401", buffer=s.src.name, shape=list(s.src.shape),
                             detail=f"slice at {[int(vm.ev.scalar(o)) for o in s.offset]} of "
                             f"block {vm.block_index}")
    vm.smem[s.out] = vm.shared(s.src)[base:base + n]  # views: the same elements
    vm.pending[s.out] = vm.pending[s.src][base:base + n]


@rule(tr.CopyAsyncCommitGroup)
def _commit(vm: BlockVM, s) -> None:
    vm.committed.append(vm.open_group)
    vm.open_group = []


@rule(tr.CopyAsyncWaitGroup)
def _wait(vm: BlockVM, s: tr.CopyAsyncWaitGroup) -> None:
    while len(vm.committed) > s.n:
        vm.complete(vm.committed.pop(0))


# ---- control and debugging ------------------------------------------------------------------
@rule(bi.Synchronize)
def _sync(vm: BlockVM, s) -> None:
    pass  # every instruction already finished for the whole block


@rule(bi.Exit)
def _exit(vm: BlockVM, s) -> None:
    raise ExitBlock()


@rule(bi.Print)
def _print(vm: BlockVM, s: bi.Print) -> None:
    t = s.tensor
    if isinstance(t, RegisterTensor):
        values = vm.to_logical(t)
    elif isinstance(t, SharedTensor):
        pos = shared_offsets(t.layout)
        vm.check_pending(t, pos, "read")
        values = vm.shared(t)[pos]
    else:
        values = np.asarray(vm.buffers[t.buffer])  # (a packed tensor's values)
    if s.label:  # a lowered T.print: the interpreter's lines (interp/ops/misc.py)
        msg = f"{s.msg}: " if s.msg else ""
        print(f"[tilecraft block {vm.block_index}] {msg}{s.label} =\n{values}")
        return
    msg = f"{s.msg} " if s.msg else ""
    print(f"[block {vm.block_index}] {msg}{t.name} ({t.dtype}{list(values.shape)}):\n{values}")


# ---- computation ----------------------------------------------------------------------------
def _prepared_expr(vm: BlockVM, s, operands):
    """(vars bound to the register operands, the Tile IR expression of the op), per instruction."""
    key = id(s)
    if key not in vm.cache:
        vars_, args = [], []
        for x in operands:
            if isinstance(x, RegisterTensor):
                v = Var.create(f"_{x.name}", x.dtype)
                vars_.append((v, x))
                args.append(v)
            else:
                args.append(x)
        vm.cache[key] = (vars_, elementwise_expr(s.op, tuple(args)))
    return vm.cache[key]


@rule(BinaryOp)
@rule(Fma)
@rule(UnaryOp)
def _elementwise(vm: BlockVM, s) -> None:
    vars_, expr = _prepared_expr(vm, s, operands(s))
    for v, t in vars_:  # per-thread storage: equal layouts, or a broadcast (verified)
        regs = vm.register(t)
        if tuple(t.shape) != tuple(s.out.shape):
            from .broadcast import broadcast_slots

            slots = broadcast_slots(s.out.layout, t.layout)
            regs = np.take_along_axis(regs, slots, axis=1)
        vm.env[v] = regs.astype(compute_type(t.dtype), copy=False)
    try:
        value = vm.ev.eval(expr)
    finally:
        for v, _ in vars_:
            vm.env.pop(v, None)
    shape = (s.out.layout.num_threads, s.out.layout.local_size)
    vm.regs[s.out] = np.ascontiguousarray(np.broadcast_to(store_cast(s.out.dtype, value), shape))


@rule(Cast)
def _cast(vm: BlockVM, s: Cast) -> None:
    from tilecraft.layout.permute import apply_permutation, local_permutation

    value = vm.register(s.src).astype(compute_type(s.src.dtype), copy=False)
    out = np.ascontiguousarray(store_cast(s.out.dtype, value))
    if s.out.layout != s.src.layout:  # (the verifier checked the permutation exists)
        out = apply_permutation(out, local_permutation(s.src.layout, s.out.layout))
    vm.regs[s.out] = out


@rule(CastPlanes)
def _cast_planes(vm: BlockVM, s: CastPlanes) -> None:
    """codes = hi * 2^(lo's bits) + lo on the logical tile, their values times 2^scale (exact:
    a power of two), converted as a store to out's type converts."""
    hi = vm.to_logical(s.hi).astype(np.int64)
    lo = vm.to_logical(s.lo).astype(np.int64)
    values = values_of(s.dtype, (hi << s.lo.dtype.bits) | lo).astype(np.float64)
    vm.regs[s.out] = vm.to_threads(s.out, store_cast(s.out.dtype, values * 2.0 ** s.scale))


@rule(CastBytes)
def _cast_bytes(vm: BlockVM, s: CastBytes) -> None:
    """Each thread's groups of 4 * bits bytes (group g of every part, in order) decoded to 32
    codes (dtypes/packing.py `unpack_bytes`; floats' bytes with the sign at the top), an int's
    minus the offset (whole numbers: exact), a float's value times 2^scale (a power of two:
    exact), converted as a store to out's type converts."""
    from tilecraft.dtypes.packing import unpack_bytes

    out = s.out.layout
    groups = out.local_size // 32
    parts = [vm.register(x).astype(np.int64).reshape(out.num_threads, groups, -1)
             for x in s.parts]
    t = s.dtype
    codes = unpack_bytes(np.concatenate(parts, axis=-1).reshape(out.num_threads, -1), t.bits,
                         sign_at_top=t.is_float)
    if t.is_float:
        values = values_of(t, codes).astype(np.float64) * 2.0 ** s.scale
    else:
        values = codes.astype(np.float64) - s.offset
    vm.regs[s.out] = np.ascontiguousarray(store_cast(s.out.dtype, values))


@rule(View)
def _view(vm: BlockVM, s: View) -> None:
    """Thread t's elements, in local order, form one bit string (element i in bits
    [i*b, (i+1)*b), least significant first) that the new dtype/layout reads back. Bits are
    kept exactly (NaN payloads included)."""
    src, out = s.src.dtype, s.out.dtype
    codes = codes_of(src, vm.register(s.src)).astype(np.uint64)
    threads = codes.shape[0]
    bits = (codes[..., None] >> np.arange(src.bits, dtype=np.uint64)) & np.uint64(1)
    bits = bits.reshape(threads, -1, out.bits)
    new = (bits << np.arange(out.bits, dtype=np.uint64)).sum(axis=-1, dtype=np.uint64)
    vm.regs[s.out] = np.ascontiguousarray(values_of(out, new))


@rule(Fill)
def _fill(vm: BlockVM, s: Fill) -> None:
    shape = (s.out.layout.num_threads, s.out.layout.local_size)
    vm.regs[s.out] = np.full(shape, store_cast(s.out.dtype, vm.ev.eval(s.value)))


def _run_tile_op(vm: BlockVM, make_op, inputs: list[tuple[RegisterTensor, np.ndarray]]):
    """Run a Tile IR op of the interpreter on logical tiles held in scratch buffers."""
    bufs = [Buffer.create(f"_{t.name}", t.shape, t.dtype, "fragment") for t, _ in inputs]
    for b, (_, arr) in zip(bufs, inputs):
        vm.buffers[b] = arr
    try:
        run_tile_op(vm, make_op(*(b.full_region() for b in bufs)))
        return [vm.buffers[b] for b in bufs]
    finally:
        for b in bufs:
            vm.buffers.pop(b, None)


@rule(Dot)
def _dot(vm: BlockVM, s: Dot) -> None:
    acc = np.array(store_cast(s.out.dtype, vm.to_logical(s.c)))
    inputs = [(s.a, vm.to_logical(s.a)), (s.b, vm.to_logical(s.b)), (s.out, acc)]
    *_, result = _run_tile_op(vm, lambda a, b, c: Gemm(a, b, c), inputs)
    vm.regs[s.out] = vm.to_threads(s.out, result)


@rule(ReduceRegister)
def _reduce(vm: BlockVM, s: ReduceRegister) -> None:
    old = vm.to_logical(s.out) if not s.clear else _uninitialised(s.out.dtype, s.out.shape)
    inputs = [(s.src, vm.to_logical(s.src)), (s.out, np.array(old))]
    _, result = _run_tile_op(
        vm, lambda a, b: Reduce(s.kind, a, b, s.dim, s.clear), inputs)
    vm.regs[s.out] = vm.to_threads(s.out, result)


from . import (  # noqa: E402  (the modules registering the rules of other instructions)
    vm_dot_shared,  # noqa: F401  (dot_shared, dot_wait_group)
    vm_mbarrier,  # noqa: F401  (copy_async_bulk, mbarrier_*)
    vm_parallel,  # noqa: F401  (parallel.py's instructions)
)
