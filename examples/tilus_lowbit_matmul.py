"""Tilus Figure 2, name for name: C = A @ B for f16 activations A [M, K] and low-bit weights B
[K, N] of any type of 1 to 8 bits (int6 in the paper), optionally times a per-column scale.

B is pre-transformed once (Tilus Figure 9, `tilecraft.quant.pack_weight`, examples/
tilus_weight_transform.py) into uint8 [K / BK, N / BN, BK * BN * bits / 8], so that each k step
loads its (BK, BN) tile with one coalesced `load_global` of bytes (`local(3).spatial(32)` for
int6: 3 bytes per thread), `view`s the 24 bits each thread holds as 4 int6 in the layout the
mma.m16n8k16 B operand wants (`local(2, 1).column_spatial(4, 8).local(2, 1)`), casts them to
f16 and accumulates with `dot`. One warp per block computes a 16 x BN tile of C. Where 4
elements per thread are not whole bytes (1, 3, 5, 7 bits), the tile is 16 x 16 (8 per thread).
Runs on the block VM (CPU tensors) and on the GPU (CUDA tensors).

    python examples/tilus_lowbit_matmul.py
"""

import torch

import tilecraft
import tilecraft.language as T
import tilecraft.quant
from tilecraft import dtypes
from tilecraft.layout import column_local, local, weight_load_layout

# the types of the paper's evaluation: ints, uints and floats of 1 to 8 bits
WEIGHT_TYPES = ["int6", "uint1", "uint2", "uint3", "uint4", "uint8", "int4", "int8",
                "float8_e4m3", "float6_e3m2", "float4_e2m1", "float3_e1m1"]
BM, BK = 16, 16


def tile_n(wtype: str) -> int:
    """BN: 8, or 16 where 4 elements of `wtype` per thread would not fill whole bytes."""
    return tilecraft.quant.weight_layout(wtype).shape[1]


@tilecraft.jit
def matmul(M, N, K, wtype="int6", scale=False):
    BN = tile_n(wtype)
    r = BN // 8  # mma n8 blocks per tile
    bits = dtypes.resolve(wtype).bits
    # the mma B operand, r blocks of local(2, 1).column_spatial(4, 8).local(2, 1) side by side
    b_layout = tilecraft.quant.weight_layout(wtype, (BK, BN))
    b_bytes = b_layout.local_size * bits // 8  # bytes per thread: 3 for int6
    acc_layout = local(1, r) * local(2, 1).spatial(8, 4).local(1, 2)
    a_layout = column_local(2, 2).spatial(8, 4).local(1, 2)

    @T.prim_func
    def matmul(ga: T.Tensor((M, K), "float16"),
               gb: T.Tensor((K // BK, N // BN, BK * BN * bits // 8), "uint8"),
               gs: T.Tensor((1, N), "float16"),  # column scales, read when `scale`
               gc: T.Tensor((M, N), "float16")):
        with T.Kernel(M // BM, N // BN, threads=32) as (bi, bj):
            acc = T.allocate_register("float32", layout=acc_layout, init=0.0)
            for bk in range(K // BK):
                a = T.load_global(ga, layout=a_layout, offset=[bi * BM, bk * BK])
                b = T.load_global(gb, layout=weight_load_layout(32, b_bytes), offset=[bk, bj, 0])
                b1 = T.view(b, dtype=wtype, layout=b_layout)  # reinterpret register tensor
                b2 = T.cast(b1, "float16")
                T.dot(a, b2, acc, out=acc)  # acc = dot(a, b2) + acc
            if scale:  # per-column scale, held by the threads that hold the column
                s = T.load_global(gs, layout=acc_layout.reduce(0), offset=[0, bj * BN])
                acc = acc * T.cast(s, "float32")
            acc = T.cast(acc, "float16")
            T.store_global(acc, gc, offset=[bi * BM, bj * BN])

    return matmul


def random_codes(wtype: str, K: int, N: int, device: str) -> torch.Tensor:
    """Uniform random codes of `wtype` (K, N), uint8; NaN codes (fp8) replaced by 0."""
    dt = dtypes.resolve(wtype)
    codes = torch.randint(0, 1 << dt.bits, (K, N), dtype=torch.uint8, device=device)
    values = tilecraft.dequantize(codes, wtype)
    return torch.where(torch.isnan(values), 0, codes).to(torch.uint8)


def reference(a: torch.Tensor, codes: torch.Tensor, wtype: str, s=None) -> torch.Tensor:
    """A @ dequantize(codes) (times the column scale), in float64."""
    ref = a.double() @ tilecraft.dequantize(codes, wtype).double()
    return ref if s is None else ref * s.double()


def run(wtype: str, device: str, M=32, N=32, K=64, scale=False) -> float:
    """Quantized weights of `wtype`, pre-transformed, multiplied; print and return rel err."""
    codes = random_codes(wtype, K, N, device)
    packed = tilecraft.quant.pack_weight(codes, wtype, tile=(BK, tile_n(wtype)))
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    s = (1 + torch.rand(1, N, device=device)).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=device)
    matmul(M, N, K, wtype, scale)(a, packed, s, c)
    ref = reference(a, codes, wtype, s if scale else None)
    err = ((c.double() - ref).norm() / ref.norm()).item()
    label = f"f16 x {wtype}" + (" x scale" if scale else "")
    print(f"{label:26s} {M}x{N}x{K} on {device}: rel err {err:.2e}")
    return err


def main(device: str = "cpu") -> dict[str, float]:
    errors = {t: run(t, device) for t in WEIGHT_TYPES}
    errors["int6 scaled"] = run("int6", device, scale=True)
    return errors


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
