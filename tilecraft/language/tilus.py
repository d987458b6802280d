"""The Tilus level of the language: thread-block-level instructions on tensors with explicit
layouts (Tilus Table 1; the block IR in tilecraft/block, docs/block_ir.md), in snake_case with
the paper's argument order.

    with T.Kernel(M // 64, N // 8, threads=128) as (bi, bj):
        acc = T.allocate_register("float32", layout=ACC, init=0.0)
        for k in range(K // 16):
            a = T.load_global(A, layout=A_TILE, offset=[bi * 64, k * 16])
            b = T.load_global(B, layout=B_TILE, offset=[k * 16, bj * 8])
            T.dot(a, b, acc, out=acc)
        T.store_global(T.cast(acc, "float16"), C, offset=[bi * 64, bj * 8])

Register tensors are values: `+ - * / %` and unary `-` on them (or `T.add/sub/mul/div/mod/neg`)
make new register tensors with the operands' layout; `T.view` reinterprets a register tensor's
bits (another dtype/layout, same bits per thread) and `T.view_global` a global tensor's bytes.
`offset` gives the start in every dimension of the global or shared tensor; a tile of rank r
covers its last r dimensions (or `dims`).
A kernel written at this level runs on the block VM (CPU tensors) and through the block
printer (CUDA tensors). Tile ops may stand beside these instructions: the two levels meet in
memory (a T.alloc_shared buffer, global tensors) and in registers (a fragment allocated with
`layout=` is a register tensor here; a register tensor in a tile op or in T.Parallel is a
fragment of its fixed layout, a strict constraint for inference: `T.gemm(A_s, B_s, acc)`,
`T.copy(r, C[...])`, `r[i, j]`). The pass pipeline lowers such a kernel whole.
"""

from __future__ import annotations

from typing import Any

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    Cast,
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    Dot,
    Exit,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    StoreShared,
    Synchronize,
    UnaryOp,
    View,
    ViewGlobal,
)
from tilecraft.block.compute import result_dtype
from tilecraft.diagnostics import TilecraftError, current_span
from tilecraft.dtypes import resolve
from tilecraft.frontend.builder import in_kernel
from tilecraft.ir import Buffer
from tilecraft.layout import Fragment, LayoutError, check_view


def _fresh(what: str) -> str:
    """The name of the assignment's target (`acc = T.allocate_register(...)`), else `what`,
    made unique in the kernel."""
    b = in_kernel(f"T.{what}")
    return b.unique_name(b.pending_name or what)


def _global(g: Any, what: str) -> GlobalTensor:
    if isinstance(g, GlobalTensor):
        return g
    if isinstance(g, Buffer) and g.scope == "global":
        return GlobalTensor.of(g)
    raise TilecraftError("TC603", current_span(), instr=what,
                         detail=f"expected a global tensor (a kernel parameter), got {g!r}")


def as_register(x: Any, what: str) -> Any:
    """A register tensor for `x`: a tile-level fragment allocated with `layout=` is one (the
    kernel then mixes both levels); anything else is returned as it is."""
    if isinstance(x, Buffer) and x.scope == "fragment":
        layout = in_kernel(f"T.{what}").fragment_layouts.get(x)
        if layout is None:
            raise TilecraftError("TC603", current_span(), instr=what,
                                 detail=f"the fragment `{x.name}` has no declared layout: give "
                                 "it `layout=` in T.alloc_fragment to use it in block "
                                 "instructions")
        return RegisterTensor.of(x, layout)
    return x


def _register(dtype: Any, layout: Any, what: str, init: Any = None) -> RegisterTensor:
    if not isinstance(layout, Fragment):
        raise TilecraftError("TC603", current_span(), instr=what,
                             detail=f"`layout` must be a register layout (tilecraft.layout "
                             f"local/spatial/column_local/column_spatial products), got {layout!r}")
    bld = in_kernel(f"T.{what}")
    out = RegisterTensor.create(_fresh("r"), resolve(dtype), layout, span=current_span())
    bld.emit(AllocateRegister.create(out, init=init, span=current_span()))
    return out


