"""Kernel definition: prim_func, tensor parameters, T.Kernel, thread bindings, dynamic dims."""

from __future__ import annotations

import functools

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.builder import in_kernel
from tilecraft.frontend.frames import KernelFrame, TensorSpec
from tilecraft.ir import Expr, PrimFunc, Var, cast, const_int

from .surface import int_arg


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

    Dimensions are ints or `T.dynamic("m")` variables (any runtime size, no re-compilation);
    under `@tilecraft.jit` on a kernel function, also names (`("M", "K")`) bound from the call.
    """
    if isinstance(shape, (int, float, Expr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TilecraftError("TC108", detail=f"T.Tensor shape {shape!r} is not a tuple",
                             hint="write T.Tensor((M, K), dtype)")
    dims = tuple(d if isinstance(d, str) else int_arg(d, f"dimension {i} of T.Tensor")
                 for i, d in enumerate(shape))
    return TensorSpec(dims, dt.resolve(dtype))


Buffer = Tensor

#: CUDA's grid limits along x, y, z (exclusive)
GRID_LIMITS = (2**31, 65536, 65536)
#: CUDA's block limits along x, y, z (inclusive); at most 1024 threads in all
BLOCK_LIMITS = (1024, 1024, 64)


def Kernel(*grid, threads=128, cluster_dims=None) -> KernelFrame:  # noqa: N802
    """`with T.Kernel(gx, gy, gz, threads=128) as (bx, by, bz):` launch a grid of 1-3 dims.

    `threads` is an int or a tuple of up to 3 ints; the names bind the block indices (a single
    grid dimension binds one name: `as bx`). Constant grid dimensions are checked against
    CUDA's limits here (TC212); run-time ones when the kernel is launched.
    `cluster_dims` (an int or up to one int per grid dimension, at most 8 blocks in all):
    consecutive blocks form thread-block clusters (sm_90), which run at the same time and
    read each other's shared memory (`T.remote`, `T.cluster_sync`, `T.cluster_rank`:
    docs/language.md, "Clusters"). A clustered dimension must be a compile-time multiple of
    its cluster dimension.
    """
    if not 1 <= len(grid) <= 3:
        raise TilecraftError("TC108", detail=f"T.Kernel takes 1 to 3 grid dimensions, got "
                             f"{len(grid)}",
                             hint="flatten extra dimensions into one")
    if isinstance(threads, (int, float, Expr)):
        threads = (threads,)
    if not isinstance(threads, (tuple, list)) or not 1 <= len(threads) <= 3:
        raise TilecraftError("TC108", detail=f"threads={threads!r}", hint="threads is a positive "
                             "int or a tuple of up to 3 positive ints, known at compile time")
    threads = tuple(int_arg(t, "threads", device=False) for t in threads)
    for axis, (t, most) in enumerate(zip(threads, BLOCK_LIMITS)):
        if not 1 <= t <= most:
            raise TilecraftError("TC108", detail=f"threads={threads!r}", hint=f"CUDA blocks have 1 "
                                 f"to {most} threads along {'xyz'[axis]}")
    n = 1
    for t in threads:
        n *= t
    if n > 1024:
        raise TilecraftError("TC108", detail=f"{n} threads per block", hint="at most 1024")
    dims = []
    for axis, g in enumerate(grid):
        g = int_arg(g, f"T.Kernel grid dimension {'xyz'[axis]}")
        c = const_int(g)
        if c is not None and not 1 <= c < GRID_LIMITS[axis]:
            raise TilecraftError("TC212", dim="xyz"[axis], value=c,
                                 detail="a grid needs at least one block" if c < 1 else
                                 f"CUDA allows fewer than {GRID_LIMITS[axis]} along {'xyz'[axis]}")
        dims.append(c if c is not None else g)
    return KernelFrame(tuple(dims), threads, _cluster(cluster_dims, dims))


#: blocks a cluster may hold everywhere (CUDA's portable cluster size)
CLUSTER_LIMIT = 8


def _cluster(cluster_dims, grid: list) -> tuple[int, ...] | None:
    """`cluster_dims` checked against the grid: one int per grid dimension (TC108)."""
    if cluster_dims is None:
        return None
    given = cluster_dims if isinstance(cluster_dims, (tuple, list)) else (cluster_dims,)
    hint = "cluster_dims is a positive int or a tuple of one per grid dimension"
    if not 1 <= len(given) <= 3:
        raise TilecraftError("TC108", detail=f"cluster_dims={cluster_dims!r}", hint=hint)
    dims = [int_arg(c, "cluster_dims", device=False) for c in given]
    if any(c < 1 for c in dims) or any(c != 1 for c in dims[len(grid):]):
        raise TilecraftError("TC108", detail=f"cluster_dims={cluster_dims!r} for a "
                             f"{len(grid)}-D grid", hint=hint)
    dims = (dims + [1] * len(grid))[: len(grid)]
    n = 1
    for c in dims:
        n *= c
    if n > CLUSTER_LIMIT:
        raise TilecraftError("TC108", detail=f"cluster_dims={cluster_dims!r}: {n} blocks a "
                             "cluster", hint=f"at most {CLUSTER_LIMIT} (CUDA's portable size)")
    for axis, (c, g) in enumerate(zip(dims, grid)):
        if c > 1 and (not isinstance(g, int) or g % c):
            raise TilecraftError(
                "TC108", detail=f"grid dimension {'xyz'[axis]} ({g}) is no compile-time "
                f"multiple of cluster_dims' {c}", hint="clusters tile the grid: make that grid "
                "dimension a constant multiple of the cluster's")
    return tuple(dims)


def get_thread_binding(dim: int = 0) -> Var:
    """The thread index along `dim` (threadIdx.x/y/z) inside the current T.Kernel."""
    b = in_kernel("T.get_thread_binding")
    dim = int_arg(dim, "dim of T.get_thread_binding", device=False)
    if not 0 <= dim < len(b.kernel.thread_vars):
        raise TilecraftError("TC108", detail=f"thread dimension {dim} of {len(b.kernel.threads)}",
                             hint="T.Kernel(threads=(x, y)) has dimensions 0 and 1")
    return b.kernel.thread_vars[dim]


def get_block_binding(dim: int = 0) -> Var:
    """The block index along `dim` inside the current T.Kernel."""
    b = in_kernel("T.get_block_binding")
    dim = int_arg(dim, "dim of T.get_block_binding", device=False)
    if not 0 <= dim < len(b.kernel.block_vars):
        raise TilecraftError("TC108", detail=f"block dimension {dim} of a "
                             f"{len(b.kernel.block_vars)}-D grid",
                             hint="T.Kernel(gx, gy) has block dimensions 0 and 1")
    return b.kernel.block_vars[dim]


def dynamic(name: str, dtype="int32") -> Var:
    """A dimension known only at run time: `M = T.dynamic("m")`; kernels take any size."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TilecraftError("TC108", detail=f"T.dynamic name {name!r}",
                             hint='name the dimension with an identifier: T.dynamic("m")')
    var = Var.create(name, dtype)
    if var.dtype.kind not in ("int", "uint"):
        raise TilecraftError("TC211", what=f"the dtype of T.dynamic({name!r})",
                             got=var.dtype.name, hint="dimensions are int32 or int64")
    return var


symbolic = dynamic


class DTypeHandle(str):
    """`T.float16` and friends: usable as a dtype, and callable to make a typed value."""

    def __call__(self, *args, **kwargs) -> Expr:
        return _value_maker(str(self))(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def _value_maker(dtype: str):
    from .surface import strict

    def make(value=0) -> Expr:
        return cast(dtype, value)

    return strict(make, f"T.{dtype}")


def _handle(name: str) -> DTypeHandle:
    return DTypeHandle(dt.resolve(name).name)
