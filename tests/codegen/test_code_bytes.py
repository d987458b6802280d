"""6- and 7-bit codes in bytes (`T.cast_bytes`, block instruction `cast_bytes`): the quantized
matmul stores 6- and 7-bit integer weights and float6_e3m2 32 codes in 4 * bits bytes (4 * bits
in the bytes' low bits, the rest spread over their top bits; a float's sign at each byte's top:
dtypes/packing.py), loaded in two or three parts, and casts them by one `tc::fast_cast_bytes`
or `tc::fast_cast_bytes_float` (their bits for every code: test_fast_casts_host.py).
The VM states the meaning (decode, minus the offset, convert); the GPU gives the VM's bits; the
qmm kernels print the call with the zero point in its offset; other forms are refused at their
line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.dtypes import resolve
from tilecraft.dtypes.packing import pack_bytes, unpack_bytes
from tilecraft.interp.values import store_cast
from tilecraft.layout import local, spatial
from tilecraft.quant import qmm
from tilecraft.quant.qmm import choose_config, mma_layout, pack_codes, unpack_codes
from tilecraft.quant.qmm_kernel import byte_layout, qmm_kernel


@tilecraft.jit(out_idx=[-1])
def bytes_tile(dtype, out_dtype, offset=0, scale=0, parts=None):
    """One packed (16, 64) tile of `dtype` codes cast by one warp; `parts`: the byte layouts
    (uint{p}'s) of the loads, 4 p bytes a thread each, from 0, 512, 768 of the tile (default:
    the quantized matmul's)."""
    bits = resolve(dtype).bits
    parts = parts or ((2, 1) if bits == 3 else (4, 2, 1)[:bits - 4])

    @T.prim_func
    def k(W: T.Tensor((1, 128 * bits), "uint8"), Y: T.Tensor((16, 64), out_dtype)):
        with T.Kernel(1, threads=32):
            loaded = []
            at = 0
            for p in parts:
                loaded.append(T.load_global(W, layout=byte_layout(1, 1, p), offset=[0, at]))
                at += 128 * p
            y = T.cast_bytes(loaded, dtype, out_dtype, layout=mma_layout(), offset=offset,
                             scale=scale)
            T.store_global(y, Y, offset=[0, 0])

    return k


def _tile(seed: int, dtype: str):
    bits = resolve(dtype).bits
    codes = torch.from_numpy(np.random.default_rng(seed).integers(0, 1 << bits, (16, 64)))
    codes = codes.to(torch.uint8)
    codes[0, :] = torch.arange(64, dtype=torch.uint8) % (1 << bits)  # every code, two rows
    codes[8, :] = torch.arange(64, 128, dtype=torch.uint8) % (1 << bits)
    # (the quantized matmul's tile of these bytes: pack_codes for the types it stores so)
    return codes, qmm._pack_bytes(codes, resolve(dtype)).reshape(1, -1).contiguous()


def _want(codes, dtype: str, out: str, offset: int, scale: int) -> np.ndarray:
    t = resolve(dtype)
    values = t.decode(codes.numpy()).astype(np.float64) * 2.0 ** scale if t.is_float else \
        codes.numpy().astype(np.float64) - offset
    return np.asarray(store_cast(resolve(out), values)).view(np.int16)


CASES = [("uint7", "float16", 0, 0), ("uint7", "float16", 64, 0), ("uint7", "float16", 127, 0),
         ("uint7", "bfloat16", 0, 0), ("uint7", "bfloat16", 100, 0), ("uint6", "float16", 0, 0),
         ("uint6", "float16", 32, 0), ("uint6", "bfloat16", 127, 0),
         ("float6_e3m2", "float16", 0, 0), ("float6_e3m2", "float16", 0, -12),
         ("float6_e3m2", "float16", 0, -5), ("float6_e3m2", "bfloat16", 0, 0),
         ("float6_e3m2", "bfloat16", 0, -3), ("float6_e2m3", "float16", 0, -14),
         ("float6_e2m3", "float16", 0, -2), ("float6_e2m3", "bfloat16", 0, 0),
         ("uint3", "float16", 0, 0),
         ("uint3", "float16", 11, 0), ("uint3", "bfloat16", 63, 0)]


@pytest.mark.parametrize("bits", [6, 7])
def test_bytes_round_trip_and_their_rule(bits):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 1 << bits, (3, 64)).astype(np.uint8)
    b = pack_bytes(codes, bits)
    assert b.shape == (3, 8 * bits)
    np.testing.assert_array_equal(unpack_bytes(b, bits), codes)
    g, stored = codes[1, 32:], b[1, 4 * bits:]  # the second group of a row
    top, words = 8 - bits, bits // (8 - bits)
    for e in range(4 * bits):
        assert stored[e] & ((1 << bits) - 1) == g[e]
    for j in range(top):  # code 4 bits + 4 j + k: T bits from each of `words` bytes' tops
        for k in range(4):
            got = sum(int(stored[4 * (j * words + i) + k] >> bits) << (top * i)
                      for i in range(words))
            assert got == g[4 * bits + 4 * j + k]
    for dtype in (f"uint{bits}", f"int{bits}"):
        c = torch.from_numpy(rng.integers(0, 1 << bits, (32, 128)).astype(np.uint8))
        assert torch.equal(unpack_codes(pack_codes(c, dtype), dtype), c)