def allocate_register(dtype: Any, shape: Any = None, layout: Any = None,
                      init: Any = None) -> RegisterTensor:
    """A register tensor of `dtype` laid out by `layout` (its shape is the layout's; `shape`,
    when given, must equal it); `init` fills it."""
    t = _register(dtype, layout, "allocate_register", init)
    if shape is not None and tuple(shape) != tuple(t.shape):
        raise TilecraftError("TC601", current_span(), tensor=t.name, layout=repr(layout),
                             layout_shape=list(t.shape), shape=list(shape))
    return t


def allocate_shared(dtype: Any, shape: Any, layout: Any = None) -> SharedTensor:
    """A shared tensor of `dtype` and `shape` (row-major unless `layout`)."""
    bld = in_kernel("T.allocate_shared")
    t = SharedTensor.create(_fresh("s"), resolve(dtype), shape, layout, span=current_span())
    bld.emit(AllocateShared.create(t, span=current_span()))
    return t


def load_global(g: Any, layout: Any = None, offset: Any = None, dims: Any = None
                ) -> RegisterTensor:
    """The tile of global tensor `g` at `offset`, in registers laid out by `layout`."""
    src = _global(g, "load_global")
    out = _register(src.dtype, layout, "load_global")
    in_kernel("T.load_global").emit(LoadGlobal.create(src, out, offset=offset, dims=dims,
                                                      span=current_span()))
    return out


def _shared(s: Any, instr: str) -> SharedTensor:
    """A shared tensor: one of T.allocate_shared, or a tile-level T.alloc_shared buffer (the
    kernel then mixes both levels; lowering gives the buffer its planned layout)."""
    if isinstance(s, SharedTensor):
        return s
    if isinstance(s, Buffer) and s.scope == "shared":
        return SharedTensor.of(s)
    raise TilecraftError("TC603", current_span(), instr=instr,
                         detail=f"expected a shared tensor (T.allocate_shared or "
                         f"T.alloc_shared), got {type(s).__name__}")


def load_shared(s: SharedTensor, layout: Any = None, offset: Any = None, dims: Any = None
                ) -> RegisterTensor:
    """The tile of shared tensor `s` at `offset`, in registers laid out by `layout`."""
    s = _shared(s, "load_shared")
    out = _register(s.dtype, layout, "load_shared")
    in_kernel("T.load_shared").emit(LoadShared.create(s, out, offset=offset, dims=dims,
                                                      span=current_span()))
    return out


def store_global(r: RegisterTensor, g: Any, offset: Any = None, dims: Any = None) -> None:
    """Store register tensor `r` into global tensor `g` at `offset`."""
    r = as_register(r, "store_global")
    in_kernel("T.store_global").emit(StoreGlobal.create(r, _global(g, "store_global"),
                                                        offset=offset, dims=dims,
                                                        span=current_span()))


def store_shared(r: RegisterTensor, s: SharedTensor, offset: Any = None, dims: Any = None
                 ) -> None:
    """Store register tensor `r` into shared tensor `s` at `offset`."""
    r = as_register(r, "store_shared")
    s = _shared(s, "store_shared")
    in_kernel("T.store_shared").emit(StoreShared.create(r, s, offset=offset, dims=dims,
                                                        span=current_span()))


def copy_async(s: SharedTensor, g: Any, offset: Any = None, dims: Any = None) -> None:
    """Start copying the tile of global tensor `g` at `offset` into all of shared tensor `s`."""
    s = _shared(s, "copy_async")
    in_kernel("T.copy_async").emit(CopyAsync.create(s, _global(g, "copy_async"), offset=offset,
                                                    dims=dims, span=current_span()))


def copy_async_commit_group() -> None:
    """The copy_async calls since the last commit form a group."""
    in_kernel("T.copy_async_commit_group").emit(CopyAsyncCommitGroup.create(span=current_span()))


def copy_async_wait_group(n: int) -> None:
    """Wait until at most `n` committed groups are still copying."""
    in_kernel("T.copy_async_wait_group").emit(CopyAsyncWaitGroup.create(n, span=current_span()))


def synchronize() -> None:
    """A barrier for the block's threads."""
    in_kernel("T.synchronize").emit(Synchronize.create(span=current_span()))


def exit() -> None:
    """The block stops here."""
    in_kernel("T.exit").emit(Exit.create(span=current_span()))


