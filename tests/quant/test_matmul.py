"""tilecraft.quant.matmul: x @ dequant(W).T (+ bias) for every weight type, f16 and bf16
activations, any M and leading shape, against the float64 reference built from
`QuantizedWeight.dequantize()` (relative error < 1e-2); on the interpreter at small shapes and on
the GPU (marked gpu) at larger ones. Misuse is TC321 at the user's line, before any launch."""

import pytest
import torch

import tilecraft.quant as quant
import tilecraft.quant.qmm as qmm

from .helpers import TYPES, error_here, weight

TOL = 1e-2
ACTS = [torch.float16, torch.bfloat16]
MS = (1, 3, 16, 100)  # the M values the interpreter can afford (4096 on the GPU)


def _check(x: torch.Tensor, qw, bias=None) -> torch.Tensor:
    y = quant.matmul(x, qw, bias)
    ref = x.double() @ qw.dequantize().double().T.to(x.device)
    if bias is not None:
        ref = ref + bias.double()
    assert y.dtype == x.dtype and y.shape == ref.shape and y.device == x.device
    assert not torch.isnan(y).any()
    err = ((y.double() - ref).norm() / ref.norm()).item()
    assert err < TOL, f"relative error {err:.3e}"
    return y


@pytest.mark.parametrize("act", ACTS, ids=["f16", "bf16"])
@pytest.mark.parametrize("dtype", TYPES)
def test_matmul_of_each_type_matches_the_dequantized_reference(dtype, act):
    qw = quant.quantize(weight(64, 128), dtype, group_size=64)
    for M in MS:
        _check(torch.randn(M, 128, dtype=act), qw)


@pytest.mark.parametrize("dtype, scheme, group, scale_dtype", [
    ("uint4", "symmetric", 64, "float16"),   # constant zero point 8
    ("int4", "asymmetric", 128, "float16"),  # per channel, zeros
    ("float4_e2m1", "asymmetric", 64, "float16"),  # zeros of 0
    ("uint8", "asymmetric", 64, "bfloat16"),
])
def test_matmul_applies_each_scheme_and_scale_dtype(dtype, scheme, group, scale_dtype):
    qw = quant.quantize(weight(64, 128, seed=1), dtype, group_size=group, scheme=scheme,
                        scale_dtype=scale_dtype)
    _check(torch.randn(5, 128, dtype=torch.float16), qw)


def test_leading_dims_and_a_bias_are_handled():
    qw = quant.quantize(weight(64, 128, seed=2), "uint4", group_size=64)
    bias = torch.randn(64)  # float32: cast to x's dtype
    y = _check(torch.randn(2, 3, 128, dtype=torch.bfloat16), qw, bias)
    assert y.shape == (2, 3, 64)
    assert _check(torch.randn(128, dtype=torch.float16), qw).shape == (64,)


def test_a_strided_x_is_made_contiguous_for_the_kernel():
    qw = quant.quantize(weight(64, 128, seed=3), "int8", group_size=64)
    x = torch.randn(128, 4, dtype=torch.float16).T  # (4, 128), not contiguous
    _check(x, qw)


# ---- the host side alone (a stand-in kernel: what matmul hands it) ----------------------------
def test_matmul_hands_the_kernel_a_contiguous_2d_x_and_a_bias_of_x_dtype(monkeypatch):
    calls = []

    def stand_in(x2d, qweight, bias):
        calls.append((x2d, qweight, bias))
        return torch.ones(x2d.shape[0], qweight.shape[0], dtype=x2d.dtype)

    monkeypatch.setattr(qmm, "quant_matmul", stand_in, raising=False)
    qw = quant.quantize(weight(64, 128), "uint4", group_size=64)
    x = torch.randn(2, 128, 3, dtype=torch.bfloat16).transpose(1, 2)  # (2, 3, 128) strided
    y = quant.matmul(x, qw, torch.randn(64, dtype=torch.float64))
    x2d, got_qw, bias = calls[0]
    assert x2d.shape == (6, 128) and x2d.is_contiguous() and torch.equal(x2d, x.reshape(6, 128))
    assert got_qw is qw and bias.dtype == torch.bfloat16 and bias.shape == (64,)
    assert y.shape == (2, 3, 64)
    empty = quant.matmul(torch.randn(0, 4, 128, dtype=torch.float16), qw)
    assert empty.shape == (0, 4, 64) and len(calls) == 1  # M = 0: no launch


