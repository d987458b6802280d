"""legalize: check that the CUDA backend can compile this kernel, before anything else runs.

Requires: a parsed PrimFunc.  Guarantees (`legal`): exactly one `T.Kernel` launch (found and
stored in `state.kernel`), a block of 32..1024 threads in whole warps, every buffer of a dtype
with a CUDA type (sub-byte ints and custom floats included: packed, docs/dtypes.md "On the
GPU"), every gemm of a shape and dtype the mma.sync path implements, no T.Parallel
indexing a fragment past its size (TC401, as on the interpreter). Violations are
TilecraftErrors at the user's line (TC502 for what is valid tile code the backend cannot do yet).

    with T.Kernel(8, threads=100):      ->  TC502 "a block of 100 threads (not whole warps)"
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Allocate, Buffer, Gemm, KernelLaunch, ParallelLoop
from tilecraft.ir.indices import check_parallel_fragments
from tilecraft.ir.visitor import stmt_children, walk

from .context import KernelState

GEMM_INPUTS = ("float16", "bfloat16")


def _kernels(s):
    if isinstance(s, KernelLaunch):
        return [s]
    out = []
    for c in stmt_children(s):
        out.extend(_kernels(c))
    return out


def _check_dtype(buf: Buffer) -> None:
    from tilecraft.codegen.cuda.cexpr import CTYPES, is_packed

    if buf.dtype.name not in CTYPES and not is_packed(buf.dtype):
        raise TilecraftError("TC502", span=buf.span, detail=f"buffer `{buf.name}` of dtype "
                             f"{buf.dtype}", hint="use a type of tilecraft.dtypes")


def _check_gemm(op: Gemm) -> None:
    m, n, k = op.mnk()
    a, b, c = op.A.dtype.name, op.B.dtype.name, op.C.dtype.name
    if a not in GEMM_INPUTS or b != a or c != "float32":
        raise TilecraftError("TC502", span=op.span, detail=f"T.gemm with {a} x {b} -> {c}",
                             hint="mma.sync supports float16/bfloat16 inputs with float32 "
                             "accumulation here")
    for name, r in (("A", op.A), ("B", op.B)):
        if r.buffer.scope not in ("shared", "fragment"):
            raise TilecraftError("TC207", span=op.span, buffer=r.buffer.name,
                                 scope=r.buffer.scope, detail=f"T.gemm operand {name}",
                                 hint="stage gemm operands in shared memory or registers")
    if op.B.buffer.scope != "shared":
        raise TilecraftError("TC502", span=op.span, detail="T.gemm with B in registers",
                             hint="copy B to shared memory")
    if op.C.buffer.scope != "fragment":
        raise TilecraftError("TC207", span=op.span, buffer=op.C.buffer.name,
                             scope=op.C.buffer.scope, detail="T.gemm accumulator",
                             hint="accumulate into T.alloc_fragment")
    for name, r in (("A", op.A), ("C", op.C)):
        if r.buffer.scope == "fragment" and not r.is_full():  # its layout is the whole tile's
            raise TilecraftError("TC502", span=op.span, detail=f"T.gemm on part of the "
                                 f"fragment `{r.buffer.name}` ({name})",
                                 hint="give the gemm a fragment of its own tile shape")
    if not all(isinstance(x, int) for x in (m, n, k)) or m % 16 or n % 8 or k % 16:
        raise TilecraftError("TC502", span=op.span, detail=f"T.gemm tile {m}x{n}x{k}",
                             hint="gemm tiles are multiples of 16 (M, K) and 8 (N)")


def legalize(state: KernelState) -> None:
    kernels = _kernels(state.func.body)
    if len(kernels) != 1:
        raise TilecraftError("TC502", span=state.func.span,
                             detail=f"{len(kernels)} T.Kernel launches in one function",
                             hint="write one `with T.Kernel(...)` per T.prim_func")
    kernel = kernels[0]
    nt = kernel.num_threads
    if nt % 32 or not 32 <= nt <= 1024:
        raise TilecraftError("TC502", span=kernel.span, detail=f"a block of {nt} threads",
                             hint="use a multiple of 32 threads, at most 1024")
    if len(kernel.threads) != 1:
        raise TilecraftError("TC502", span=kernel.span, detail="multi-dimensional thread blocks",
                             hint="use threads=<int>")
    for p in state.func.params:
        if isinstance(p, Buffer):
            _check_dtype(p)
    for s in walk(kernel.body):
        if isinstance(s, Allocate):
            _check_dtype(s.buffer)
            if s.buffer.scope in ("shared", "fragment", "local") and s.buffer.static_shape is None:
                raise TilecraftError("TC502", span=s.span, detail=f"`{s.buffer.name}` with a "
                                     "dynamic shape", hint="on-chip buffers need constant shapes")
        elif isinstance(s, Gemm):
            _check_gemm(s)
        elif isinstance(s, ParallelLoop):  # fragments span the extents of their loop variables
            check_parallel_fragments(s, [x if isinstance(x, int) else None for x in s.extents])
    state.kernel = kernel