def cast_register(x: RegisterTensor, dtype: Any, layout: Any = None) -> RegisterTensor:
    """`x` converted to `dtype` (T.cast on a register tensor), in x's layout or in `layout`: the
    same elements in each thread in another register order, the same in every thread (e.g. 4-bit
    codes packed in interleaved words, tilecraft.layout.interleave_words, cast straight into the
    mma operand's order: the fast cast then needs no byte permutes)."""
    out = _register(dtype, x.layout if layout is None else layout, "cast")
    in_kernel("T.cast").emit(Cast.create(x, out, span=current_span()))
    return out


def cast_planes(hi: RegisterTensor, lo: RegisterTensor, dtype: Any, out_dtype: Any,
                layout: Any = None, scale: int = 0) -> RegisterTensor:
    """The float `dtype` whose codes are stored as two bit planes, `hi` (the top bits) and `lo`
    (the low bits), each a register tensor of unsigned codes over the same elements, converted
    to `out_dtype` times 2^scale, in `layout` (default lo's; each thread's registers may be
    ordered differently from the planes'): a 6-bit float as uint2 + uint4 planes (quant/qmm.py),
    cast by one fast routine where the planes are interleaved words."""
    from tilecraft.block import CastPlanes

    hi, lo = as_register(hi, "cast_planes"), as_register(lo, "cast_planes")
    out = _register(out_dtype, lo.layout if layout is None else layout, "cast")
    in_kernel("T.cast_planes").emit(CastPlanes.create(hi, lo, out, dtype, scale,
                                                      span=current_span()))
    return out


def cast_bytes(parts: Any, dtype: Any, out_dtype: Any, layout: Any, offset: int = 0,
               scale: int = 0) -> RegisterTensor:
    """Codes of `dtype` (3-, 6- or 7-bit unsigned ints, or 6- or 7-bit floats whose every code
    is finite) stored 32 in 4 * bits bytes (`tilecraft.dtypes.packing.pack_bytes`: 4 * bits
    codes in the bytes' low bits, the rest spread over their top bits; 3 bits in nibbles;
    floats' bytes with `sign_at_top`; on the GPU floats with 2 or 3 mantissa bits),
    as `out_dtype` in `layout`: an int's code minus the whole number `offset`, a float's value
    times 2^scale. `parts`: one or more uint8 register tensors (a tensor or a list); each
    thread's elements of the result form groups of 32 whose bytes are, in order, the matching
    group of each part's bytes. The quantized matmul stores 3-, 6- and 7-bit integer weights
    and float6_e3m2 so (quant/qmm.py): one fast routine of byte permutes (tests:
    tests/codegen/test_code_bytes.py shows a one-tile kernel)."""
    from tilecraft.block import CastBytes

    items = parts if isinstance(parts, (list, tuple)) else [parts]
    regs = [as_register(x, "cast_bytes") for x in items]
    out = _register(out_dtype, layout, "cast")
    in_kernel("T.cast_bytes").emit(CastBytes.create(regs, out, dtype, offset, scale,
                                                     span=current_span()))
    return out


def view(x: RegisterTensor, dtype: Any = None, layout: Any = None) -> RegisterTensor:
    """`x`'s registers reinterpreted, at no cost, as a tensor of `dtype` laid out by `layout`
    (each defaults to x's). Thread t's elements, in local order, are one bit string (element i
    in bits [i*b, (i+1)*b), least significant first) that the new tensor reads back, so both
    must span the same threads with the same bits per thread (local elements x dtype bits):

        w8 = T.load_global(W, layout=local(3).spatial(32), offset=[k, j, 0])   # 3 x u8
        w6 = T.view(w8, dtype="int6", layout=local(1, 4).spatial(32))          # 4 x i6

    Otherwise TC604 at this line, giving both counts."""
    x = as_register(x, "view")
    if not isinstance(x, RegisterTensor):
        raise TilecraftError("TC603", current_span(), instr="view",
                             detail=f"expected a register tensor, got {x!r}")
    dt = x.dtype if dtype is None else resolve(dtype)
    layout = x.layout if layout is None else layout
    if not isinstance(layout, Fragment):
        raise TilecraftError("TC603", current_span(), instr="view",
                             detail=f"`layout` must be a register layout, got {layout!r}")
    try:
        check_view(x.layout, x.dtype.bits, layout, dt.bits)
    except LayoutError as err:
        raise TilecraftError("TC604", current_span(), tensor=x.name,
                             target=f"{dt} ({layout!r})", detail=str(err)) from None
    out = _register(dt, layout, "view")
    in_kernel("T.view").emit(View.create(x, out, span=current_span()))
    return out


