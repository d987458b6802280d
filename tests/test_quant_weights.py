"""tilecraft.quant.pack_weight / unpack_weight (the Tilus Figure 9 kernel and its inverse):
bit-exact with the numpy reference `layout.pack_weight_tiles` for every type of the paper's list,
default and custom register layouts, numpy and torch inputs, CPU (interpreter) and CUDA (gpu);
TC321 at the caller's line, naming the argument, for every misuse."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.quant as quant
from tilecraft import dtypes
from tilecraft.layout import local, pack_weight_tiles, replicate, spatial

TYPES = ["int6", "uint1", "uint2", "uint3", "uint4", "uint8", "int4", "int8", "float8_e4m3",
         "float6_e3m2", "float4_e2m1", "float3_e1m1"]
MMA_B = local(2, 1).column_spatial(4, 8).local(2, 1)


def _codes(dtype: str, K: int, N: int, seed: int = 0, device: str = "cpu") -> torch.Tensor:
    bits = dtypes.resolve(dtype).bits
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1 << bits, (K, N), dtype=torch.uint8, generator=gen).to(device)


@pytest.mark.parametrize("dtype", TYPES)
def test_pack_weight_is_the_numpy_reference_and_unpack_weight_inverts_it(dtype):
    layout = quant.weight_layout(dtype)
    K, N = 2 * layout.shape[0], 3 * layout.shape[1]
    codes = _codes(dtype, K, N)
    packed = quant.pack_weight(codes, dtype)
    bits = dtypes.resolve(dtype).bits
    assert packed.dtype == torch.uint8 and packed.shape == (2, 3, 16 * layout.shape[1] * bits // 8)
    np.testing.assert_array_equal(packed.numpy(), pack_weight_tiles(codes.numpy(), bits, layout))
    assert torch.equal(quant.unpack_weight(packed, dtype), codes)


def test_default_layout_is_the_mma_b_operand_with_whole_bytes_per_thread():
    assert quant.weight_layout("int6") == MMA_B
    assert quant.weight_layout("uint3") == local(1, 2) * MMA_B  # 8 x 3 bits per thread
    assert quant.weight_layout("uint4", (32, 16)) == local(2, 2) * MMA_B
    packed = quant.pack_weight(_codes("uint1", 16, 16), "uint1")
    assert packed.shape == (1, 1, 32)  # one byte per thread


@pytest.mark.parametrize("dtype, layout", [
    ("uint4", spatial(4, 8).local(4, 1)),                 # rows of 4 per thread, 2 bytes
    ("int6", spatial(2, 1) * MMA_B),                      # two warps, (32, 8) tiles
    ("float4_e2m1", local(1, 2).spatial(8, 4).local(1, 2)),  # (8, 16) tiles
])
def test_a_given_layout_is_packed_for_and_restored_with(dtype, layout):
    K, N = 2 * layout.shape[0], 2 * layout.shape[1]
    codes = _codes(dtype, K, N, seed=1)
    bits = dtypes.resolve(dtype).bits
    packed = quant.pack_weight(codes, dtype, layout=layout)
    np.testing.assert_array_equal(packed.numpy(), pack_weight_tiles(codes.numpy(), bits, layout))
    assert torch.equal(quant.unpack_weight(packed, dtype, layout=layout), codes)


def test_numpy_codes_give_numpy_bytes_and_any_integer_dtype_is_taken():
    codes = _codes("int4", 32, 16, seed=2)
    packed = quant.pack_weight(codes.numpy().astype(np.int64), "int4")
    assert isinstance(packed, np.ndarray) and packed.dtype == np.uint8
    np.testing.assert_array_equal(packed, quant.pack_weight(codes, "int4").numpy())
    back = quant.unpack_weight(packed, "int4")
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, codes.numpy())
    assert torch.equal(quant.pack_weight(codes.to(torch.int32), "int4"),
                       quant.pack_weight(codes, "int4"))


def test_quantized_float_weights_survive_the_round_trip():
    w = 4 * torch.randn(48, 24)
    codes = tilecraft.quantize_to(w, "float6_e3m2")
    back = quant.unpack_weight(quant.pack_weight(codes, "float6_e3m2", tile=(16, 8)),
                               "float6_e3m2", tile=(16, 8))
    assert torch.equal(tilecraft.dequantize(back, "float6_e3m2"),
                       tilecraft.dequantize(codes, "float6_e3m2"))


def test_tilecraft_quant_is_loaded_on_first_use():
    code = ("import sys, tilecraft; assert 'tilecraft.quant' not in sys.modules; "
            "import tilecraft.quant; assert 'tilecraft.language' not in sys.modules; "
            "assert tilecraft.quant.pack_weight.__module__ == 'tilecraft.quant.weights'")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert tilecraft.quant is quant


# ---- misuse: TC321 at the caller's line, naming the argument ---------------------------------
def _error(call) -> tilecraft.TilecraftError:
    with pytest.raises(tilecraft.TilecraftError) as info:
        call()
    err = info.value
    assert err.code == "TC321" and err.file == __file__
    assert "# ERR" in err.span.source_line(), err.span.source_line()
    return err


def test_a_k_that_is_not_a_multiple_of_the_tile_names_codes():
    codes = _codes("int6", 24, 16)
    err = _error(lambda: quant.pack_weight(codes, "int6"))  # ERR
    assert "`codes`" in err.message and "K = 24 is not a multiple of BK = 16" in err.message


def test_an_n_that_is_not_a_multiple_of_the_tile_names_codes():
    codes = _codes("uint4", 32, 20)
    err = _error(lambda: quant.pack_weight(codes, "uint4", tile=(16, 8)))  # ERR
    assert "`codes`" in err.message and "N = 20 is not a multiple of BN = 8" in err.message


def test_a_tile_whose_threads_hold_part_of_a_byte_names_tile():
    codes = _codes("uint3", 32, 32)
    err = _error(lambda: quant.pack_weight(codes, "uint3", tile=(16, 8)))  # ERR
    assert "`tile`" in err.message and "(16, 8)" in err.message
    assert "4 x 3 bits = 12 bits, not whole bytes" in err.message and "(16, 16)" in err.hint


def test_a_tile_the_default_layout_cannot_cover_names_tile():
    err = _error(lambda: quant.weight_layout("int4", (8, 8)))  # ERR
    assert "`tile`" in err.message


def test_a_tile_that_contradicts_the_layout_names_tile():
    codes = _codes("int4", 32, 16)
    err = _error(lambda: quant.pack_weight(codes, "int4", layout=MMA_B, tile=(32, 16)))  # ERR
    assert "`tile`" in err.message and "(16, 8)" in err.message


def test_a_replicated_layout_names_layout():
    codes = _codes("int4", 16, 8)
    err = _error(lambda: quant.pack_weight(codes, "int4", layout=replicate(2) * MMA_B))  # ERR
    assert "`layout`" in err.message and "several threads" in err.message


@pytest.mark.parametrize("bad, text", [
    (torch.randn(16, 8), "float32 values, not codes"),
    (torch.full((16, 8), 16, dtype=torch.uint8), "outside [0, 16)"),
    (torch.zeros(16, 8, 1, dtype=torch.uint8), "shape (16, 8, 1)"),
])
def test_codes_that_are_not_codes_of_the_type_name_codes(bad, text):
    err = _error(lambda: quant.pack_weight(bad, "int4"))  # ERR
    assert "`codes`" in err.message and text in err.message


def test_a_type_of_more_than_8_bits_names_dtype():
    err = _error(lambda: quant.pack_weight(_codes("uint8", 16, 8), "float16"))  # ERR
    assert "`dtype`" in err.message


def test_unpacking_bytes_of_another_tile_size_names_packed():
    packed = quant.pack_weight(_codes("int6", 32, 16), "int6")  # 96 bytes a tile
    err = _error(lambda: quant.unpack_weight(packed, "int4"))  # ERR
    assert "`packed`" in err.message and "64" in err.message


# ---- CUDA tensors: the same kernels on the GPU -----------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TYPES)
def test_pack_weight_on_cuda_tensors_runs_on_the_gpu_and_matches_the_reference(dtype):
    layout = quant.weight_layout(dtype)
    codes = _codes(dtype, 1024, 512, seed=3, device="cuda")
    packed = quant.pack_weight(codes, dtype)
    assert packed.is_cuda
    bits = dtypes.resolve(dtype).bits
    expected = pack_weight_tiles(codes.cpu().numpy(), bits, layout)
    np.testing.assert_array_equal(packed.cpu().numpy(), expected)
    back = quant.unpack_weight(packed, dtype)
    assert back.is_cuda and torch.equal(back, codes)
