"""The low-precision examples (Tilus Figures 2 and 9) against references built from
tilecraft.dequantize: f16 activations x weights of every type of the paper's list, pre-transformed
by tilecraft.quant.pack_weight; on the interpreter at small shapes and on the GPU (marked gpu) at
larger ones. Outputs are NaN-poisoned; the check is relative error < 1e-2 and no NaN."""

import pytest
import tilus_lowbit_matmul as fig2
import tilus_weight_transform as fig9
import torch

import tilecraft.quant
from tilecraft import dtypes
from tilecraft.layout import pack_weight_tiles

from .harness import assert_close

TOL = 1e-2
# (M, N, K) per device: the interpreter runs one 32-thread block per 16 x BN tile of C
SHAPES = {"cpu": (32, 32, 32), "cuda": (512, 256, 1024)}


def _matmul(wtype: str, device: str, scale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    M, N, K = SHAPES[device]
    codes = fig2.random_codes(wtype, K, N, device)
    packed = tilecraft.quant.pack_weight(codes, wtype)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    s = (0.5 + torch.rand(1, N, device=device)).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=device)
    fig2.matmul(M, N, K, wtype, scale)(a, packed, s, c)
    return c, fig2.reference(a, codes, wtype, s if scale else None)


@pytest.mark.parametrize("wtype", fig2.WEIGHT_TYPES)
def test_figure_2_matmul_of_each_weight_type_matches_the_dequantized_reference(device, wtype):
    c, ref = _matmul(wtype, device, scale=False)
    assert_close(c, ref, TOL)


@pytest.mark.parametrize("wtype", ["int6", "uint3", "float4_e2m1"])
def test_figure_2_matmul_applies_the_column_scale(device, wtype):
    c, ref = _matmul(wtype, device, scale=True)
    assert_close(c, ref, TOL)


def test_the_tile_is_16_wide_where_4_elements_per_thread_are_not_whole_bytes():
    widths = {t: fig2.tile_n(t) for t in fig2.WEIGHT_TYPES}
    assert {t for t, bn in widths.items() if bn == 16} == {"uint1", "uint3", "float3_e1m1"}
    assert all(bn == 8 for t, bn in widths.items() if dtypes.resolve(t).bits % 2 == 0)


def test_the_matmul_reads_the_bytes_pack_weight_writes():
    """A weight whose only nonzero is one element of one tile gives exactly that column of A
    times it: the kernel finds each code where pack_weight put it."""
    K, N, M = 32, 16, 16
    codes = torch.zeros(K, N, dtype=torch.uint8)
    codes[21, 11] = 0b000101  # int6 5, in tile (1, 1)
    a = torch.randn(M, K, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    packed = tilecraft.quant.pack_weight(codes, "int6")
    fig2.matmul(M, N, K, "int6")(a, packed, torch.ones(1, N, dtype=torch.float16), c)
    want = torch.zeros(M, N, dtype=torch.float16)
    want[:, 11] = (a[:, 21].float() * 5).half()
    assert torch.equal(c, want)


def test_figure_9_example_transforms_every_type_bit_exactly(device, capsys):
    errors = fig9.main(device)
    assert set(errors) == {"figure 9", *fig9.WEIGHT_TYPES}
    assert all(e == 0.0 for e in errors.values()), errors
    assert capsys.readouterr().out.count("round trip bit-exact") == len(errors)


def test_figure_2_example_runs_every_type(device, capsys):
    errors = fig2.main(device)
    assert set(errors) == {*fig2.WEIGHT_TYPES, "int6 scaled"}
    assert all(e < TOL for e in errors.values()), errors
    assert capsys.readouterr().out.count("rel err") == len(errors)


@pytest.mark.gpu
def test_pack_weight_on_the_gpu_gives_the_bytes_of_the_reference():
    codes = fig2.random_codes("int6", 1024, 512, "cuda")
    packed = tilecraft.quant.pack_weight(codes, "int6")
    layout = tilecraft.quant.weight_layout("int6")
    expected = pack_weight_tiles(codes.cpu().numpy(), 6, layout)
    assert packed.is_cuda and (packed.cpu().numpy() == expected).all()


@pytest.mark.parametrize("wtype", ["uint4", "int4"])
def test_the_tilelang_dequantizing_gemm_matches_the_reference_and_uses_the_fast_cast(device,
                                                                                    wtype):
    import dequant_gemm

    M, N, K = (128, 128, 128) if device == "cpu" else (1024, 512, 2048)
    assert dequant_gemm.run(M, N, K, wtype, device) < TOL
    if device == "cuda":
        assert "tc::fast_cast_int" in dequant_gemm.dequant_matmul(M, N, K, wtype) \
            .get_kernel_source()