@pytest.mark.parametrize("dtype, out, offset, scale", CASES)
def test_the_vm_decodes_the_bytes(dtype, out, offset, scale):
    codes, packed = _tile(1, dtype)
    y = bytes_tile(dtype, out, offset, scale)(packed)
    assert y.dtype == resolve(out).torch_dtype
    np.testing.assert_array_equal(y.view(torch.int16).numpy(),
                                  _want(codes, dtype, out, offset, scale))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out, offset, scale", CASES)
def test_the_gpu_gives_the_vms_bits(dtype, out, offset, scale):
    codes, packed = _tile(2, dtype)
    kernel = bytes_tile(dtype, out, offset, scale)
    want = kernel(packed)
    got = kernel(packed.cuda())
    want_func = "tc::fast_cast_nibbles3" if dtype == "uint3" else "tc::fast_cast_bytes"
    assert want_func in kernel.get_kernel_source()
    assert torch.equal(got.cpu().view(torch.int16), want.view(torch.int16))


def test_parts_that_do_not_make_4_bits_bytes_a_group_are_refused_at_their_line():
    kernel = bytes_tile("uint7", "float16", parts=(4, 2))
    with pytest.raises(TilecraftError) as info:
        kernel(torch.zeros(1, 896, dtype=torch.uint8))
    err = info.value
    assert err.code == "TC603" and "24 bytes, not 28" in err.message
    assert "T.cast_bytes" in err.span.source_line()


@pytest.mark.parametrize("dtype", ["uint5", "int7", "float8_e4m3", "float6_e1m4"])
def test_codes_of_other_types_are_refused(dtype):
    """(5 bits and signed ints at their line: the VM's meaning is unsigned 3, 6 or 7 bits; a
    float without 2 or 3 mantissa bits runs on the VM, and the GPU refuses it)"""
    if dtype == "float6_e1m4":
        with pytest.raises(TilecraftError) as info:
            generate_cuda(bytes_tile(dtype, "float16").func, "sm_90a")
        assert info.value.code == "TC502" and "2 or 3 mantissa bits" in info.value.message
        return
    with pytest.raises(TilecraftError) as info:
        bytes_tile(dtype, "float16", parts=(4, 2, 1)).func
    err = info.value
    assert err.code == "TC603" and "3-, 6- or 7-bit unsigned ints" in err.message
    assert "T.cast_bytes" in err.span.source_line()


def test_an_offset_the_fast_routine_cannot_take_is_refused_on_the_gpu_only():
    kernel = bytes_tile("uint7", "float16", 200)
    codes, packed = _tile(3, "uint7")
    want = store_cast(dt.resolve("float16"), codes.numpy().astype(np.float64) - 200)
    np.testing.assert_array_equal(kernel(packed).view(torch.int16).numpy(),
                                  np.asarray(want).view(np.int16))  # (the VM takes any offset)
    with pytest.raises(TilecraftError) as info:
        generate_cuda(kernel.func, "sm_90a")
    assert info.value.code == "TC502" and "minus 0..127" in info.value.message