# ---- misuse -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qw():
    return quant.quantize(weight(64, 128), "uint4", group_size=64)


def test_an_x_whose_last_dim_is_not_k_is_refused(qw):
    x = torch.randn(3, 64, dtype=torch.float16)
    err = error_here(lambda: quant.matmul(x, qw))  # ERR
    assert "(3, 64)" in err.message and "K = 128" in err.message


@pytest.mark.parametrize("act", [torch.float32, torch.int8])
def test_an_x_that_is_not_float16_or_bfloat16_is_refused(qw, act):
    x = torch.ones(3, 128, dtype=act)
    err = error_here(lambda: quant.matmul(x, qw))  # ERR
    assert "float16 or bfloat16" in err.message and ".half()" in err.hint


def test_a_weight_that_is_not_quantized_is_refused():
    x = torch.randn(3, 128, dtype=torch.float16)
    err = error_here(lambda: quant.matmul(x, torch.randn(64, 128)))  # ERR
    assert "`qweight` is a Tensor" in err.message and "quantize" in err.hint


def test_an_x_on_another_device_is_refused(qw):
    x = torch.empty(3, 128, dtype=torch.float16, device="meta")
    err = error_here(lambda: quant.matmul(x, qw))  # ERR
    assert "meta" in err.message and "cpu" in err.message


@pytest.mark.parametrize("bias, text", [(torch.randn(128), "shape (128,), expected (64,)"),
                                        (torch.ones(64, dtype=torch.int32), "float torch"),
                                        ([0.0] * 64, "got list")])
def test_a_bias_that_is_not_one_value_per_output_is_refused(qw, bias, text):
    x = torch.randn(3, 128, dtype=torch.float16)
    err = error_here(lambda: quant.matmul(x, qw, bias))  # ERR
    assert "`bias`" in err.message and text in err.message


# ---- GPU: the same at larger shapes ------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("act", ACTS, ids=["f16", "bf16"])
@pytest.mark.parametrize("dtype", TYPES)
def test_matmul_on_the_gpu_matches_the_reference(dtype, act):
    qw = quant.quantize(weight(512, 1024, device="cuda"), dtype, group_size=128)
    assert qw.packed.is_cuda
    for M in (*MS, 4096):
        _check(torch.randn(M, 1024, dtype=act, device="cuda"), qw)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["uint4", "int4", "float4_e2m1", "uint8"])
def test_matmul_on_the_gpu_at_prefill_size_with_bias(dtype):
    qw = quant.quantize(weight(1024, 2048, device="cuda"), dtype, group_size=128)
    bias = torch.randn(1024, device="cuda")
    _check(torch.randn(4, 1024, 2048, dtype=torch.bfloat16, device="cuda"), qw, bias)


@pytest.mark.gpu
def test_a_cpu_x_with_a_cuda_weight_is_refused():
    qw = quant.quantize(weight(64, 128), "uint4", group_size=64).to("cuda")
    x = torch.randn(3, 128, dtype=torch.float16)
    err = error_here(lambda: quant.matmul(x, qw))  # ERR
    assert "cuda" in err.message


@pytest.mark.parametrize("dtype", ["uint4", "uint8"])
def test_whole_zero_points_go_to_the_kernel_as_codes_and_others_as_themselves(dtype):
    """`quantize`'s zeros are whole numbers below 2^bits: the kernel takes them as uint8 codes
    and subtracts them inside the fast cast (qmm.zero_codes); zeros a user made fractional, or
    changed in place, are seen and take the general path, with the same results."""
    qw = quant.quantize(weight(64, 128, seed=2), dtype, group_size=64)
    codes = qmm.zero_codes(qw)
    assert codes is not None and codes.dtype == torch.uint8
    assert torch.equal(codes.to(qw.zeros.dtype), qw.zeros)
    assert qmm.zero_codes(qw) is codes  # (checked once)
    for M in (2, 40):  # decode and prefill paths
        _check(torch.randn(M, 128, dtype=torch.float16), qw)
    qw.zeros.add_(0.25)  # fractional now: the cached codes are dropped
    assert qmm.zero_codes(qw) is None
    _check(torch.randn(3, 128, dtype=torch.float16), qw)
    qw.zeros.sub_(0.25).add_(1 << int(dtype[4:]))  # whole, but past the codes' range
    assert qmm.zero_codes(qw) is None
    _check(torch.randn(3, 128, dtype=torch.float16), qw)


