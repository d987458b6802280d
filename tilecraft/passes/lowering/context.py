"""LowerContext: the tensors of the block program being built, and the helpers the lowering
rules share (temporaries, tiles of memory regions, the located "not lowered yet" error).

Every Tile IR buffer maps 1:1 to a block tensor: a fragment to a `RegisterTensor` with its
inferred layout, a shared buffer to a `SharedTensor` with the layout the shared-memory plan gives
it (the canonical swizzle for `state.swizzled` buffers, else row-major), a global buffer to a
`GlobalTensor`.
"""

from __future__ import annotations

from typing import Any

from tilecraft.block import (
    AllocateRegister,
    GlobalTensor,
    Instruction,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    StoreShared,
)
from tilecraft.block.tensors import BlockTensor
from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.ir import Buffer, BufferRegion
from tilecraft.layout import Fragment, make_swizzled_layout

from ..context import KernelState
from ..copy_reuse import reused_copies
from ..layout_inference.free import free_layout


def not_lowered(span: Span | None, detail: str, hint: str = "") -> TilecraftError:
    """TC502 at `span`: what lowering to block instructions cannot express yet."""
    return TilecraftError("TC502", span=span, detail=f"{detail} (not lowered to block "
                          "instructions yet)", hint=hint or "see docs/block_ir.md, Lowering")


