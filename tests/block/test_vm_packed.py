"""The block VM on packed global tensors: Tilus Figure 9 (the weight transform) and Figure 2
(the low-precision matmul) for every type of issue 12's list on the caller's bytes, view_global
aliasing bytes across dtypes, stores that share bytes, and bit-exact register views."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilecraft import dtypes
from tilecraft.block import (
    AllocateGlobal,
    AllocateRegister,
    BlockProgram,
    Cast,
    Dot,
    Fill,
    GlobalTensor,
    LoadGlobal,
    RegisterTensor,
    StoreGlobal,
    View,
    ViewGlobal,
)
from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.packed import PackedArray
from tilecraft.ir import Var
from tilecraft.layout import column_local, local, pack_weight_tiles, spatial, weight_load_layout

from .programs import here, serial

TYPES = ["int6", "uint1", "uint2", "uint3", "uint4", "uint8", "int4", "int8", "float8_e4m3",
         "float6_e3m2", "float4_e2m1", "float3_e1m1"]
M, K, BM, BK = 32, 32, 16, 16
ACC0 = local(2, 1).spatial(8, 4).local(1, 2)  # mma.m16n8k16 accumulator, one warp
A_T = column_local(2, 2).spatial(8, 4).local(1, 2)
B0 = local(2, 1).column_spatial(4, 8).local(2, 1)


def _tiles(dt: dtypes.DataType):
    """(B tile layout, accumulator layout, BN, bytes per thread): BN widened until each thread
    holds whole bytes of the weight tile."""
    r = 8 // math.gcd(4 * dt.bits, 8)
    b_t = local(1, r) * B0
    return b_t, local(1, r) * ACC0, 8 * r, b_t.local_size * dt.bits // 8


def _weight_arg(dt: dtypes.DataType, codes: np.ndarray) -> np.ndarray:
    """What a caller passes for a `dt` tensor of these codes: the packed bytes for packed types
    and float8, else the values."""
    if not dt.is_standard or dt.is_float:
        return dtypes.pack(codes, dt)
    return dt.decode(codes)


def _figure9(dt: dtypes.DataType, n_cols: int) -> BlockProgram:
    """w[K, N] of dt -> per-tile u8 rows: load a tile, view each thread's bits as bytes, store."""
    b_t, _, bn, n = _tiles(dt)
    gin = GlobalTensor.create("w", dt, (K, n_cols))
    gout = GlobalTensor.create("b", "uint8", (K // BK, n_cols // bn, 32 * n))
    w = RegisterTensor.create("w_r", dt, b_t)
    wu = RegisterTensor.create("w_u", "uint8", weight_load_layout(32, n))
    prog = BlockProgram.create("fig9", (gin, gout), (K // BK, n_cols // bn), 32, [])
    k, j = prog.block_vars
    body = [AllocateRegister.create(w), AllocateRegister.create(wu),
            LoadGlobal.create(gin, w, offset=(k * BK, j * bn)), View.create(w, wu),
            StoreGlobal.create(wu, gout, offset=(k, j, 0))]
    return BlockProgram.create("fig9", (gin, gout), prog.grid, 32, body, block_vars=(k, j))


def _figure9_inverse(dt: dtypes.DataType, n_cols: int) -> BlockProgram:
    """Per-tile u8 rows -> w[K, N] of dt: every thread stores bits of bytes other threads
    store bits of too."""
    b_t, _, bn, n = _tiles(dt)
    gin = GlobalTensor.create("b", "uint8", (K // BK, n_cols // bn, 32 * n))
    gout = GlobalTensor.create("w", dt, (K, n_cols))
    wu = RegisterTensor.create("w_u", "uint8", weight_load_layout(32, n))
    w = RegisterTensor.create("w_r", dt, b_t)
    prog = BlockProgram.create("unfig9", (gin, gout), (K // BK, n_cols // bn), 32, [])
    k, j = prog.block_vars
    body = [AllocateRegister.create(wu), AllocateRegister.create(w),
            LoadGlobal.create(gin, wu, offset=(k, j, 0)), View.create(wu, w),
            StoreGlobal.create(w, gout, offset=(k * BK, j * bn))]
    return BlockProgram.create("unfig9", (gin, gout), prog.grid, 32, body, block_vars=(k, j))


def _figure2(dt: dtypes.DataType, n_cols: int) -> BlockProgram:
    """C = A @ dequant(B): B's transformed u8 tiles loaded, viewed as dt, cast to f16, dot."""
    b_t, acc_t, bn, n = _tiles(dt)
    ga = GlobalTensor.create("a", "float16", (M, K))
    gb = GlobalTensor.create("b", "uint8", (K // BK, n_cols // bn, 32 * n))
    gc = GlobalTensor.create("c", "float16", (M, n_cols))
    acc = RegisterTensor.create("acc", "float32", acc_t)
    a = RegisterTensor.create("ta", "float16", A_T)
    b = RegisterTensor.create("tb", "uint8", weight_load_layout(32, n))
    b1 = RegisterTensor.create("b1", dt, b_t)
    b2 = RegisterTensor.create("b2", "float16", b_t)
    c = RegisterTensor.create("tc", "float16", acc_t)
    prog = BlockProgram.create("fig2", (ga, gb, gc), (M // BM, n_cols // bn), 32, [])
    bi, bj = prog.block_vars
    bk = Var.create("bk")
    body = [AllocateRegister.create(x) for x in (a, b, b1, b2)] + [
        AllocateRegister.create(acc, init=0.0),
        serial(bk, K // BK, [LoadGlobal.create(ga, a, offset=(bi * BM, bk * BK)),
                             LoadGlobal.create(gb, b, offset=(bk, bj, 0)), View.create(b, b1),
                             Cast.create(b1, b2), Dot.create(a, b2, acc, out=acc)]),
        AllocateRegister.create(c), Cast.create(acc, c),
        StoreGlobal.create(c, gc, offset=(bi * BM, bj * bn))]
    return BlockProgram.create("fig2", (ga, gb, gc), prog.grid, 32, body, block_vars=(bi, bj))


def _codes(dt: dtypes.DataType, shape, seed: int) -> np.ndarray:
    codes = np.random.default_rng(seed).integers(0, 1 << dt.bits, shape).astype(dt.code_dtype)
    if dt.has_nan:
        codes[np.isnan(dt.to_float(codes))] = 0  # finite weights
    return codes


@pytest.mark.parametrize("name", TYPES)
def test_figure9_on_packed_bytes_is_pack_weight_tiles_and_figure2_dequantizes(name):
    dt = dtypes.resolve(name)
    b_t, _, bn, _ = _tiles(dt)
    n_cols = 2 * bn
    codes = _codes(dt, (K, n_cols), 0)
    packed = pack_weight_tiles(codes, dt.bits, b_t)
    out = np.zeros_like(packed)
    _figure9(dt, n_cols).run(_weight_arg(dt, codes), out)
    np.testing.assert_array_equal(out, packed)

    a = np.random.default_rng(1).standard_normal((M, K)).astype(np.float16)
    c = np.full((M, n_cols), np.nan, np.float16)
    _figure2(dt, n_cols).run(a, out, c)
    w = dt.to_float(codes).astype(np.float64)
    ref = a.astype(np.float64) @ w
    bound = np.abs(a.astype(np.float64)) @ np.abs(w)  # f32 accumulation, one f16 rounding
    assert (np.abs(c.astype(np.float64) - ref) <= 2.0**-11 * np.abs(ref) + 1e-6 * bound).all()


@pytest.mark.parametrize("name", TYPES)
def test_inverse_figure9_stores_every_bit_of_shared_bytes(name):
    dt = dtypes.resolve(name)
    b_t, _, bn, _ = _tiles(dt)
    codes = _codes(dt, (K, 2 * bn), 2)
    w = np.full_like(_weight_arg(dt, codes), 0xA5 if dt.bits < 8 else 0)  # stale bits
    _figure9_inverse(dt, 2 * bn).run(pack_weight_tiles(codes, dt.bits, b_t), w)
    np.testing.assert_array_equal(w, _weight_arg(dt, codes))


def test_a_tile_past_the_end_leaves_the_last_byte_s_other_bits():
    g = GlobalTensor.create("g", "int3", (5,))  # 15 bits: bit 15 of byte 1 is no element's
    r = RegisterTensor.create("r", "int3", spatial(8).replicate(4))
    prog = BlockProgram.create("p", (g,), (1,), 32, [AllocateRegister.create(r, init=-1),
                                                      StoreGlobal.create(r, g)])
    data = np.array([0, 0x80], np.uint8)
    prog.run(data)
    np.testing.assert_array_equal(data, [0xFF, 0xFF])
    data[:] = 0x00
    prog.run(data)
    np.testing.assert_array_equal(data, [0xFF, 0x7F])


def _view_global_program(src_dtype: str, src_shape, out_dtype: str, n: int) -> BlockProgram:
    """View src as out_dtype[n], copy the view's values into `o` (int32), then store 1 into
    every element of the view."""
    src = GlobalTensor.create("src", src_dtype, src_shape)
    view = GlobalTensor.create("v", out_dtype, (n,))
    o = GlobalTensor.create("o", "int32", (n,))
    r = RegisterTensor.create("r", out_dtype, local(n // 32).spatial(32))
    r32 = RegisterTensor.create("r32", "int32", r.layout)
    body = [ViewGlobal.create(src, view), AllocateRegister.create(r),
            AllocateRegister.create(r32), LoadGlobal.create(view, r), Cast.create(r, r32),
            StoreGlobal.create(r32, o), Fill.create(r, 1), StoreGlobal.create(r, view)]
    return BlockProgram.create("p", (src, o), (1,), 32, body)


def test_view_global_of_uint8_bytes_as_int6_aliases_them():
    codes = _codes(dtypes.int6, (128,), 3)
    data = dtypes.pack(codes, dtypes.int6)  # 96 bytes
    o = np.zeros(128, np.int32)
    _view_global_program("uint8", (96,), "int6", 128).run(data, o)
    np.testing.assert_array_equal(o, dtypes.int6.decode(codes))
    np.testing.assert_array_equal(data, dtypes.pack(np.ones(128, np.uint8), dtypes.int6))


def test_view_global_of_an_int6_tensor_as_uint8_aliases_its_bytes():
    codes = _codes(dtypes.int6, (4, 32), 4)
    data = dtypes.pack(codes, dtypes.int6)
    o = np.zeros(96, np.int32)
    _view_global_program("int6", (4, 32), "uint8", 96).run(data, o)
    np.testing.assert_array_equal(o, dtypes.pack(codes, dtypes.int6))
    np.testing.assert_array_equal(data, np.ones(96, np.uint8))  # written through the u8 view


def test_a_packed_workspace_is_zeroed_and_its_bytes_can_be_viewed():
    ws = GlobalTensor.create("ws", "uint4", (64,))
    wb = GlobalTensor.create("wb", "uint8", (32,))
    o = GlobalTensor.create("o", "uint8", (32,))
    r = RegisterTensor.create("r", "uint4", local(2).spatial(32))
    b = RegisterTensor.create("b", "uint8", spatial(32))
    body = [AllocateGlobal.create(ws), AllocateRegister.create(r, init=3),
            StoreGlobal.create(r, ws), ViewGlobal.create(ws, wb), AllocateRegister.create(b),
            LoadGlobal.create(wb, b), StoreGlobal.create(b, o)]
    out = np.zeros(32, np.uint8)
    BlockProgram.create("p", (o,), (1,), 32, body).run(out)
    np.testing.assert_array_equal(out, np.full(32, 0x33, np.uint8))


def test_packed_bytes_of_the_wrong_count_are_tc609():
    prog = _view_global_program("int6", (4, 32), "uint8", 96)
    with pytest.raises(TilecraftError) as err:
        prog.run(np.zeros(95, np.uint8), np.zeros(96, np.int32))
    assert err.value.code == "TC609" and "96 bytes, got 95" in err.value.message


def test_a_packed_tensor_with_an_unbound_dim_is_tc609():
    n = Var.create("n")
    g = GlobalTensor.create("g", "uint4", (n,))
    prog = BlockProgram.create("p", (g,), (1,), 32, [])
    with pytest.raises(TilecraftError) as err:
        prog.run(np.zeros(4, np.uint8))
    assert err.value.code == "TC609" and "byte count" in err.value.message


def test_view_global_with_other_total_bits_at_run_time_is_tc603_at_its_line():
    n = Var.create("n")
    src = GlobalTensor.create("src", "uint8", (n,))
    view = GlobalTensor.create("v", "int6", (32,))
    line = here() + 1
    prog = BlockProgram.create("p", (src,), (1,), 32, [ViewGlobal.create(src, view)])
    with pytest.raises(TilecraftError) as err:
        prog.run(np.zeros(25, np.uint8))
    assert err.value.code == "TC603" and err.value.line == line
    assert "200 bits" in err.value.message and "192 bits" in err.value.message


@pytest.mark.parametrize("name, codes", [
    ("float16", [0x7C01, 0xFC01, 0x7E00, 0x7FFF, 0x7C00, 0x8000]),
    ("bfloat16", [0x7F81, 0xFFC1, 0x7FC0, 0x0001]),
    ("float32", [0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0x80000000]),
    ("float8_e4m3", [0xFF, 0x7F, 0x80, 0x01]),
    ("float8_e5m2", [0x7D, 0xFE, 0xFF, 0x7C]),
])
def test_view_keeps_nan_payloads_bit_exact(name, codes):
    dt = dtypes.resolve(name)
    uint = dtypes.resolve(f"uint{dt.bits}")
    n = 32
    data = np.resize(np.asarray(codes, uint.code_dtype), n)
    gx = GlobalTensor.create("x", dt, (n,))
    gu = GlobalTensor.create("u", uint, (n,))
    gy = GlobalTensor.create("y", dt, (n,))
    x, u, y = (RegisterTensor.create(k, t, spatial(32)) for k, t in (("xr", dt), ("ur", uint),
                                                                       ("yr", dt)))
    body = [AllocateRegister.create(t) for t in (x, u, y)] + [
        LoadGlobal.create(gx, x), View.create(x, u), StoreGlobal.create(u, gu),
        View.create(u, y), StoreGlobal.create(y, gy)]
    out_u, out_y = np.zeros(n, uint.code_dtype), np.zeros(n, uint.code_dtype)
    BlockProgram.create("p", (gx, gu, gy), (1,), 32, body).run(
        data.view(dt.np_dtype), out_u, out_y.view(dt.np_dtype))
    np.testing.assert_array_equal(out_u, data)
    np.testing.assert_array_equal(out_y, data)


def test_a_packed_array_argument_is_used_in_place():
    codes = _codes(dtypes.uint3, (40,), 5)
    w = PackedArray(dtypes.pack(codes, dtypes.uint3), (40,), dtypes.uint3)
    g = GlobalTensor.create("g", "uint3", (40,))
    r = RegisterTensor.create("r", "uint3", spatial(32))
    prog = BlockProgram.create("p", (g,), (1,), 32, [AllocateRegister.create(r, init=7),
                                                      StoreGlobal.create(r, g, offset=(4,))])
    prog.run(w)
    np.testing.assert_array_equal(w.codes(), np.r_[codes[:4], np.full(32, 7), codes[36:]])