def test_zero_codes_are_for_unsigned_weights_but_5_bit():
    for dtype in ("int4", "uint5", "int6", "int2", "int3"):
        qw = quant.quantize(weight(64, 128), dtype, group_size=64, scheme="asymmetric")
        assert qmm.zero_codes(qw) is None, dtype
    for dtype in ("uint1", "uint2", "uint3", "uint4", "uint6", "uint7", "uint8"):
        qw = quant.quantize(weight(64, 128), dtype, group_size=64, scheme="asymmetric")
        assert qmm.zero_codes(qw) is not None, dtype


def test_the_zeros_go_where_they_measured_fastest():
    """Zero codes in the cast (`codes_in_cast`): 1- and 2-bit at decode only, 3-, 4-, 6- and
    7-bit at every M, 8-bit at prefill to f16 only; zeros outside the cast join X's group sums
    on a ones tile for up to 4 bits at up to 8 tokens and for 3 bits, else are subtracted after
    the cast (`choose_config`'s zero_products; benchmarks/NOTES.md, session 25)."""
    cases = {("uint1", 16, "float16"): True, ("uint1", 17, "float16"): False,
             ("uint2", 1, "bfloat16"): True, ("uint2", 4096, "bfloat16"): False,
             ("uint3", 4096, "bfloat16"): True, ("uint4", 1, "float16"): True,
             ("uint7", 1, "bfloat16"): True, ("uint8", 16, "float16"): False,
             ("uint8", 4096, "float16"): True, ("uint8", 4096, "bfloat16"): False}
    for (dtype, M, xtype), want in cases.items():
        assert qmm.codes_in_cast(dtype, M, xtype) == want, (dtype, M, xtype)

    def products(dtype, M):
        bits = int(dtype[4:])
        return qmm.choose_config(M, 28672, 8192, bits, 128, dtype)["zero_products"]

    assert products("uint1", 8) and products("uint4", 1) and products("uint3", 16)
    assert not products("uint1", 16) and not products("uint5", 1) and not products("uint8", 1)


def test_narrow_weights_split_k_where_their_tiles_fill_the_sms():
    """1- and 2-bit weights at decode whose 128-row tiles fill the SMs take 4 K slices, added
    by each tile's last block (measured fastest at 28672 and 57344 x 8192: benchmarks/NOTES.md,
    sessions 27 and 29); 3-bit weights' 8 slices are added by the last block at up to 8 tokens
    and by the second kernel at 16; 4-bit weights there keep one slice, and N that leaves SMs
    idle keeps its split."""
    def plan(M, N, dtype):
        c = qmm.choose_config(M, N, 8192, int(dtype[-1]), 128, dtype)
        return c["split"], c["last_block"]

    for dtype in ("uint1", "uint2", "int2"):
        assert plan(1, 28672, dtype) == (4, True) and plan(8, 57344, dtype) == (4, True)
        assert plan(16, 28672, dtype) == (4, True) and plan(16, 57344, dtype) == (4, True)
        assert plan(1, 8192, dtype) == (4, True)
    assert plan(1, 28672, "uint4") == (1, False) and plan(16, 28672, "uint3") == (8, False)
    assert plan(1, 28672, "uint3") == (8, True) and plan(8, 57344, "uint5") == (2, False)


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 16])
def test_float4_weights_cast_to_f16_subnormals_multiply_exactly_on_the_gpu(M):
    """At decode the float4 cast leaves its values times 2^-14 (the group scales take 2^14),
    where +-0.5 is an f16 subnormal: the tensor cores must multiply it, not flush it."""
    g = torch.Generator().manual_seed(3)
    w = (torch.randint(0, 2, (512, 1024), generator=g) * 2 - 1) * 0.5
    w[:, ::128] = 6.0  # each group's largest: its scale is 1, every other code +-0.5
    qw = quant.quantize(w.cuda(), "float4_e2m1", group_size=128)
    assert qmm.choose_config(M, 512, 1024, 4, 128, "float4_e2m1")["acc_scale"]
    x = torch.randn(M, 1024, dtype=torch.float16, device="cuda")
    y = quant.matmul(x, qw)
    ref = x.double() @ qw.dequantize().double().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 2e-3


