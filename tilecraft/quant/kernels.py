"""The weight pre-transform kernels: Tilus Figure 9 (`transform_b`) and its inverse (`restore_b`).

Figure 9, name for name (its `ViewGlobal` lines 6-9 are the parameters' declarations here: a
parameter of a sub-byte type is a typed view of the caller's packed bytes):

    def transform_b<K / BK, N / BN>(i6* b_in, u8* b_out):
        bk, bj = BlockIndices()
        b = LoadGlobal(b_in, layout=<B layout>, offset=[bk * BK:, bj * BN:])
        b = View(b, dtype=u8, layout=local(3).spatial(32))
        StoreGlobal(b, b_out, offset=[bk, bj, 0:])

(the paper prints the A operand's layout and `bj * BM` in Figure 9; the layout must be the one
Figure 2 views the bytes as, `local(2, 1).column_spatial(4, 8).local(2, 1)` for int6, and the
column offset `bj * BN`). For a layout of T threads holding n bytes each, the uint8 layout is
`weight_load_layout(T, n) = local(n2).spatial(T).local(n1)`, n1 = gcd(n, 16), n2 = n // n1.
Each block handles one (BK, BN) tile; on the interpreter CPU tensors, on the GPU CUDA tensors.
"""

import tilecraft
import tilecraft.language as T
from tilecraft.dtypes import resolve
from tilecraft.layout import Fragment, weight_load_layout
from tilecraft.quant.weights import weight_layout


def tile_bytes(layout: Fragment, bits: int) -> int:
    """Bytes one packed tile holds: threads x bytes per thread (= BK * BN * bits / 8)."""
    return layout.num_threads * (layout.local_size * bits // 8)


@tilecraft.jit
def transform_b(K: int, N: int, dtype: str, layout: Fragment | None = None):
    """Tilus Figure 9: `b_out[bk, bj, :]` = the bytes of tile (bk, bj) of `b_in` (K x N of
    `dtype`, packed) in the order `weight_load_layout` loads them (see the module docstring);
    `layout` (of one tile) defaults to `weight_layout(dtype)`. Shapes are not checked here:
    `pack_weight` is the checked entry point."""
    layout = weight_layout(dtype) if layout is None else layout
    BK, BN = layout.shape
    bits = resolve(dtype).bits
    u8_layout = weight_load_layout(layout.num_threads, layout.local_size * bits // 8)

    @T.prim_func
    def transform_b(b_in: T.Tensor((K, N), dtype),
                    b_out: T.Tensor((K // BK, N // BN, BK * BN * bits // 8), "uint8")):
        with T.Kernel(K // BK, N // BN, threads=layout.num_threads) as (bk, bj):
            # the register tensor b is stored in T threads, each holding n bytes of elements
            b = T.load_global(b_in, layout=layout, offset=[bk * BK, bj * BN])
            # reinterpret the tensor with the uint8 data type and the loading layout
            b = T.view(b, dtype="uint8", layout=u8_layout)
            T.store_global(b, b_out, offset=[bk, bj, 0])

    return transform_b


@tilecraft.jit
def restore_b(K: int, N: int, dtype: str, layout: Fragment | None = None):
    """The inverse of `transform_b`: load each packed tile as Figure 2 does, view it as
    `layout` of `dtype`, store it at its place in `b_in` (K x N of `dtype`, packed)."""
    layout = weight_layout(dtype) if layout is None else layout
    BK, BN = layout.shape
    bits = resolve(dtype).bits
    u8_layout = weight_load_layout(layout.num_threads, layout.local_size * bits // 8)

    @T.prim_func
    def restore_b(b_out: T.Tensor((K // BK, N // BN, BK * BN * bits // 8), "uint8"),
                  b_in: T.Tensor((K, N), dtype)):
        with T.Kernel(K // BK, N // BN, threads=layout.num_threads) as (bk, bj):
            b = T.load_global(b_out, layout=u8_layout, offset=[bk, bj, 0])
            b = T.view(b, dtype=dtype, layout=layout)
            T.store_global(b, b_in, offset=[bk * BK, bj * BN])

    return restore_b
