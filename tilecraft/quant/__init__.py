"""tilecraft.quant: quantized weights and the quantized matmul (docs/quant.md), and low-precision
weights laid out for fast loading (Tilus section 7.2).

    qw = tilecraft.quant.quantize(w, "uint4", group_size=128)   # w: (N, K) float
    y = tilecraft.quant.matmul(x, qw)                           # x @ qw.dequantize().T

    import tilecraft
    import tilecraft.quant

    codes = tilecraft.quantize_to(w, "int6")                 # (K, N) codes, uint8
    packed = tilecraft.quant.pack_weight(codes, "int6")      # uint8 [K/16, N/8, 16*8*6/8]
    codes2 = tilecraft.quant.unpack_weight(packed, "int6")   # == codes

`pack_weight` is the weight pre-transform of Tilus Figure 9, run as a tilecraft kernel (on the
interpreter for CPU tensors, on the GPU for CUDA tensors): a kernel that loads a tile of `packed`
with `weight_load_layout(T, n)` and views it as `layout` (Figure 2) holds the codes of the tile.
`weight_layout(dtype, tile)` is the default `layout`: a warp's mma.m16n8k16 B operand.

The package is imported lazily (`import tilecraft` does not load the language for it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["QuantizedWeight", "matmul", "pack_weight", "quantize", "restore_b", "transform_b",
           "unpack_weight", "weight_layout"]
_HOME = {"pack_weight": "weights", "unpack_weight": "weights", "weight_layout": "weights",
         "transform_b": "kernels", "restore_b": "kernels", "quantize": "quantized",
         "QuantizedWeight": "quantized", "matmul": "api"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        import importlib

        value = getattr(importlib.import_module(f"tilecraft.quant.{_HOME[name]}"), name)
        globals()[name] = value  # (later lookups skip this hook: the matmul's host path)
        return value
    raise AttributeError(f"module 'tilecraft.quant' has no attribute {name!r}")
