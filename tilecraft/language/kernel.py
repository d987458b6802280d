"""Kernel definition: prim_func, tensor parameters, T.Kernel, thread bindings, dynamic dims."""

from __future__ import annotations

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.builder import in_kernel
from tilecraft.frontend.frames import KernelFrame, TensorSpec
from tilecraft.ir import Expr, PrimFunc, Var, cast, const_int


def prim_func(fn) -> PrimFunc:
    """Decorator: parse a Python function into a tile-language kernel (a `PrimFunc`).

    Closure and global Python values are compile-time constants; parameters are annotated with
    `T.Tensor(shape, dtype)` (or a scalar dtype such as `T.int32`).
    """
    if isinstance(fn, PrimFunc):
        return fn
    from tilecraft.frontend.parser import parse_prim_func

    return parse_prim_func(fn)


def Tensor(shape, dtype="float32") -> TensorSpec:  # noqa: N802 (TileLang's name)
    """Annotation for a global tensor parameter: `A: T.Tensor((M, K), "float16")`.

    Dimensions are ints or `T.dynamic("m")` variables (any runtime size, no re-compilation).
    """
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    return TensorSpec(tuple(shape), dt.resolve(dtype))


Buffer = Tensor


def Kernel(*grid, threads=128, **_ignored) -> KernelFrame:  # noqa: N802
    """`with T.Kernel(gx, gy, gz, threads=128) as (bx, by, bz):` launch a grid of 1-3 dims.

    `threads` is an int or a tuple of up to 3 ints; the names bind the block indices (a single
    grid dimension binds one name: `as bx`).
    """
    if not 1 <= len(grid) <= 3:
        raise TilecraftError("TC108", detail=f"T.Kernel takes 1 to 3 grid dimensions, got {len(grid)}",
                             hint="flatten extra dimensions into one")
    if isinstance(threads, int):
        threads = (threads,)
    threads = tuple(threads)
    if not 1 <= len(threads) <= 3 or any(const_int(t) is None or const_int(t) <= 0 for t in threads):
        raise TilecraftError("TC108", detail=f"threads={threads!r}", hint="threads is a positive int "
                             "or a tuple of up to 3 positive ints, known at compile time")
    threads = tuple(const_int(t) for t in threads)
    n = 1
    for t in threads:
        n *= t
    if n > 1024:
        raise TilecraftError("TC108", detail=f"{n} threads per block", hint="at most 1024")
    for g in grid:
        if isinstance(g, (bool, float)) or not isinstance(g, (int, Expr)):
            raise TilecraftError("TC108", detail=f"grid dimension {g!r} is not an integer",
                                 hint="use T.ceildiv(N, block_N)")
    return KernelFrame(tuple(grid), threads)


def get_thread_binding(dim: int = 0) -> Var:
    """The thread index along `dim` (threadIdx.x/y/z) inside the current T.Kernel."""
    b = in_kernel("T.get_thread_binding")
    if not 0 <= dim < len(b.kernel.thread_vars):
        raise TilecraftError("TC108", detail=f"thread dimension {dim} of {len(b.kernel.threads)}",
                             hint="T.Kernel(threads=(x, y)) has dimensions 0 and 1")
    return b.kernel.thread_vars[dim]


def get_block_binding(dim: int = 0) -> Var:
    """The block index along `dim` inside the current T.Kernel."""
    b = in_kernel("T.get_block_binding")
    return b.kernel.block_vars[dim]


def dynamic(name: str, dtype="int32") -> Var:
    """A dimension known only at run time: `M = T.dynamic("m")`; kernels take any size."""
    return Var.create(name, dtype)


symbolic = dynamic


class DTypeHandle(str):
    """`T.float16` and friends: usable as a dtype, and callable to make a typed value."""

    def __call__(self, value=0):
        return cast(str(self), value)


def _handle(name: str) -> DTypeHandle:
    return DTypeHandle(dt.resolve(name).name)