def view_global(tensor: Any, dtype: Any = None, shape: Any = None, layout: Any = None
                ) -> GlobalTensor:
    """The bytes of global tensor `tensor` as a tensor of `dtype` and `shape` (each defaults to
    the tensor's; with a new dtype of another width, the last dimension scales), row-major
    (`layout`, when given, must be `row_major(*shape)`). Both hold the same number of bits,
    else TC603 at this line giving both counts; writes through one show in the other:

        W6 = T.view_global(W8, dtype="int6", shape=[K, N])   # W8: uint8[K * N * 6 // 8]
    """
    src = _global(tensor, "view_global")
    dt = src.dtype if dtype is None else resolve(dtype)
    if shape is None:
        shape = _scaled_shape(src, dt)
    shape = tuple(shape)
    if layout is not None and layout != _row_major_of(shape):
        raise TilecraftError("TC603", current_span(), instr="view_global",
                             detail=f"global tensors are row-major; `layout` {layout!r} is not "
                             f"row_major{shape}")
    out = GlobalTensor.create(_fresh("g"), dt, shape, span=current_span())
    have, want = src.buffer.numel(), out.buffer.numel()
    if have is not None and want is not None and have * src.dtype.bits != want * dt.bits:
        raise TilecraftError("TC603", current_span(), instr="view_global",
                             detail=f"`{src.name}` holds {have} x {src.dtype.bits} bits = "
                             f"{have * src.dtype.bits} bits, {dt}{list(shape)} "
                             f"{want} x {dt.bits} bits = {want * dt.bits} bits (the total "
                             "bits must be equal)")
    in_kernel("T.view_global").emit(ViewGlobal.create(src, out, span=current_span()))
    return out