@pytest.mark.parametrize("dtype", ["float6_e3m2", "float4_e2m1"])
def test_prefill_folds_the_float_casts_power_of_two_into_scales_that_stay_finite(dtype):
    """At M > 16 float weights without zeros to f16 are cast times 2^-h and the scales times
    2^h (qmm.fold_scales), exact: the same products; scales whose 2^h multiple would overflow
    f16 keep the plain path, with the same results."""
    qw = quant.quantize(weight(64, 128, seed=5), dtype, group_size=64)
    assert qmm.fold_scales(qw, "float16") and not qmm.fold_scales(qw, "bfloat16")
    qmm._PLANS.clear()
    y = _check(torch.randn(40, 128, dtype=torch.float16), qw)
    assert [k for k in qmm._PLANS if k.M == 40][0].fold  # the plan took the fold
    big = quant.quantize(weight(64, 128, seed=5) * 200, dtype, group_size=64)
    assert not qmm.fold_scales(big, "float16")  # (scales past 16: times 2^12 or 2^14, not finite)
    _check(torch.randn(40, 128, dtype=torch.float16), big)
    qw.scales.mul_(200)  # changed in place: checked again
    assert not qmm.fold_scales(qw, "float16")
    assert y is not None


def test_a_repeated_call_reuses_its_prepared_arguments_until_the_weight_changes():
    """The host path keeps each call's plan and converted arguments per weight (M, x's dtype,
    bias or not, switches): the same call again takes them, and a scale or zero changed in
    place (torch's version counter) makes it prepare again, with the new values."""
    qw = quant.quantize(weight(64, 128, seed=7), "uint4", group_size=64)
    x = torch.randn(2, 128, dtype=torch.float16)
    y1 = _check(x, qw)
    entry = qmm._CALLS[qw]
    (how, first), = entry.items()
    assert torch.equal(_check(x, qw), y1) and entry[how] is first  # (reused, not rebuilt)
    qw.scales.mul_(2)  # in place: the stamp changes, the call prepares again
    y2 = _check(x, qw)
    assert entry[how] is not first and torch.allclose(y2.float(), 2 * y1.float(), rtol=1e-2)
    qw.zeros.add_(1)
    _check(x, qw)
    _check(torch.randn(2, 128, dtype=torch.bfloat16), qw)  # (another dtype: its own entry)
    assert len(entry) == 2



def test_prepared_calls_share_the_converted_scales_and_stay_bounded(monkeypatch):
    """Calls of several M on one weight share one converted copy of its scales per x dtype,
    and at most CALLS_PER_WEIGHT of them are kept (M values come and go)."""
    monkeypatch.setattr(qmm, "CALLS_PER_WEIGHT", 3)
    qw = quant.quantize(weight(64, 128, seed=9), "uint4", group_size=64)
    for M in (1, 2, 3, 4):
        _check(torch.randn(M, 128, dtype=torch.bfloat16), qw)  # (the f16 scales converted)
    entries = list(qmm._CALLS[qw].values())
    assert [h[0] for h in qmm._CALLS[qw]] == [2, 3, 4]
    # (an entry: stamp, layout flag, kernel, reducer, split, weight, scales, zeros, bias)
    assert all(e[6] is entries[0][6] for e in entries)  # one bf16 copy of the scales


def test_a_6_bit_float_weight_with_a_zero_point_subtracts_it():
    """(the planes' cast does not take the zero: it is subtracted after it)"""
    qw = quant.quantize(weight(128, 256, seed=8), "float6_e3m2").replace(zero_point=1.0)
    x = torch.randn(5, 256).half()
    ref = x.double() @ qw.dequantize().double().T
    y = quant.matmul(x, qw)
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2


def _zeros_unsigned(qw):
    """`qw` (uint1 / uint2 as `quantize` makes it) stored the other way: each group with a
    negative scale as a positive one, flipped codes m - q and zero m - z (the same weights)."""
    from tilecraft.quant.quantized import QuantizedWeight

    m = (1 << qw.bits) - 1
    neg = qw.scales < 0
    flips = neg.to(torch.uint8).repeat_interleave(qw.group_size, dim=1) * m
    zeros = torch.where(neg, m - qw.zeros, qw.zeros)
    return QuantizedWeight(qmm.pack_codes(qw.codes() ^ flips, qw.dtype), qw.scales.abs(),
                           zeros, qw.dtype, qw.group_size, qw.shape, 0.0, "asymmetric")


def _normal():
    """Normal weights (no group lopsided: uint2's zeros all 1 once stored as signs)."""
    return torch.randn(128, 256, generator=torch.Generator().manual_seed(9)) * 0.02