@pytest.mark.parametrize("M, wtype, zero, xtype, want", [
    (4096, "uint7", 64, "float16", "tc::fast_cast_bytes<7, false, 32, 64, 16, 8, 4>"),
    (4096, "int7", 0, "bfloat16", "tc::fast_cast_bytes<7, true, 32, 64, 16, 8, 4>"),
    (1, "uint7", 0, "float16", "tc::fast_cast_bytes<7, false, 32, 0, 16, 8, 4>"),
    (16, "int7", 0, "float16", "tc::fast_cast_bytes<7, false, 32, 64, 16, 8, 4>"),
    (4096, "uint6", 32, "float16", "tc::fast_cast_bytes<6, false, 32, 32, 16, 8, 0>"),
    (1, "int6", 0, "bfloat16", "tc::fast_cast_bytes<6, true, 32, 32, 16, 8, 0>"),
    (1, "float6_e3m2", 0, "float16", "tc::fast_cast_bytes_float<6, 3, false, 32, -12, 16, 8, 0>"),
    (16, "uint3", 4, "float16", "tc::fast_cast_nibbles3<false, 32, 4, 8, 4, 0>"),
    (4096, "int3", 0, "bfloat16", "tc::fast_cast_nibbles3<true, 32, 4, 8, 4, 0>"),
    (4096, "float6_e3m2", 0, "bfloat16", "tc::fast_cast_bytes_float<6, 3, true, 32, 0, 16, 8, 0>")])
def test_the_quantized_matmul_casts_6_and_7_bit_weights_from_bytes(M, wtype, zero, xtype, want):
    N, K = 256, 1024
    cfg = choose_config(M, N, K, resolve(wtype).bits, 128, wtype)
    kernel = qmm_kernel(M, N, K, wtype, xtype, 128, zero, zero == 0 and wtype.startswith("u"),
                        False, **cfg)
    src = generate_cuda(kernel.func, "sm_90a").source
    assert want in src and "tc::fast_cast_planes" not in src


@pytest.mark.parametrize("dtype, scheme, M, device", [
    ("uint7", "asymmetric", 1, "cpu"), ("int7", "symmetric", 16, "cpu"),
    ("uint6", "symmetric", 1, "cpu"), ("int6", "asymmetric", 3, "cpu"),
    ("uint3", "asymmetric", 16, "cpu"), ("int3", "symmetric", 1, "cpu"),
    pytest.param("uint7", "symmetric", 3, "cuda", marks=pytest.mark.gpu),
    pytest.param("int7", "asymmetric", 16, "cuda", marks=pytest.mark.gpu),
    ("float6_e3m2", "symmetric", 1, "cpu"),
    pytest.param("uint6", "asymmetric", 16, "cuda", marks=pytest.mark.gpu),
    pytest.param("float6_e3m2", "symmetric", 16, "cuda", marks=pytest.mark.gpu),
    pytest.param("uint3", "asymmetric", 1, "cuda", marks=pytest.mark.gpu)])
def test_two_tiles_a_warp_cast_two_groups_a_thread(dtype, scheme, M, device):
    """(decode tiles of 128 channels: each thread's two tiles are two groups of the cast)"""
    import tilecraft.quant as quant
    from tilecraft.quant import qmm

    gen = torch.Generator().manual_seed(5)
    qw = quant.quantize(torch.randn(256, 512, generator=gen).to(device), dtype, scheme=scheme)
    x = torch.randn(M, 512, generator=gen).half().to(device)
    bits = resolve(dtype).bits
    cfg = dict(choose_config(M, 256, 512, bits, 128, dtype), rows=2, split=1, last_block=False)
    y = qmm.quant_matmul(x, qw, config=cfg)
    ref = x.double() @ qw.dequantize().double().T.to(device)
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("M, wtype, xtype, want", [
    (1, "uint6", "float16", "tc::fast_cast_bytes_z<6, false, 32, 16, 8, 0>"),
    (16, "uint7", "bfloat16", "tc::fast_cast_bytes_z<7, true, 32, 16, 8, 4>"),
    (4096, "uint7", "float16", "tc::fast_cast_bytes_z<7, false, 32, 16, 8, 4>"),
    (1, "uint3", "float16", "tc::fast_cast_nibbles3_z<false, 32, 0, 8, 4, 0>"),
    (16, "uint3", "bfloat16", "tc::fast_cast_nibbles3_z<true, 32, 0, 8, 4, 0>"),
    (4096, "uint3", "float16", "tc::fast_cast_nibbles3_z<false, 32, 0, 8, 4, 0>")])