def _scaled_shape(src: GlobalTensor, dt: Any) -> tuple:
    shape = tuple(src.shape)
    if dt.bits == src.dtype.bits:
        return shape
    last = shape[-1] if shape else None
    if isinstance(last, int) and last * src.dtype.bits % dt.bits == 0:
        return shape[:-1] + (last * src.dtype.bits // dt.bits,)
    raise TilecraftError("TC603", current_span(), instr="view_global",
                         detail=f"the last dimension of `{src.name}` ({last} x "
                         f"{src.dtype.bits} bits) is not a whole number of {dt} elements: "
                         "give `shape=`")


def _row_major_of(shape: tuple) -> Any:
    from tilecraft.layout import row_major

    return row_major(*shape) if all(isinstance(n, int) for n in shape) else None


def dot(a: RegisterTensor, b: RegisterTensor, c: RegisterTensor,
        out: RegisterTensor | None = None) -> RegisterTensor:
    """`a @ b + c` into `out` (a new tensor with c's layout when None)."""
    a, b, c, out = (as_register(x, "dot") for x in (a, b, c, out))
    if out is None:
        out = _register(c.dtype, c.layout, "dot")
    in_kernel("T.dot").emit(Dot.create(a, b, c, out=out, span=current_span()))
    return out


def binary(op: str, a: Any, b: Any) -> RegisterTensor:
    """`a op b` on register tensors (or one register tensor and a scalar); a smaller tensor
    broadcasts (numpy's rule, same rank: [M, 1] against [M, N])."""
    regs = [x for x in (a, b) if isinstance(x, RegisterTensor)]
    like = regs[0] if len(regs) == 1 or regs[0].layout.size >= regs[1].layout.size else regs[1]
    out = _register(result_dtype(op, (a, b)), like.layout, "arithmetic")
    in_kernel("T.arithmetic").emit(BinaryOp.create(op, a, b, out, span=current_span()))
    return out


def fma(a: Any, b: Any, c: Any) -> RegisterTensor:
    """`a * b + c` rounded once, element-wise (T.fma on register tensors; broadcast as
    `binary`'s): a new register tensor with the largest operand's layout."""
    from tilecraft.block import Fma

    regs = [x for x in (a, b, c) if isinstance(x, RegisterTensor)]
    like = max(regs, key=lambda t: t.layout.size)
    out = _register(result_dtype("fma", (a, b, c)), like.layout, "fma")
    in_kernel("T.fma").emit(Fma.create(a, b, c, out, span=current_span()))
    return out


def unary(op: str, x: RegisterTensor) -> RegisterTensor:
    """`op(x)` element-wise (neg, abs, exp, ...): a new register tensor with x's layout."""
    out = _register(result_dtype(op, (x,)), x.layout, op)
    in_kernel(f"T.{op}").emit(UnaryOp.create(op, x, out, span=current_span()))
    return out


def unary_or_call(op: str, x: Any, scalar_fn):
    """`T.exp(x)` and friends: an instruction for a register tensor, else the scalar function."""
    if isinstance(x, RegisterTensor):
        return unary(op, x)
    return scalar_fn(x)


def _reduce(kind: str, x: RegisterTensor, dim: int, keepdim: bool) -> RegisterTensor:
    from tilecraft.block import ReduceRegister
    from tilecraft.block.compute import REDUCE_KINDS  # noqa: F401 (the kinds it takes)
    from tilecraft.interp.ops.reduce import accumulator_dtype

    if not isinstance(x, RegisterTensor):
        raise TilecraftError("TC603", current_span(), instr=f"T.{kind}",
                             detail=f"expected a register tensor, got {x!r}")
    dtype = x.dtype if x.dtype.is_integer else accumulator_dtype(x.dtype, x.dtype)
    out = _register(dtype, x.layout.reduce(dim, keepdim=keepdim), kind)
    in_kernel(f"T.{kind}").emit(ReduceRegister.create(x, out, dim=dim, kind=kind,
                                                      span=current_span()))
    return out


def sum(x: RegisterTensor, dim: int, keepdim: bool = False) -> RegisterTensor:
    """The sum of register tensor `x` over `dim` (float32 for floats; integers keep their
    dtype), laid out by x's layout reduced over `dim` (replicated on the threads that shared
    the reduced elements)."""
    return _reduce("sum", x, dim, keepdim)


def amax(x: RegisterTensor, dim: int, keepdim: bool = False) -> RegisterTensor:
    """The maximum of register tensor `x` over `dim` (see `T.sum`)."""
    return _reduce("max", x, dim, keepdim)


def amin(x: RegisterTensor, dim: int, keepdim: bool = False) -> RegisterTensor:
    """The minimum of register tensor `x` over `dim` (see `T.sum`)."""
    return _reduce("min", x, dim, keepdim)


def add(a, b):
    """`a + b` element-wise on register tensors (or a register tensor and a scalar); a new register
    tensor with the operands' layout (a same-rank operand with extents 1 broadcasts)."""
    return binary("+", a, b)


def sub(a, b):
    """`a - b` element-wise on register tensors (or a register tensor and a scalar); a new register
    tensor with the operands' layout (a same-rank operand with extents 1 broadcasts)."""
    return binary("-", a, b)


def mul(a, b):
    """`a * b` element-wise on register tensors (or a register tensor and a scalar); a new register
    tensor with the operands' layout (a same-rank operand with extents 1 broadcasts)."""
    return binary("*", a, b)


def div(a, b):
    """`a / b` element-wise on register tensors (or a register tensor and a scalar); a new register
    tensor with the operands' layout (a same-rank operand with extents 1 broadcasts)."""
    return binary("/", a, b)


def mod(a, b):
    """`a % b` element-wise on register tensors (or a register tensor and a scalar); a new register
    tensor with the operands' layout (a same-rank operand with extents 1 broadcasts)."""
    return binary("%", a, b)


def neg(x):
    """`-x` element-wise on a register tensor."""
    return unary("neg", x)


__all__ = [
    "add",
    "allocate_register",
    "allocate_shared",
    "amax",
    "amin",
    "copy_async",
    "copy_async_commit_group",
    "copy_async_wait_group",
    "div",
    "dot",
    "exit",
    "load_global",
    "load_shared",
    "mod",
    "mul",
    "neg",
    "store_global",
    "store_shared",
    "sub",
    "sum",
    "synchronize",
    "view",
    "view_global",
]
