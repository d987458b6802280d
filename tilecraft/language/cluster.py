"""Thread-block clusters (sm_90): `T.Kernel(..., cluster_dims=...)`'s blocks read each other's
shared memory.

    with T.Kernel(N // 128, 4, threads=128, cluster_dims=(1, 4)) as (bn, bs):
        part = T.alloc_shared((128,), "float32")
        ...                                   # each block fills its own `part`
        T.cluster_sync()                      # every block of the cluster has written
        for i in T.Parallel(32):
            out[i] = sum(T.remote(part, p)[T.cluster_rank() * 32 + i] for p in range(4))
        T.cluster_sync()                      # no block leaves while another reads its memory

The interpreter runs a cluster's blocks in turn, each up to its next `T.cluster_sync()`, and
checks the order: a read of an element its block wrote since the last barrier, a write of an
element another block read before the next one, and a read of a block that has ended are TC411
(interp/cluster.py).
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError, current_span
from tilecraft.frontend.builder import in_kernel
from tilecraft.ir import (Buffer, BufferLoad, BufferRegion, Call, Evaluate, Expr, as_expr,
                          index_buffer)

from .surface import int_arg


def _cluster(what: str) -> tuple[tuple[int, ...], tuple]:
    b = in_kernel(what)
    if b.kernel.cluster is None:
        raise TilecraftError("TC108", detail=f"{what} in a kernel without clusters",
                             hint="declare them: T.Kernel(..., cluster_dims=(2, 1))")
    return b.kernel.cluster, b.kernel.block_vars


def cluster_rank() -> Expr:
    """This block's index in its cluster, 0 .. cluster size - 1 (x fastest, as CUDA's
    %cluster_ctarank): (bx % cx) + cx * ((by % cy) + cy * (bz % cz))."""
    dims, bvars = _cluster("T.cluster_rank")
    rank: Expr | int = 0
    for c, v in reversed(list(zip(dims, bvars))):
        rank = rank * c + (v % c) if c > 1 else rank * c
    return as_expr(rank)


def cluster_size() -> int:
    """The blocks in a cluster (a Python int)."""
    dims, _ = _cluster("T.cluster_size")
    n = 1
    for c in dims:
        n *= c
    return n


def cluster_sync() -> None:
    """A barrier for every thread of every block of the cluster; what a block wrote to its
    shared memory before it is what the others read through T.remote after it."""
    b = in_kernel("T.cluster_sync")
    _cluster("T.cluster_sync")
    if b.parallel_depth:
        raise TilecraftError("TC108", detail="T.cluster_sync inside T.Parallel",
                             hint="every thread of the cluster meets it: call it at block level")
    b.emit(Evaluate(Call.create("cluster_sync", (), "int32"), current_span()))


class RemoteBuffer:
    """`T.remote(buf, rank)`: block `rank`'s copy of shared buffer `buf`, read by indexing."""

    def __init__(self, buffer: Buffer, rank: Expr):
        self.buffer, self.rank = buffer, rank

    def load(self, idx) -> Call:
        ref = index_buffer(self.buffer, idx)
        if not isinstance(ref, BufferLoad):
            raise TilecraftError("TC108", detail=f"T.remote({self.buffer.name}, ...) sliced",
                                 hint="read single elements: T.remote(buf, rank)[i, j]")
        return Call.create("remote_load", (self.rank, ref), self.buffer.dtype)

    def __repr__(self) -> str:
        return f"T.remote({self.buffer.name}, {self.rank})"


def remote(buf: Buffer, rank) -> RemoteBuffer:
    """Block `rank`'s (0 .. cluster size - 1) shared buffer `buf`, the same allocation in
    every block: `T.remote(buf, r)[i, j]` reads its element (distributed shared memory).
    Reads only; order them after the writer's `T.cluster_sync()`."""
    dims, _ = _cluster("T.remote")
    if not isinstance(buf, Buffer) or buf.scope != "shared":
        what = f"a part of `{buf.buffer.name}`" if isinstance(buf, BufferRegion) else \
            f"`{buf.name}` ({buf.scope})" if isinstance(buf, Buffer) else repr(buf)
        raise TilecraftError("TC108", detail=f"T.remote of {what}",
                             hint="T.remote reads a whole shared buffer (T.alloc_shared)")
    if not buf.dtype.is_standard:
        raise TilecraftError("TC108", detail=f"T.remote of the {buf.dtype} buffer `{buf.name}`",
                             hint="read a buffer of a standard type (or its bytes, uint8)")
    rank = int_arg(rank, "the rank of T.remote")
    size = 1
    for c in dims:
        size *= c
    if isinstance(rank, int) and not 0 <= rank < size:
        raise TilecraftError("TC108", detail=f"T.remote({buf.name}, {rank}) in a cluster of "
                             f"{size} blocks", hint=f"a rank from 0 to {size - 1}")
    return RemoteBuffer(buf, as_expr(rank))


__all__ = ["RemoteBuffer", "cluster_rank", "cluster_size", "cluster_sync", "remote"]