def match_dims(extents: tuple, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The increasing dims of a region with `extents` that a tile of `shape` covers (every other
    extent 1), preferring the last dims; None when there are none."""
    n = len(extents)

    def go(k: int, stop: int) -> tuple[int, ...] | None:  # match shape[:k] within extents[:stop]
        if k == 0:
            return () if all(extents[d] == 1 for d in range(stop)) else None
        for d in range(stop - 1, -1, -1):
            if extents[d] == shape[k - 1]:
                rest = go(k - 1, d)
                if rest is not None and all(extents[x] == 1 for x in range(d + 1, stop)):
                    return rest + (d,)
            if extents[d] != 1:
                return None
        return None

    return go(len(shape), n)


class LowerContext:
    """What the rules share while one kernel lowers."""

    def __init__(self, state: KernelState):
        self.state = state
        self.num_threads = state.num_threads
        self.tensors: dict[Buffer, BlockTensor] = {}
        self._temps = 0
        self._producers = {id(p) for plan in state.pipelines.values() for p in plan.producers}
        self._reused = reused_copies(state)
        # the shared tiles pipelined loops stage (pipeline_copies reallocates them)
        self.staged = {p.dst.buffer for plan in state.pipelines.values() for p in plan.producers}
        self._async = state.options.async_copies and _async_candidates(state)

    # ---- tensors ----------------------------------------------------------------------------
    def define(self, buf: Buffer) -> BlockTensor:
        """The tensor an allocation of `buf` creates."""
        if buf.scope == "fragment":
            t = RegisterTensor.of(buf, self.state.layouts[buf])
        elif buf.scope == "shared":
            swizzled = buf in self.state.swizzled
            t = SharedTensor.of(buf, make_swizzled_layout(buf.static_shape, buf.dtype.bits)
                                if swizzled else None)
        else:
            raise not_lowered(buf.span, f"allocating `{buf.name}` in {buf.scope} memory")
        self.tensors[buf] = t
        return t

    def tensor(self, buf: Buffer, span: Span | None = None) -> BlockTensor:
        t = self.tensors.get(buf)
        if t is not None:
            return t
        if buf.scope == "global":
            return self.tensors.setdefault(buf, GlobalTensor.of(buf))
        if buf.scope in ("local", "var"):
            raise not_lowered(span, f"a tile op on the {buf.scope} buffer `{buf.name}`")
        raise TilecraftError("TC606", span, tensor=buf.name)

    def temp(self, base: str, dtype: Any, layout: Fragment, span: Span | None,
             out: list) -> RegisterTensor:
        """A new register tensor, allocated by an instruction appended to `out`."""
        self._temps += 1
        t = RegisterTensor.create(f"{base}_t{self._temps}", dtype, layout, span=span)
        out.append(AllocateRegister.create(t, span=span))
        return t

    def copy_layout(self, shape: tuple[int, ...], *dtypes: Any) -> Fragment:
        """A layout for moving a tile between memories: 16-byte vectors of the narrowest dtype on
        consecutive threads (the free layout of layout inference)."""
        return free_layout(tuple(shape), self.num_threads,
                           max(1, min(d.bits for d in dtypes) // 8))

    # ---- tiles of memory regions -------------------------------------------------------------
    def region_tile(self, r: BufferRegion, span: Span | None) -> tuple[int, ...]:
        """The shape of the tile a region moves: its extents without the size-1 ones."""
        if not all(isinstance(e, int) for e in r.extents):
            raise not_lowered(span, f"a region of `{r.buffer.name}` with a dynamic extent")
        return tuple(e for e in r.extents if e != 1) or (1,)

    def is_reused(self, op) -> bool:
        """`op` copies a tile its shared destination still holds (passes/copy_reuse.py)."""
        return id(op) in self._reused

    def is_producer(self, op) -> bool:
        """`op` is a copy a T.Pipelined loop issues stages ahead (plan_pipeline)."""
        return id(op) in self._producers

    def lands_async(self, op) -> bool:
        """`op`, a copy from global into shared memory, is issued as an asynchronous copy and
        waited for at once: a producer, or (switch `async_copies`) a copy of a tile that
        depends on the block (or of weights every block reads, past SHARED_WEIGHTS bytes) in a
        kernel without a T.Pipelined loop of more than one iteration. Its bytes then go to
        shared memory without registers and without the L1 lines a load holds until its data
        comes: with most of an SM's L1 made shared memory, those lines bounded the bytes in
        flight (layernorm over 16384-wide rows, 98 KB of shared tiles a block: 72% of copy
        speed through registers, 91% asynchronous on the H200). Smaller weights stay loads,
        which L1 keeps for the SM's other blocks; a pipelined kernel's other copies too: their
        wait would hold back the pipeline's first copies (attention 1-4% slower;
        benchmarks/NOTES.md, session 22)."""
        if self.is_producer(op):
            return True
        return bool(self._async) and id(op) in self._async
    def dims_of(self, r: BufferRegion, shape: tuple[int, ...], span: Span | None):
        """The dims of region `r` a tile of `shape` covers."""
        return self._dims(r, shape, span)

    def _dims(self, r: BufferRegion, shape: tuple[int, ...], span: Span | None):
        dims = match_dims(tuple(r.extents), tuple(shape))
        if dims is None:
            raise not_lowered(span, f"moving a {list(shape)} tile to or from the region "
                              f"{r} of extents {list(r.extents)}")
        return dims

    def load(self, r: BufferRegion, out: RegisterTensor, span: Span | None) -> Instruction:
        """`out` <- the region (global or shared)."""
        src = self.tensor(r.buffer, span)
        dims = self._dims(r, out.shape, span)
        cls = LoadShared if isinstance(src, SharedTensor) else LoadGlobal
        if not isinstance(src, (SharedTensor, GlobalTensor)):
            raise not_lowered(span, f"a partial region of the fragment `{r.buffer.name}`")
        return cls.create(src, out, offset=r.starts, dims=dims, span=span)

    def store(self, src: RegisterTensor, r: BufferRegion, span: Span | None) -> Instruction:
        """The region (global or shared) <- `src`."""
        dst = self.tensor(r.buffer, span)
        dims = self._dims(r, src.shape, span)
        cls = StoreShared if isinstance(dst, SharedTensor) else StoreGlobal
        if not isinstance(dst, (SharedTensor, GlobalTensor)):
            raise not_lowered(span, f"a partial region of the fragment `{r.buffer.name}`")
        return cls.create(src, dst, offset=r.starts, dims=dims, span=span)

    def whole_fragment(self, r: BufferRegion, span: Span | None) -> RegisterTensor | None:
        """The register tensor of a whole-fragment region; None for memory; TC502 for a part of a
        fragment (a register tensor is written whole)."""
        if r.buffer.scope != "fragment":
            return None
        if not r.is_full():
            raise not_lowered(span, f"a part of the fragment `{r.buffer.name}` ({r})",
                              hint="use the whole fragment, or a fragment of the part's shape")
        return self.tensor(r.buffer, span)  # type: ignore[return-value]


def _async_candidates(state) -> set[int]:
    """The ids of the T.copy statements `lands_async` takes (global -> shared, a source region
    that depends on a block index or a large destination), none when a T.Pipelined loop may
    run more than once."""
    from tilecraft.ir import Copy, For, Var
    from tilecraft.ir.expr import const_int
    from tilecraft.ir.visitor import walk, walk_expr

    body = state.kernel.body if state.kernel is not None else state.func.body  # (lowered)
    if any(isinstance(f, For) and f.kind == "pipelined" and const_int(f.extent) != 1
           for f in walk(body)):
        return set()
    kernel = state.kernel
    blocks = set() if kernel is None else \
        {v for v, g in zip(kernel.block_vars, kernel.grid) if const_int(g) != 1}
    out = set()
    for c in walk(body):
        if isinstance(c, Copy) and c.src.buffer.scope == "global" and \
                c.dst.buffer.scope == "shared" and (_nbytes(c.dst) > SHARED_WEIGHTS or any(
                    isinstance(x, Var) and x in blocks for e in c.src.starts
                    for x in walk_expr(e))):
            out.add(id(c))
    return out


#: a block-independent tile (weights) of more bytes than this is copied asynchronously too:
#: layernorm's 32 KB weight and bias rows were 13 points faster so (16384-wide rows), its 8 KB
#: ones 2 points slower (4096-wide: L1 kept them for the SM's other blocks)
SHARED_WEIGHTS = 16 * 1024


def _nbytes(r) -> int:
    n = r.buffer.dtype.bits // 8 if r.buffer.dtype.bits >= 8 else 1
    for e in r.buffer.shape:
        n *= e if isinstance(e, int) else 1 << 30
    return n