def _signed(dtype, device):
    w = weight(128, 256, seed=9).to(device)
    w[:64] = -w[:64].abs()  # (groups below zero: negative scales)
    w[64:80] += 0.5 * w[64:80].abs().amax()  # (mostly above zero: uint2's zero 0)
    return quant.quantize(w, dtype, group_size=64)


@pytest.mark.parametrize("act", ACTS, ids=["f16", "bf16"])
@pytest.mark.parametrize("dtype", ["uint1", "uint2"])
@pytest.mark.parametrize("M", [1, 5, 16])
def test_zeros_stored_as_signs_give_the_bits_of_the_unsigned_zeros(dtype, M, act):
    """`quantize` stores uint1 / uint2 zeros in the upper half as signs; zeros common to every
    group are a constant the cast subtracts (`qmm.uniform_zero`: uint1's 0, here uint2's 1),
    else they take the zeros' path; the same weights stored with positive scales take the zeros'
    path, and all give the same bits: (m - q) - (m - z) = -(q - z), term by term."""
    qw = _signed(dtype, "cpu")
    old = _zeros_unsigned(qw)
    assert torch.equal(old.dequantize(), qw.dequantize()) and bool((qw.scales < 0).any())
    assert qmm.uniform_zero(old) is None
    x = torch.randn(M, 256, dtype=act)
    assert torch.equal(_check(x, qw), _check(x, old))
    if dtype == "uint1":
        assert qmm.uniform_zero(qw) == 0
    else:  # (the groups mostly above zero have zero 0: a second kernel with zeros of 1 only)
        assert qmm.uniform_zero(qw) is None and set(qw.zeros.unique().tolist()) == {0, 1}
        ones = quant.quantize(_normal(), dtype, group_size=64)
        assert qmm.uniform_zero(ones) == 1 and (ones.scales < 0).any()
        assert torch.equal(_check(x, ones), _check(x, _zeros_unsigned(ones)))


def _same_bits_or_zero_fma(a, b, dtype, M, act):
    """a and b bit for bit, except where the zeros' path rounds z s to f16 (prefill to f16:
    `zero_fma`, uint2's zeros of 3 only): there within 2e-3 of each other (3e-4 measured)."""
    if dtype == "uint2" and M > 16 and act == torch.float16:
        assert ((a.double() - b.double()).norm() / b.double().norm()).item() < 2e-3
    else:
        assert torch.equal(a, b)


@pytest.mark.parametrize("act", ACTS, ids=["f16", "bf16"])
@pytest.mark.parametrize("dtype", ["uint1", "uint2"])
def test_zeros_stored_as_signs_at_prefill_match_the_unsigned_zeros(dtype, act):
    qw = _signed(dtype, "cpu")
    x = torch.randn(20, 256, dtype=act)
    _same_bits_or_zero_fma(_check(x, qw), _check(x, _zeros_unsigned(qw)), dtype, 20, act)


@pytest.mark.gpu
@pytest.mark.parametrize("act", ACTS, ids=["f16", "bf16"])
@pytest.mark.parametrize("dtype", ["uint1", "uint2"])
@pytest.mark.parametrize("M", [1, 16, 300])
def test_zeros_stored_as_signs_give_the_same_bits_on_the_gpu(dtype, M, act):
    for qw in (_signed(dtype, "cuda"),
               quant.quantize(_normal().cuda(), dtype, group_size=64)):
        x = torch.randn(M, 256, dtype=act, device="cuda")
        a, b = _check(x, qw), _check(x, _zeros_unsigned(qw))
        _same_bits_or_zero_fma(a, b, dtype, M, act)


def test_asymmetric_floats_zeros_of_0_run_as_a_weight_without_zeros():
    """Asymmetric floats have zeros all 0: the kernels take them as none (`uniform_zero`),
    prefill's scales folded as for the symmetric weight (`fold_scales`), the same bits."""
    w = weight(64, 128, seed=4)
    sym = quant.quantize(w, "float4_e2m1", group_size=64, scheme="symmetric")
    asym = quant.quantize(w, "float4_e2m1", group_size=64, scheme="asymmetric")
    assert qmm.uniform_zero(asym) == 0 and qmm.fold_scales(asym, "float16")
    for M in (3, 20):
        x = torch.randn(M, 128, dtype=torch.float16)
        assert torch.equal(_check(x, asym), _check(x, sym))
