"""Tilus Figure 9: the weight pre-transform ("Change Layout" in Figure 2 (b)) that lets
examples/tilus_lowbit_matmul.py load a low-bit weight tile with one coalesced byte load.

The weight W [K, N] of int6 is cut into (BK, BN) = (16, 8) tiles. In the matmul, a warp holds a
tile in the mma.m16n8k16 B layout `local(2, 1).column_spatial(4, 8).local(2, 1)`: 4 int6 = 24
bits per thread. The transform loads each tile in that layout, `view`s each thread's 24 bits
as 3 uint8 in the layout `local(3).spatial(32)` and stores them contiguously, giving uint8
[K / BK, N / BN, BK * BN * 6 / 8]; the matmul loads 3 bytes per thread with that layout and views
them back. The kernel is `tilecraft.quant.transform_b` (tilecraft/quant/kernels.py):

    with T.Kernel(K // BK, N // BN, threads=32) as (bk, bj):
        b = T.load_global(b_in, layout=local(2, 1).column_spatial(4, 8).local(2, 1),
                          offset=[bk * BK, bj * BN])
        b = T.view(b, dtype="uint8", layout=local(3).spatial(32))
        T.store_global(b, b_out, offset=[bk, bj, 0])

`tilecraft.quant.pack_weight(codes, dtype)` runs it for any type of 1 to 8 bits (and
`unpack_weight` its inverse), on the interpreter for CPU tensors, on the GPU for CUDA tensors.

    python examples/tilus_weight_transform.py
"""

import torch

import tilecraft
import tilecraft.quant
from tilecraft import dtypes
from tilecraft.layout import pack_weight_tiles, weight_load_layout
from tilecraft.quant import transform_b, weight_layout

WEIGHT_TYPES = ["int6", "uint1", "uint2", "uint3", "uint4", "uint8", "int4", "int8",
                "float8_e4m3", "float6_e3m2", "float4_e2m1", "float3_e1m1"]


def figure_9(device: str, K: int = 64, N: int = 32) -> float:
    """int6 weights quantized, transformed by the Figure 9 kernel, checked against the numpy
    reference and restored; prints and returns the relative error of the restored weights."""
    b_layout = weight_layout("int6")  # (16, 8) tile, 4 x int6 per thread
    print("int6 tile layout (row, column -> thread:element):\n" + b_layout.show())
    print(f"loaded as uint8 {weight_load_layout(32, 3)}: 3 bytes per thread")
    w = 8 * torch.randn(K, N, device=device)
    codes = tilecraft.quantize_to(w, "int6")
    packed = torch.empty(K // 16, N // 8, 16 * 8 * 6 // 8, dtype=torch.uint8, device=device)
    transform_b(K, N, "int6", b_layout)(tilecraft.pack(codes, "int6"), packed)
    expected = pack_weight_tiles(codes.cpu().numpy(), 6, b_layout)
    assert (packed.cpu().numpy() == expected).all(), "Figure 9 differs from the numpy reference"
    return check("int6 (Figure 9)", codes, packed, "int6", device)


def check(label: str, codes: torch.Tensor, packed: torch.Tensor, wtype: str, device: str
          ) -> float:
    """Restore `packed` with unpack_weight; print and return the relative error of its values
    against those of `codes`."""
    restored = tilecraft.quant.unpack_weight(packed, wtype)
    ref = tilecraft.dequantize(codes, wtype).double()
    got = tilecraft.dequantize(restored, wtype).double()
    err = ((got - ref).norm() / ref.norm()).item()
    same = "bit-exact" if torch.equal(restored, codes) else "DIFFERENT"
    print(f"{label:18s} {tuple(codes.shape)} -> {tuple(packed.shape)} on {device}: "
          f"round trip {same}, rel err {err:.2e}")
    return err


def main(device: str = "cpu") -> dict[str, float]:
    errors = {"figure 9": figure_9(device)}
    gen = torch.Generator(device).manual_seed(0)
    for wtype in WEIGHT_TYPES:
        bits = dtypes.resolve(wtype).bits
        codes = torch.randint(0, 1 << bits, (64, 32), dtype=torch.uint8, device=device,
                              generator=gen)
        codes[tilecraft.dequantize(codes, wtype).isnan()] = 0  # fp8 NaN codes: no error norm
        packed = tilecraft.quant.pack_weight(codes, wtype)
        layout = weight_layout(wtype)
        same = (packed.cpu().numpy() == pack_weight_tiles(codes.cpu().numpy(), bits, layout))
        assert same.all(), f"pack_weight({wtype}) differs from the numpy reference"
        errors[wtype] = check(wtype, codes, packed, wtype, device)
    return errors


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