def test_zero_codes_join_the_bytes_cast_as_its_subtrahends(M, wtype, xtype, want):
    """(asymmetric uint3 / uint6 / uint7: each pair's zero points in the magic subtrahend, no
    subtraction of its own and no X sums for the zeros)"""
    N, K = 256, 1024
    cfg = dict(choose_config(M, N, K, resolve(wtype).bits, 128, wtype), zero_codes=True)
    src = generate_cuda(qmm_kernel(M, N, K, wtype, xtype, 128, 0, True, False, **cfg).func,
                        "sm_90a").source
    assert want in src and "const tc::u32 zs" in src
    assert "tc::fast_cast_bytes<" not in src and "tc::fast_cast_nibbles3<" not in src
    assert "xsum" not in src


def test_asymmetric_3_6_and_7_bit_weights_take_zero_codes():
    import tilecraft.quant as quant
    from tilecraft.quant import qmm

    for dtype in ("uint3", "uint6", "uint7"):
        qw = quant.quantize(torch.randn(128, 256), dtype)
        assert qw.zeros is not None and qmm.zero_codes(qw) is not None


@tilecraft.jit(out_idx=[-1])
def bytes_minus_codes(rows, mask=127, dtype="uint7"):
    """Codes in bytes (one row of 1024) minus zero codes `codes & mask` of (rows, 1024): with
    rows = 2 the subtraction broadcasts the cast over two rows (a shape the fused cast does not
    make: it stays a subtraction of its own)."""
    bits = resolve(dtype).bits
    small = spatial(1, 32) * local(1, 4 * bits)
    codes_layout = spatial(1, 32) * local(1, 32)
    zeros_layout = local(rows, 1) * spatial(1, 32) * local(1, 32)

    @T.prim_func
    def k(W: T.Tensor((1, 128 * bits), "uint8"), Z: T.Tensor((rows, 1024), "uint8"),
          Y: T.Tensor((rows, 1024), "float16")):
        with T.Kernel(1, threads=32):
            b = T.load_global(W, layout=small, offset=[0, 0])
            w = T.cast_bytes([b], dtype, "float16", layout=codes_layout)
            zc = T.load_global(Z, layout=zeros_layout, offset=[0, 0])
            zf = T.cast(zc & mask, "float16")
            y = w - zf
            T.store_global(y, Y, offset=[0, 0])

    return k


@pytest.mark.parametrize("dtype, rows, mask, fused", [
    ("uint7", 1, 127, True), ("uint7", 2, 127, False), ("uint7", 1, 255, False),
    ("uint3", 1, 63, True), ("uint3", 2, 63, False), ("uint3", 1, 64, False)])
def test_the_zero_codes_fuse_only_where_the_fused_cast_computes_the_same(dtype, rows, mask,
                                                                          fused):
    """(a broadcast of the cast, or codes that may reach 128 (3 bits to f16: 64), keep their
    subtraction)"""
    bits = resolve(dtype).bits
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 1 << bits, (32, 32)).astype(np.uint8)  # thread t's 32 codes
    W = torch.from_numpy(pack_bytes(codes, bits).reshape(1, 128 * bits))
    Z = torch.from_numpy(rng.integers(0, 256, (rows, 1024)).astype(np.uint8))
    kernel = bytes_minus_codes(rows, mask, dtype)
    y = kernel(W, Z)
    want = codes.reshape(1, 1024).astype(np.float64) - (Z.numpy() & mask)
    np.testing.assert_array_equal(y.numpy(), want.astype(np.float16))
    src = generate_cuda(kernel.func, "sm_90a").source
    assert ("tc::fast_cast_bytes_z<" in src or "tc::fast_cast_nibbles3_z<" in src) == fused


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, rows, mask", [("uint7", 1, 127), ("uint7", 2, 127),
                                               ("uint3", 1, 63), ("uint3", 2, 63)])
def test_the_gpu_subtracts_the_zero_codes_as_the_vm(dtype, rows, mask):
    bits = resolve(dtype).bits
    rng = np.random.default_rng(8)
    W = torch.from_numpy(pack_bytes(rng.integers(0, 1 << bits, (32, 32)).astype(np.uint8), bits)
                         .reshape(1, 128 * bits))
    Z = torch.from_numpy(rng.integers(0, 256, (rows, 1024)).astype(np.uint8))
    kernel = bytes_minus_codes(rows, mask, dtype)
    want = kernel(W, Z)
    got = kernel(W.cuda(), Z.cuda())
    assert torch.equal(got.cpu().view(torch.int16), want.view(torch.int16))
