"""Weight pre-transform on the host side: `pack_weight`, `unpack_weight`, `weight_layout`.

    packed = pack_weight(codes, "int6")            # codes: (K, N) integer codes of int6
    packed.shape                                   # (K // 16, N // 8, 16 * 8 * 6 // 8)
    unpack_weight(packed, "int6")                  # the (K, N) codes again, uint8

**Input**: the codes of the weight, an integer tensor of shape (K, N) with values in
[0, 2**bits) (what `tilecraft.quantize_to(w, dtype)` returns), torch (CPU or CUDA) or numpy; not
the packed bytes (`tilecraft.unpack(bytes, dtype, (K, N))` gives the codes of those).
**Output**: uint8 of shape (K / BK, N / BN, BK * BN * bits / 8) on the input's device (numpy for
numpy input): tile (i, j) in the byte order that `T.load_global(packed, layout=
weight_load_layout(T, n), offset=[i, j, 0])` followed by `T.view(..., dtype=dtype, layout=layout)`
turns back into tile (i, j) of the codes, bit for bit `layout.pack_weight_tiles(codes, bits,
layout)`. The work is the kernels of quant/kernels.py (Tilus Figure 9 and its inverse).

`layout` is the register layout of one (BK, BN) tile in the kernel that will load the weight; by
default `weight_layout(dtype, tile)`. A misuse is TC321 at the caller's line, naming the argument.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilecraft import dtypes
from tilecraft.diagnostics.errors import caller_span, entry_point
from tilecraft.dtypes import DataType
from tilecraft.layout import Fragment, local
from tilecraft.lowbit import LowbitError

__all__ = ["pack_weight", "unpack_weight", "weight_layout"]

# the mma.m16n8k16 B operand (16 x 8, one warp): thread t holds 4 elements, 2 x 2 down a column
MMA_B = local(2, 1).column_spatial(4, 8).local(2, 1)


def _refuse(func: str, detail: str, hint: str = "") -> LowbitError:
    return LowbitError("TC321", span=caller_span(), func=f"quant.{func}", detail=detail,
                       hint=hint)


def _dtype(func: str, dtype: Any) -> DataType:
    try:
        dt = dtypes.resolve(dtype)
    except (ValueError, TypeError) as exc:
        raise _refuse(func, f"unknown data type {dtype!r} (argument `dtype`)", str(exc)) from None
    if dt.bits > 8 or dt.is_bool:
        raise _refuse(func, f"argument `dtype` is {dt.name}: weights are packed for types of "
                      "1 to 8 bits", "sub-byte ints, int8, uint8, fp8 or a custom float")
    return dt


def default_tile(dtype: Any) -> tuple[int, int]:
    """(16, 8) when 4 elements of `dtype` fill whole bytes, else (16, 16) (8 per thread)."""
    bits = dtypes.resolve(dtype).bits
    return 16, 8 * (8 // math.gcd(4 * bits, 8))


@entry_point
def weight_layout(dtype: Any, tile: tuple[int, int] | None = None) -> Fragment:
    """The register layout a warp's mma.m16n8k16 B operand of a (BK, BN) tile has:
    `local(BK // 16, BN // 8) * local(2, 1).column_spatial(4, 8).local(2, 1)` (32 threads,
    BK * BN / 32 elements each). `tile` defaults to (16, 8), or (16, 16) for odd bit widths,
    where 4 elements per thread would not fill whole bytes."""
    return _weight_layout("weight_layout", _dtype("weight_layout", dtype), tile)


def _weight_layout(func: str, dt: DataType, tile: Any) -> Fragment:
    bk, bn = _tile(func, tile, dt)
    if bk % 16 or bn % 8:
        raise _refuse(func, f"argument `tile` is {(bk, bn)}: the default layout (the mma B "
                      "operand) is made of (16, 8) blocks", "give BK a multiple of 16 and BN "
                      "of 8, or pass `layout=` the register layout of your kernel's weight tile")
    return local(bk // 16, bn // 8) * MMA_B if (bk, bn) != (16, 8) else MMA_B


def _tile(func: str, tile: Any, dt: DataType) -> tuple[int, int]:
    if tile is None:
        return default_tile(dt)
    try:
        bk, bn = (int(x) for x in tile)
    except (TypeError, ValueError):
        raise _refuse(func, f"argument `tile` must be (BK, BN), got {tile!r}") from None
    if bk < 1 or bn < 1:
        raise _refuse(func, f"argument `tile` must be positive, got {(bk, bn)}")
    return bk, bn


def _layout(func: str, dt: DataType, layout: Any, tile: Any) -> Fragment:
    """The tile's register layout, checked: rank 2, no replication, whole bytes per thread."""
    arg = "layout" if layout is not None else "tile"
    if layout is None:
        layout = _weight_layout(func, dt, tile)
    elif not isinstance(layout, Fragment):
        raise _refuse(func, f"argument `layout` must be a register layout, got {layout!r}",
                      "e.g. tilecraft.quant.weight_layout(dtype, (BK, BN))")
    elif tile is not None and tuple(_tile(func, tile, dt)) != tuple(layout.shape):
        raise _refuse(func, f"argument `tile` {tuple(tile)} differs from the shape "
                      f"{tuple(layout.shape)} of `layout`", "leave `tile` out with a layout")
    if layout.ndim != 2:
        raise _refuse(func, f"argument `layout` has rank {layout.ndim}; a weight tile is 2-D")
    if layout.is_replicated:
        raise _refuse(func, f"argument `layout` {layout} holds elements on several threads",
                      "pack with the layout of one copy (e.g. one warp's) and load it with "
                      "`replicate(w) * weight_load_layout(32, n)`")
    bits = layout.local_size * dt.bits
    if bits % 8:
        raise _refuse(func, f"argument `{arg}`: in tiles {tuple(layout.shape)} of {dt.name}, "
                      f"each thread holds {layout.local_size} x {dt.bits} bits = {bits} bits, "
                      "not whole bytes",
                      f"use `tile={default_tile(dt)}` (more elements per thread)")
    return layout


