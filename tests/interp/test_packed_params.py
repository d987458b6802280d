"""The Tile IR interpreter on packed tensors: a sub-byte or custom-float parameter is the
caller's bytes (LSB first, docs/dtypes.md), read and written in place, element by element, bit
by bit (`tilecraft.interp.packed.PackedArray`)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes, interp
from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.packed import PackedArray

rng = np.random.default_rng(0)
SUBBYTE = ["uint1", "uint2", "uint3", "int2", "int3", "uint4", "int4", "int5", "uint6", "int6",
           "uint7", "int7", "float3_e1m1", "float4_e2m1", "float5_e2m2", "float6_e2m3",
           "float6_e3m2", "float7_e3m3", "float8_e3m4"]


def _codes(dt, shape) -> np.ndarray:
    return rng.integers(0, 1 << dt.bits, shape).astype(dt.code_dtype)


# ---- PackedArray ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SUBBYTE)
def test_packed_array_reads_and_writes_like_a_numpy_array_of_values(name):
    dt = dtypes.resolve(name)
    codes = _codes(dt, (5, 7))
    data = dtypes.pack(codes, dt)
    a, ref = PackedArray(data, (5, 7), dt), dt.decode(codes)
    np.testing.assert_array_equal(np.asarray(a), ref)
    for _ in range(20):
        i, j = rng.integers(0, 5, 6), rng.integers(0, 7, 6)  # repeated elements: the last wins
        v = dt.decode(_codes(dt, 6))
        a[i, j], ref[i, j] = v, v
        a[2, 1:6:2], ref[2, 1:6:2] = v[:3], v[:3]
        a[-1, -1], ref[-1, -1] = v[0], v[0]
    np.testing.assert_array_equal(data, dtypes.pack(dt.encode(ref), dt))  # the caller's bytes
    np.testing.assert_array_equal(a[1:4, ::3], ref[1:4, ::3])
    np.testing.assert_array_equal(a[..., 2], ref[..., 2])
    np.testing.assert_array_equal(a[[0, 4], 2:5], ref[[0, 4], 2:5])
    assert a[3, 4] == ref[3, 4] and a.dtype == ref.dtype


def test_a_write_changes_only_the_element_s_bits():
    data = np.full(3, 0xFF, np.uint8)
    a = PackedArray(data, (8,), "int3")  # element 2 is bits 6..8: straddles bytes 0 and 1
    a[2] = 0
    np.testing.assert_array_equal(data, [0x3F, 0xFE, 0xFF])
    assert a[2] == 0 and (a[[0, 1, 3]] == -1).all()


def test_out_of_bounds_indices_raise_index_error():
    a = PackedArray.zeros((4, 4), "uint4")
    with pytest.raises(IndexError):
        a[4, 0]
    with pytest.raises(IndexError):
        a[np.array([0, 1]), np.array([1, -5])] = 1


# ---- kernels ----------------------------------------------------------------------------------
@T.prim_func
def widen(A: T.Tensor((8, 16), "uint4"), B: T.Tensor((8, 16), "int32")):
    with T.Kernel(1, threads=128):
        for i, j in T.Parallel(8, 16):
            B[i, j] = A[i, j]


@T.prim_func
def narrow(A: T.Tensor((8, 16), "int32"), B: T.Tensor((8, 16), "int6")):
    with T.Kernel(1, threads=128):
        for i, j in T.Parallel(8, 16):
            B[i, j] = A[i, j]


@T.prim_func
def to_fp4(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float4_e2m1")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            B[i] = A[i]


@T.prim_func
def dequant(W: T.Tensor((16, 32), "int4"), S: T.Tensor((16,), "float16"),
            C: T.Tensor((16, 32), "float16")):
    with T.Kernel(2, threads=128) as bx:
        W_s = T.alloc_shared((16, 16), "int4")
        W_f = T.alloc_fragment((16, 16), "int4")
        T.copy(W[0, bx * 16], W_s)
        T.copy(W_s, W_f)
        for i, j in T.Parallel(16, 16):
            C[i, bx * 16 + j] = T.cast(W_f[i, j], "float16") * S[i]


@T.prim_func
def through_shared(A: T.Tensor((4, 16), "uint3"), B: T.Tensor((4, 16), "uint3")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((4, 16), "uint3")
        T.copy(A, S)
        T.copy(S, B)


@T.prim_func
def single_stores(B: T.Tensor((8,), "uint3"), C: T.Tensor((12,), "float6_e3m2")):
    with T.Kernel(1, threads=32):
        B[1] = 5
        for i in T.Parallel(12):
            if i % 3 == 1:
                C[i] = -2.5


@T.prim_func
def fp8_bytes(A: T.Tensor((16,), "float8_e4m3"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(16):
            B[i] = A[i]


def test_a_uint4_parameter_is_read_from_packed_bytes():
    codes = _codes(dtypes.uint4, (8, 16))
    out = np.zeros((8, 16), np.int32)
    interp.execute(widen, [dtypes.pack(codes, "uint4"), out], {})
    np.testing.assert_array_equal(out, codes)


def test_stores_into_an_int6_parameter_wrap_and_pack():
    a = rng.integers(-100, 100, (8, 16)).astype(np.int32)
    out = np.zeros(96, np.uint8)
    interp.execute(narrow, [a, out], {})
    np.testing.assert_array_equal(out, dtypes.pack(dtypes.int6.encode(a), "int6"))


def test_stores_into_float4_round_to_nearest_even_and_saturate():
    a = np.concatenate([np.array([0.25, 0.75, 1.25, 2.5, 5.0, 7.0, -100.0, 1e-3]),
                        rng.standard_normal(56) * 4]).astype(np.float32)
    out = np.zeros(32, np.uint8)
    interp.execute(to_fp4, [a, out], {})
    np.testing.assert_array_equal(out, dtypes.pack(dtypes.float4_e2m1.from_float(a),
                                                   "float4_e2m1"))


def test_int4_weights_copy_to_shared_and_fragment_then_dequantize():
    codes = _codes(dtypes.int4, (16, 32))
    s = rng.standard_normal(16).astype(np.float16)
    c = np.zeros((16, 32), np.float16)
    interp.execute(dequant, [dtypes.pack(codes, "int4"), s, c], {})
    ref = (dtypes.int4.decode(codes).astype(np.float16) * s[:, None]).astype(np.float16)
    np.testing.assert_array_equal(c, ref)


def test_a_copy_through_shared_memory_keeps_every_bit():
    codes = _codes(dtypes.uint3, (4, 16))
    out = np.zeros(24, np.uint8)
    interp.execute(through_shared, [dtypes.pack(codes, "uint3"), out], {})
    np.testing.assert_array_equal(out, dtypes.pack(codes, "uint3"))


def test_single_element_stores_leave_the_other_bits_of_their_bytes():
    b = np.full(3, 0xFF, np.uint8)
    codes = _codes(dtypes.float6_e3m2, (12,))
    c = dtypes.pack(codes, "float6_e3m2")
    interp.execute(single_stores, [b, c], {})
    np.testing.assert_array_equal(b, [0xEF, 0xFF, 0xFF])  # element 1 = bits 3..5 = 0b101
    codes[1::3] = dtypes.float6_e3m2.from_float(np.float32(-2.5))
    np.testing.assert_array_equal(c, dtypes.pack(codes, "float6_e3m2"))


def test_float8_parameters_take_bytes_too():
    codes = np.arange(16, dtype=np.uint8) * 7
    out = np.zeros(16, np.float32)
    interp.execute(fp8_bytes, [codes, out], {})
    np.testing.assert_array_equal(out, dtypes.float8_e4m3.to_float(codes))


def test_packed_bytes_of_the_wrong_count_are_tc609_at_the_parameter():
    with pytest.raises(TilecraftError) as err:
        interp.execute(widen, [np.zeros(63, np.uint8), np.zeros((8, 16), np.int32)], {})
    assert err.value.code == "TC609" and "64 bytes, got 63" in err.value.message
    assert err.value.line == widen.params[0].span.line


# ---- through the jit (the runtime's argument checks) -------------------------------------------
def test_a_jit_kernel_on_the_interpreter_takes_torch_uint8_bytes():
    import torch

    kernel = tilecraft.jit(narrow, target="interp")
    a = torch.randint(-100, 100, (8, 16), dtype=torch.int32)
    out = torch.zeros(4, 24, dtype=torch.uint8)  # any shape: only the byte count matters
    kernel(a, out)
    np.testing.assert_array_equal(out.numpy().ravel(),
                                  dtypes.pack(dtypes.int6.encode(a.numpy()), "int6"))




@tilecraft.jit(target="interp")
@T.prim_func
def widened_abs(A: T.Tensor((16,), "int4"), C: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(16):
            C[i] = T.cast(T.abs(A[i]), "int32")


def test_abs_of_a_sub_byte_int_wraps_to_its_width_before_widening():
    codes = np.arange(16).astype(np.uint8)  # int4 values 0..7, -8..-1
    c = np.zeros(16, np.int32)
    widened_abs(dtypes.pack(codes, "int4"), c)
    values = dtypes.int4.to_float(codes).astype(np.int32)
    np.testing.assert_array_equal(c, np.where(values == -8, -8, np.abs(values)))


@pytest.mark.gpu
def test_abs_of_a_sub_byte_int_wraps_on_the_gpu_as_on_the_interpreter():
    import torch

    kernel = tilecraft.jit(widened_abs.func)
    codes = np.arange(16).astype(np.uint8)
    packed = torch.from_numpy(dtypes.pack(codes, "int4"))
    cpu, gpu = torch.zeros(16, dtype=torch.int32), torch.zeros(16, dtype=torch.int32).cuda()
    widened_abs(packed.numpy(), cpu.numpy())
    kernel(packed.cuda(), gpu)
    assert torch.equal(cpu, gpu.cpu())
