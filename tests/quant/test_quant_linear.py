"""tilecraft.nn.QuantLinear and quantize_model: a QuantLinear holds the weight quantize() makes,
computes x @ dequant(W).T + b on any leading shape, round-trips its state dict bit for bit,
moves with .to() and keeps its scales' dtype under casts; quantize_model swaps the Linear layers
it can (skip patterns honoured, the others left with one warning)."""

import io

import pytest
import torch
from torch import nn

import tilecraft.quant as quant
from tilecraft.nn import QuantLinear, quantize_model

from .helpers import error_here, weight


def _linear(K: int = 128, N: int = 64, bias: bool = True, seed: int = 0) -> nn.Linear:
    layer = nn.Linear(K, N, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(weight(N, K, seed=seed))
        if bias:
            layer.bias.normal_()
    return layer


def _same_weight(a, b) -> bool:
    same = torch.equal(a.packed, b.packed) and torch.equal(a.scales, b.scales)
    same = same and (a.zeros is None) == (b.zeros is None)
    if a.zeros is not None:
        same = same and torch.equal(a.zeros, b.zeros)
    return same and (a.dtype, a.group_size, a.shape, a.zero_point, a.scheme) == \
        (b.dtype, b.group_size, b.shape, b.zero_point, b.scheme)


def test_from_linear_holds_the_quantized_weight_and_a_copy_of_the_bias():
    lin = _linear()
    q = QuantLinear.from_linear(lin, dtype="int4", group_size=64)
    assert _same_weight(q.qweight, quant.quantize(lin.weight, "int4", group_size=64))
    assert torch.equal(q.bias, lin.bias) and q.bias.data_ptr() != lin.bias.data_ptr()
    assert (q.in_features, q.out_features) == (128, 64)
    assert "dtype=int4, group_size=64, scheme=symmetric" in repr(q)
    assert {n for n, _ in q.named_buffers()} == {"packed", "scales"}  # symmetric: no zeros


def test_forward_is_the_quantized_matmul_on_any_leading_shape():
    lin = _linear(seed=1)
    q = QuantLinear.from_linear(lin, dtype="uint4", group_size=64)
    x = torch.randn(2, 5, 128, dtype=torch.float16)
    y = q(x)
    ref = x.double() @ q.qweight.dequantize().double().T + lin.bias.double()
    assert y.shape == (2, 5, 64) and y.dtype == torch.float16
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("dtype, scheme, scale_dtype, bias", [
    ("uint4", None, "float16", True), ("int8", None, "bfloat16", False),
    ("float6_e3m2", "asymmetric", "float16", True)])
def test_state_dict_round_trips_bit_for_bit_through_torch_save(dtype, scheme, scale_dtype, bias):
    q = QuantLinear.from_linear(_linear(bias=bias, seed=2), dtype, 64, scheme, scale_dtype)
    buffer = io.BytesIO()
    torch.save(q.state_dict(), buffer)
    buffer.seek(0)
    fresh = QuantLinear(128, 64, bias=bias, dtype=dtype, group_size=64, scheme=scheme,
                        scale_dtype=scale_dtype)
    assert not torch.equal(fresh.packed, q.packed)
    fresh.load_state_dict(torch.load(buffer))
    assert _same_weight(fresh.qweight, q.qweight)
    assert (fresh.bias is None) if not bias else torch.equal(fresh.bias, q.bias)


def test_loading_takes_the_metadata_of_the_state_dict():
    q = QuantLinear.from_linear(_linear(seed=3), "int4", group_size=64)  # symmetric, zero 0
    fresh = QuantLinear(128, 64, dtype="uint4", group_size=64, scheme="symmetric")  # zero 8
    assert fresh.qweight.dtype == "uint4"  # made before the load: not kept after it
    fresh.load_state_dict(q.state_dict())
    assert fresh.qweight.dtype == "int4" and fresh.qweight.zero_point == 0.0
    assert torch.equal(fresh.qweight.dequantize(), q.qweight.dequantize())


def test_a_module_state_of_an_earlier_packed_layout_is_refused_on_load():
    q = QuantLinear.from_linear(_linear(seed=3), "float6_e3m2", group_size=64)
    state = q.state_dict()
    key = next(k for k in state if k.endswith("_extra_state"))
    state[key] = {**state[key], "format": "tilecraft.QuantizedWeight/1"}  # (one dense plane)
    fresh = QuantLinear(128, 64, dtype="float6_e3m2", group_size=64)
    with pytest.raises(Exception) as info:
        fresh.load_state_dict(state)
    assert "earlier tilecraft" in str(info.value)


def test_casting_the_module_reaches_the_bias_but_not_the_scales():
    q = QuantLinear.from_linear(_linear(seed=4), "uint4", group_size=64, scale_dtype="bfloat16")
    scales, zeros = q.scales.clone(), q.zeros.clone()
    q.half()
    assert q.bias.dtype == torch.float16
    assert q.scales.dtype == torch.bfloat16 and torch.equal(q.scales, scales)
    assert torch.equal(q.zeros, zeros) and q.packed.dtype == torch.uint8
    q.to(torch.float32)
    assert q.bias.dtype == torch.float32 and q.scales.dtype == torch.bfloat16


def test_an_input_of_the_wrong_width_is_refused_at_the_models_call():
    q = QuantLinear.from_linear(_linear(seed=5), "uint4", group_size=64)
    model = nn.Sequential(nn.Identity(), q)
    x = torch.randn(3, 64, dtype=torch.float16)
    err = error_here(lambda: model(x))  # ERR
    assert "K = 128" in err.message


def test_from_linear_refuses_what_is_not_a_linear_and_shapes_the_kernel_cannot_take():
    err = error_here(lambda: QuantLinear.from_linear(nn.Conv1d(4, 4, 1)))  # ERR
    assert "torch.nn.Linear" in err.message
    err = error_here(lambda: QuantLinear.from_linear(nn.Linear(100, 64)))  # ERR
    assert "(N, K) = (64, 100)" in err.message


# ---- quantize_model ---------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.ModuleDict({"q": _linear(seed=6), "o": _linear(64, 128, seed=7)})
        self.mlp = nn.Sequential(_linear(128, 128, seed=8), nn.ReLU(), _linear(128, 128, seed=9))
        self.head = nn.Linear(128, 100)  # 100 outputs: not a multiple of 64


def _kinds(model: nn.Module) -> dict[str, str]:
    return {n: type(m).__name__ for n, m in model.named_modules()
            if isinstance(m, (nn.Linear, QuantLinear))}


def test_quantize_model_swaps_every_linear_it_can_in_place_and_warns_of_the_rest():
    model = Block()
    w_q = model.attn["q"].weight.detach().clone()
    with pytest.warns(UserWarning, match=r"left 1 Linear layer\(s\).*head \(128 -> 100") as rec:
        out = quantize_model(model, dtype="uint4", group_size=64)
    assert rec[0].filename == __file__
    assert out is model
    assert _kinds(model) == {"attn.q": "QuantLinear", "attn.o": "QuantLinear",
                             "mlp.0": "QuantLinear", "mlp.2": "QuantLinear", "head": "Linear"}
    assert _same_weight(model.attn["q"].qweight, quant.quantize(w_q, "uint4", group_size=64))


def test_quantize_model_skips_names_and_patterns():
    model = Block()
    with pytest.warns(UserWarning, match="group_size 128"):  # attn.o: K = 64
        quantize_model(model, dtype="int8", group_size=128, skip=("mlp.*", "head"))
    assert _kinds(model) == {"attn.q": "QuantLinear", "attn.o": "Linear", "mlp.0": "Linear",
                             "mlp.2": "Linear", "head": "Linear"}
    assert model.attn["q"].qweight.group_size == 128


def test_quantize_model_of_a_linear_returns_its_quantlinear():
    q = quantize_model(_linear(seed=10), dtype="float8_e4m3", group_size=None)
    assert isinstance(q, QuantLinear) and q.qweight.group_size == 128


def test_quantize_model_refuses_bad_arguments_before_touching_the_model():
    model = Block()
    err = error_here(lambda: quantize_model(model, dtype="float32"))  # ERR
    assert "`dtype`" in err.message
    assert "QuantLinear" not in _kinds(model).values()


def test_tilecraft_nn_is_reached_from_tilecraft():
    import tilecraft

    assert tilecraft.nn.QuantLinear is QuantLinear and tilecraft.nn.quantize_model is \
        quantize_model


# ---- GPU --------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_a_quantlinear_moved_to_cuda_runs_there_and_matches_the_reference():
    lin = _linear(1024, 512, seed=11)
    q = QuantLinear.from_linear(lin, "uint4", group_size=128).cuda()
    assert q.packed.is_cuda and q.scales.is_cuda and q.zeros.is_cuda and q.bias.is_cuda
    x = torch.randn(4, 7, 1024, dtype=torch.bfloat16, device="cuda")
    ref = x.double() @ q.qweight.dequantize().double().T + lin.bias.double().cuda()
    y = q(x)
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2
    cpu = QuantLinear.from_linear(lin, "uint4", group_size=128)
    assert torch.equal(q.packed.cpu(), cpu.packed)  # quantized on the CPU, moved bit for bit
    gpu_made = QuantLinear.from_linear(lin.cuda(), "uint4", group_size=128)
    assert _same_weight(gpu_made.qweight.to("cpu"), cpu.qweight)  # same bits made on the GPU
