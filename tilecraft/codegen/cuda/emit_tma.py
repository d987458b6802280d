"""Pipeline copies global -> shared as TMA loads (sm_90a): one thread issues a few
`cp.async.bulk.tensor` per stage instead of every thread issuing 16-byte cp.async.

A copy qualifies when its source is a tile of a contiguous global tensor of static shape whose
non-unit extents are two dims, the second the innermost (rows x contiguous columns), and its
destination a whole swizzled 16-bit shared tile of that shape. The canonical swizzled layout
(column blocks of W bytes, W = 128, 64 or 32, each row-major with 16-byte chunks XORed by row)
is exactly what TMA writes with its W-byte swizzle, a box of (rows, W / 2) per column block.
The kernel gets one tensor map parameter per such tensor (runtime/tensor_map.py); its bytes
per stage are counted on one mbarrier per stage.

`TILECRAFT_TMA=0` keeps cp.async.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.ir import Buffer, Copy

from .indexing import swizzle_block
from .regions import tile_dims


@dataclass(frozen=True)
class TmaLoad:
    copy: Copy
    map_name: str  # the kernel's tensor map parameter
    block: int  # elements per column block (the box's inner side)
    rows: int
    cols: int
    row_dim: int
    col_dim: int

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.copy.dst.buffer.dtype.bits // 8


def tma_plan(em, producers) -> list[TmaLoad] | None:
    """The TMA loads of a pipeline's producers, or None when any of them does not qualify."""
    state = em.state
    if (not state.target.has_wgmma or not state.options.tma
            or not producers):
        return None
    loads = []
    for p in producers:
        load = _tma_load(em, p)
        if load is None:
            return None
        loads.append(load)
    return loads


def _tma_load(em, p) -> TmaLoad | None:
    from tilecraft.runtime.tensor_map import check_static

    if not isinstance(p, Copy):
        return None
    src, dst = p.src.buffer, p.dst.buffer
    if (src.scope != "global" or dst.scope != "shared" or dst not in em.state.swizzled
            or not p.dst.is_full() or src.dtype != dst.dtype or dst.dtype.bits != 16
            or not all(isinstance(d, int) for d in src.shape)):
        return None
    dims = tile_dims(p.src)
    if (len(dims) != 2 or dims[1] != len(src.shape) - 1 or len(dst.shape) != 2
            or not 2 <= len(src.shape) <= 4):
        return None
    rows, cols = (p.src.extents[d] for d in dims)
    block = swizzle_block(cols)
    if (rows, cols) != tuple(dst.shape) or not block:
        return None
    box = tuple(rows if d == dims[0] else block if d == dims[1] else 1
                for d in range(len(src.shape)))
    if check_static(src.dtype.name, src.shape, box, block * 2) is not None:
        return None
    return TmaLoad(p, tensor_map(em, src, box, block * 2), block, rows, cols, dims[0], dims[1])


def tensor_map(em, buf: Buffer, box: tuple[int, ...], swizzle: int) -> str:
    """The kernel parameter holding the tensor map of `buf` with this box (added once)."""
    maps = em.state.tensor_maps
    for name, (b, bx, sw) in maps.items():
        if b is buf and bx == box and sw == swizzle:
            return name
    name = f"{em.name_buf(buf)}tmap" if not any(b is buf for b, _, _ in maps.values()) else \
        f"{em.name_buf(buf)}tmap{len(maps)}_"
    maps[name] = (buf, box, swizzle)
    return name


def emit_tma_init(em, bar: str, stages: int, loads: list[TmaLoad], empty: str | None = None
                  ) -> None:
    """Declare and initialise one mbarrier per stage (thread 0), then a barrier; the proxy
    fence orders earlier generic accesses of the arena's bytes before the TMA writes. With
    `empty`, also one per stage that every warp arrives on when it is done reading the stage."""
    em.w(f"__shared__ alignas(8) tc::u64 {bar}[{stages}];  // TMA bytes landed, per stage")
    warps = em.state.num_threads // 32
    if empty is not None:
        em.w(f"__shared__ alignas(8) tc::u64 {empty}[{stages}];  // read by all {warps} warps")
    em.open("if (tid == 0)")
    em.w("#pragma unroll")
    em.w(f"for (int s = 0; s < {stages}; ++s) tc::mbarrier_init(&{bar}[s], 1);")
    if empty is not None:
        em.w("#pragma unroll")
        em.w(f"for (int s = 0; s < {stages}; ++s) tc::mbarrier_init(&{empty}[s], {warps});")
    em.w("tc::fence_mbarrier_init();")
    for name in dict.fromkeys(ld.map_name for ld in loads):
        em.w(f"tc::prefetch_tensor_map({name});")
    em.close()
    em.w("tc::fence_proxy_async_shared();")
    em.w("__syncthreads();")
    em.read_since_sync = em.write_pending = False


def emit_tma_loads(em, loads: list[TmaLoad], bar: str, stage: str) -> None:
    """Thread 0's loads of one stage (the loop variable bound by the caller): announce the
    stage's bytes on its mbarrier, then one TMA per column block of every tile."""
    total = sum(ld.nbytes for ld in loads)
    em.w(f"tc::mbarrier_arrive_expect_tx(&{bar}[{stage}], {total});")
    for ld in loads:
        src = ld.copy.src
        starts = em.index_exprs(src.buffer, src.starts)
        dst = ld.copy.dst.buffer
        em.w(f"// T.copy {src.buffer.name} -> {dst.name}: {ld.cols // ld.block} box(es) of "
             f"{ld.rows}x{ld.block}")
        for j in range(ld.cols // ld.block):
            coords = []
            for d in reversed(range(len(src.shape))):  # innermost first
                c = starts[d]
                if d == ld.col_dim and j:
                    c = f"{c} + {j * ld.block}"
                coords.append(f"(int)({c})")
            base = em.shared_ptr[dst]
            addr = f"{base} + {j * ld.rows * ld.block}" if j else base
            em.w(f"tc::tma_load({addr}, {ld.map_name}, &{bar}[{stage}], {', '.join(coords)});")