def _to_torch(x: Any) -> tuple[Any, bool]:
    import torch

    if isinstance(x, torch.Tensor):
        return x, False
    return torch.from_numpy(np.ascontiguousarray(x)), True


@entry_point
def pack_weight(codes: Any, dtype: Any, layout: Fragment | None = None,
                tile: tuple[int, int] | None = None) -> Any:
    """(K, N) codes of `dtype` -> uint8 [K / BK, N / BN, BK * BN * bits / 8], the layout of
    Tilus Figure 9 for register layout `layout` (default `weight_layout(dtype, tile)`), computed
    by the Figure 9 kernel on the codes' device (module docstring)."""
    import torch

    dt = _dtype("pack_weight", dtype)
    lay = _layout("pack_weight", dt, layout, tile)
    codes, was_numpy = _to_torch(codes)
    if codes.dim() != 2:
        raise _refuse("pack_weight", f"argument `codes` has shape {tuple(codes.shape)}; a "
                      "weight is a (K, N) tensor of codes")
    if codes.is_floating_point() or codes.is_complex() or codes.dtype == torch.bool:
        raise _refuse("pack_weight", f"argument `codes` holds {codes.dtype} values, not codes",
                      f"make codes with `tilecraft.quantize_to(w, \"{dt.name}\")`")
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >> dt.bits):
        raise _refuse("pack_weight", f"argument `codes` holds values outside [0, "
                      f"{1 << dt.bits}), the codes of {dt.name}",
                      f"signed or float values become codes with `tilecraft.quantize_to(w, "
                      f"\"{dt.name}\")`")
    K, N = (int(x) for x in codes.shape)
    _check_divides("pack_weight", "codes", (K, N), lay)
    from tilecraft import lowbit
    from tilecraft.quant.kernels import tile_bytes, transform_b

    bk, bn = lay.shape
    out = torch.empty(K // bk, N // bn, tile_bytes(lay, dt.bits), dtype=torch.uint8,
                      device=codes.device)
    if out.numel():
        transform_b(K, N, dt.name, lay)(_param(lowbit.pack(codes, dt), dt, (K, N)), out)
    return out.numpy() if was_numpy else out


@entry_point
def unpack_weight(packed: Any, dtype: Any, layout: Fragment | None = None,
                  tile: tuple[int, int] | None = None) -> Any:
    """The inverse of `pack_weight`: uint8 [K / BK, N / BN, BK * BN * bits / 8] -> the (K, N)
    codes (uint8, on the input's device; numpy for numpy input), by the inverse kernel."""
    import torch

    dt = _dtype("unpack_weight", dtype)
    lay = _layout("unpack_weight", dt, layout, tile)
    packed, was_numpy = _to_torch(packed)
    bk, bn = lay.shape
    from tilecraft import lowbit
    from tilecraft.quant.kernels import restore_b, tile_bytes

    per_tile = tile_bytes(lay, dt.bits)
    if packed.dim() != 3 or packed.shape[2] != per_tile or packed.dtype != torch.uint8:
        raise _refuse("unpack_weight", f"argument `packed` is {packed.dtype} of shape "
                      f"{tuple(packed.shape)}; tiles {(bk, bn)} of {dt.name} pack into uint8 "
                      f"of shape (K / {bk}, N / {bn}, {per_tile})",
                      "pass what pack_weight returned, with the same dtype, layout and tile")
    K, N = int(packed.shape[0]) * bk, int(packed.shape[1]) * bn
    storage = torch.zeros(dtypes.packed_nbytes(K * N, dt), dtype=torch.uint8,
                          device=packed.device)
    if storage.numel():
        restore_b(K, N, dt.name, lay)(packed.contiguous(), _param(storage, dt, (K, N)))
    codes = lowbit.unpack(storage, dt, (K, N))
    return codes.cpu().numpy() if was_numpy else codes


def _check_divides(func: str, arg: str, shape: tuple[int, int], lay: Fragment) -> None:
    for name, size, block in zip(("K", "N"), shape, lay.shape):
        if size % block:
            raise _refuse(func, f"argument `{arg}` has shape {shape}: {name} = {size} is not a "
                          f"multiple of B{name} = {block} (tile {tuple(lay.shape)})",
                          "pad the weight to whole tiles, or pick another `tile`")


def _param(storage: Any, dt: DataType, shape: tuple[int, int]) -> Any:
    """The kernel argument for a (K, N) tensor of `dt` held in packed bytes `storage`: the
    bytes themselves, but 8-bit ints as their own torch dtype and shape."""
    import torch

    if dt.name == "uint8":
        return storage.view(shape)
    if dt.name == "int8":
        return storage.view(torch.int8).view(shape)
    return storage
