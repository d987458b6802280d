"""tilecraft.quant.quantize and QuantizedWeight, on the host: dequantize() is the formula
(value(code) - z) * s on the packed codes (checked against numpy: the packing reference of
tilecraft.layout and dtypes' own decoding); every weight gets the nearest value of its group's
grid; int types err by at most half a step; the scales follow the documented rules; misuse is
TC321 at the user's line."""

import numpy as np
import pytest
import torch

import tilecraft.quant as quant
from tilecraft import dtypes
from tilecraft.layout import pack_weight_tiles
from tilecraft.quant.qmm import pack_layout

from .helpers import FLOATS, INTS, TYPE_SCHEMES, UINTS, error_here, weight

N, K, GROUP = 64, 128, 64


def _up(s: np.ndarray, sdt=np.float16) -> np.ndarray:
    """float64 scales rounded up to `sdt` (the documented rule), as float64."""
    low = s.astype(sdt)
    low = np.where(low.astype(np.float64) < s, np.nextafter(low, sdt(np.inf)), low)
    return low.astype(np.float64)


def _grid(dtype: str) -> np.ndarray:
    """Every finite value of the type, float64 (numpy decoding)."""
    dt = dtypes.resolve(dtype)
    values = dt.to_float(np.arange(1 << dt.bits)).astype(np.float64)
    return values[np.isfinite(values)]


def _zeros(qw) -> np.ndarray:
    """z per element, float64 (N, K)."""
    if qw.zeros is None:
        return np.full(qw.shape, qw.zero_point)
    return np.repeat(qw.zeros.double().numpy(), qw.group_size, axis=1)


def _reference_packing(codes: np.ndarray, dtype: str) -> np.ndarray:
    """The packed format by the numpy reference: the codes in pack_layout(dtype), or for 3-, 5-,
    6- and 7-bit integers the bit planes of the offset-binary code, for 6-bit floats the planes
    of the code (its top 2 bits, its low 4), side by side in each tile."""
    t = dtypes.resolve(dtype)
    planes = {5: (4, 1)}.get(t.bits) if t.is_integer else \
        (2, 4) if t.bits == 6 and t.f16_headroom else None  # (float6_e5m0: one dense plane)
    if (t.is_integer and t.bits in (6, 7)) or t.name == "float6_e3m2":
        return _reference_bytes(codes, t.bits, t.kind == "int", t.is_float)
    if t.is_integer and t.bits == 3:
        return _reference_nibbles(codes, t.kind == "int")
    if planes is None:
        return pack_weight_tiles(codes, t.bits, pack_layout(dtype))
    u = codes.astype(np.int64) ^ ((1 << (t.bits - 1)) if t.kind == "int" else 0)
    parts, shift = [], t.bits
    for p in planes:
        shift -= p
        plane = (u >> shift) & ((1 << p) - 1)
        parts.append(pack_weight_tiles(plane, p, pack_layout(f"uint{p}")))
    return np.concatenate(parts, axis=-1)


def _reference_nibbles(codes: np.ndarray, signed: bool) -> np.ndarray:
    """3-bit integers: per tile, thread t's 32 offset-binary codes c in the mma A layout's
    order; word w < 3 holds c[8 w + j] in the low 3 bits of nibble (j % 2) * 4 + j // 2 and bit
    w of c[24 + j] in that nibble's top bit; words 0-1 where a uint2 plane keeps its bytes (at 0
    of the tile), word 2 where a uint1 plane does (at 256)."""
    from tilecraft.quant.qmm import mma_layout
    from tilecraft.quant.qmm_kernel import byte_layout

    u = codes.astype(np.int64) ^ (4 if signed else 0)
    n, k = u.shape
    out = np.zeros((n // 16, k // 64, 384), np.uint8)
    mma = mma_layout()
    for ti in range(n // 16):
        for tj in range(k // 64):
            for t in range(32):
                c = [u[ti * 16 + r, tj * 64 + col] for r, col in mma.thread_elements(t)]
                words = [0, 0, 0]
                for w in range(3):
                    for j in range(8):
                        nibble = (c[8 * w + j] & 7) | (((c[24 + j] >> w) & 1) << 3)
                        words[w] |= nibble << (4 * ((j % 2) * 4 + j // 2))
                b = [(words[w] >> (8 * q)) & 255 for w in range(3) for q in range(4)]
                for (first, p, at) in ((0, 2, 0), (8, 1, 256)):
                    for i, (_, col) in enumerate(byte_layout(1, 1, p).thread_elements(t)):
                        out[ti, tj, at + col] = b[first + i]
    return out


def _reference_bytes(codes: np.ndarray, bits: int, signed: bool, float_: bool) -> np.ndarray:
    """6- and 7-bit integers and float6_e3m2: per tile, thread t's 32 codes c (an int's
    offset-binary) in the mma A layout's order; byte e < 4 bits holds c[e] in its low bits;
    with T = 8 - bits top bits a byte, c[4 bits + 4 j + k]'s bits [T i, T i + T) are the top
    bits of byte 4 (j bits/T + i) + k; a float's bytes then have bit bits - 1 at 7 and the top
    bits one lower; the thread's bytes 0-15, 16-23 (, 24-27) where uint4, uint2 (and uint1)
    planes keep theirs (at 0, 512 and 768 of the tile)."""
    from tilecraft.quant.qmm import mma_layout
    from tilecraft.quant.qmm_kernel import byte_layout

    u = codes.astype(np.int64) ^ ((1 << (bits - 1)) if signed else 0)
    n, k = u.shape
    top, words = 8 - bits, bits // (8 - bits)
    out = np.zeros((n // 16, k // 64, 128 * bits), np.uint8)
    mma = mma_layout()
    for ti in range(n // 16):
        for tj in range(k // 64):
            for t in range(32):
                c = [u[ti * 16 + r, tj * 64 + col] for r, col in mma.thread_elements(t)]
                b = [x & ((1 << bits) - 1) for x in c[:4 * bits]]
                for j in range(top):
                    for kk in range(4):
                        for i in range(words):
                            field = (c[4 * bits + 4 * j + kk] >> (top * i)) & ((1 << top) - 1)
                            b[4 * (j * words + i) + kk] |= field << bits
                if float_:
                    b = [(x & ((1 << (bits - 1)) - 1)) | ((x >> (bits - 1) & 1) << 7)
                         | ((x >> bits) << (bits - 1)) for x in b]
                first = 0
                for count, p, at in ((16, 4, 0), (8, 2, 512), (4, 1, 768))[:bits - 4]:
                    for i, (_, col) in enumerate(byte_layout(1, 1, p).thread_elements(t)):
                        out[ti, tj, at + col] = b[first + i]
                    first += count
    return out


@pytest.mark.parametrize("dtype, scheme", TYPE_SCHEMES)
def test_dequantize_is_the_formula_on_the_codes_pack_weight_laid_out(dtype, scheme):
    qw = quant.quantize(weight(N, K), dtype, group_size=GROUP, scheme=scheme)
    bits = dtypes.resolve(dtype).bits
    codes = qw.codes().numpy()
    assert qw.packed.shape == (N // 16, K // 64, 128 * bits) and qw.packed.dtype == torch.uint8
    np.testing.assert_array_equal(qw.packed.numpy(), _reference_packing(codes, dtype))
    values = dtypes.resolve(dtype).to_float(codes).astype(np.float64)
    s = np.repeat(qw.scales.double().numpy(), GROUP, axis=1)
    expected = (values - _zeros(qw)) * s
    np.testing.assert_array_equal(qw.dequantize(torch.float64).numpy(), expected)
    assert qw.dequantize().dtype == torch.float32
    np.testing.assert_array_equal(qw.dequantize().numpy(), expected.astype(np.float32))


@pytest.mark.parametrize("dtype, scheme", TYPE_SCHEMES)
def test_each_weight_gets_the_nearest_value_of_its_groups_grid(dtype, scheme):
    w = weight(N, K, seed=1)
    w[3, 5] = w[10, 70] = 0.0
    qw = quant.quantize(w, dtype, group_size=GROUP, scheme=scheme)
    w64 = w.double().numpy()
    s = np.repeat(qw.scales.double().numpy(), GROUP, axis=1)
    candidates = (_grid(dtype)[None, None, :] - _zeros(qw)[..., None]) * s[..., None]
    best = np.abs(candidates - w64[..., None]).min(-1)
    got = np.abs(qw.dequantize(torch.float64).numpy() - w64)
    assert (got <= best + 1e-12 * np.abs(s)).all(), np.max(got - best)  # (uint1: s < 0 too)
    assert qw.dequantize()[3, 5] == 0 and qw.dequantize()[10, 70] == 0  # zero is on the grid


@pytest.mark.parametrize("dtype, scheme", [(t, s) for t, s in TYPE_SCHEMES if t in UINTS + INTS])
def test_integer_weights_err_by_at_most_half_a_step(dtype, scheme):
    w = weight(N, K, seed=2)
    qw = quant.quantize(w, dtype, group_size=GROUP, scheme=scheme)
    s = np.repeat(qw.scales.double().numpy(), GROUP, axis=1)
    err = np.abs(qw.dequantize(torch.float64).numpy() - w.double().numpy())
    assert (err <= np.abs(s) / 2 * (1 + 1e-9)).all(), np.max(err / np.abs(s))  # (uint1: s < 0)


@pytest.mark.parametrize("dtype, qmax", [("int4", 7), ("uint4", 7), ("int8", 127), ("uint8", 127),
                                         ("int2", 1), ("float8_e4m3", 448), ("float4_e2m1", 6),
                                         ("float6_e3m2", 28), ("float8_e5m2", 57344)])
def test_symmetric_scale_is_the_absmax_over_the_largest_value_rounded_up(dtype, qmax):
    w = weight(N, K, seed=3)
    qw = quant.quantize(w, dtype, group_size=GROUP, scheme="symmetric")
    absmax = w.double().abs().reshape(N, K // GROUP, GROUP).amax(-1).numpy()
    np.testing.assert_array_equal(qw.scales.double().numpy(), _up(absmax / qmax))
    assert qw.zeros is None and qw.scheme == "symmetric"
    assert qw.zero_point == (2.0 ** (qw.bits - 1) if dtype.startswith("uint") else 0.0)


@pytest.mark.parametrize("dtype", ["uint4", "uint1", "uint2", "uint8", "int4", "int8"])
def test_asymmetric_scale_and_zero_span_the_group_and_zero(dtype):
    w = weight(N, K, seed=4)
    qw = quant.quantize(w, dtype, group_size=GROUP, scheme="asymmetric")
    dt = dtypes.resolve(dtype)
    wg = w.double().reshape(N, K // GROUP, GROUP)
    lo, hi = wg.amin(-1).clamp(max=0).numpy(), wg.amax(-1).clamp(min=0).numpy()
    s = _up((hi - lo) / (2**dt.bits - 1))
    z = np.clip(np.round(dt.min - lo / s), dt.min, dt.max)
    if dtype == "uint1":  # a zero of 1 is stored as a sign (the next test)
        s, z = np.where(z == 1, -s, s), np.zeros_like(z)
    if dtype == "uint2":  # zeros of 2 and 3 likewise: 1 and 0, the scale negated
        s, z = np.where(z > 1.5, -s, s), np.where(z > 1.5, 3 - z, z)
    np.testing.assert_array_equal(qw.scales.double().numpy(), s)
    np.testing.assert_array_equal(qw.zeros.double().numpy(), z)


def test_uint1_groups_below_zero_are_stored_with_a_negative_scale_and_zero_0():
    """An asymmetric uint1 group with levels -s and 0 (zero 1) is the levels 0 and -s (zero 0,
    codes flipped): the same weights, and every zero 0, which the kernels skip."""
    w = weight(N, K, seed=4)
    w[0, :GROUP] = -w[0, :GROUP].abs()  # a group below zero: zero 1 before the sign
    w[1, :GROUP] = w[1, :GROUP].abs()  # one above: zero 0, a positive scale
    qw = quant.quantize(w, "uint1", group_size=GROUP)
    assert not qw.zeros.any() and qw.scales[0, 0] < 0 < qw.scales[1, 0]
    s = qw.scales.double().abs().repeat_interleave(GROUP, dim=1)
    codes = qw.codes().double()
    zero_one = torch.where(qw.scales.repeat_interleave(GROUP, dim=1) < 0, 1.0, 0.0)
    flipped = torch.where(zero_one == 1, 1 - codes, codes)  # the codes with zero 1 kept
    assert torch.equal(qw.dequantize(torch.float64), (flipped - zero_one) * s)
    assert (qw.dequantize()[0, :GROUP] <= 0).all()


@pytest.mark.parametrize("dtype", FLOATS[:3])
def test_asymmetric_floats_have_zero_zeros_and_the_symmetric_scales(dtype):
    w = weight(N, K, seed=5)
    sym = quant.quantize(w, dtype, group_size=GROUP, scheme="symmetric")
    asym = quant.quantize(w, dtype, group_size=GROUP, scheme="asymmetric")
    assert torch.equal(asym.zeros, torch.zeros(N, K // GROUP, dtype=torch.float16))
    assert torch.equal(asym.scales, sym.scales) and torch.equal(asym.packed, sym.packed)


@pytest.mark.parametrize("dtype, scheme, zero_point", [
    ("uint4", "asymmetric", 0.0), ("int4", "symmetric", 0.0), ("int8", "symmetric", 0.0),
    ("float8_e4m3", "symmetric", 0.0), ("uint2", "asymmetric", 0.0)])
def test_the_default_scheme_is_asymmetric_for_uint_and_symmetric_otherwise(dtype, scheme,
                                                                           zero_point):
    qw = quant.quantize(weight(N, K), dtype, group_size=GROUP)
    assert (qw.scheme, qw.zero_point) == (scheme, zero_point)
    assert (qw.zeros is not None) == (scheme == "asymmetric")


def test_symmetric_uint_codes_are_centred_on_the_zero_point():
    w = torch.zeros(N, K)
    w[0, :GROUP] = torch.linspace(-1, 1, GROUP)
    qw = quant.quantize(w, "uint4", group_size=GROUP, scheme="symmetric")
    codes = qw.codes()
    assert qw.zero_point == 8.0 and codes[1].eq(8).all()  # zero weights: code 8
    assert (int(codes[0, 0]), int(codes[0, GROUP - 1])) == (1, 15)  # -absmax, +absmax


def test_an_all_zero_group_gets_the_smallest_scale_and_exact_zeros():
    w = weight(N, K, seed=6)
    w[5, GROUP:] = 0.0
    for scheme in ("symmetric", "asymmetric"):
        qw = quant.quantize(w, "int4", group_size=GROUP, scheme=scheme)
        others = torch.ones_like(qw.scales, dtype=torch.bool)
        others[5, 1:] = False
        assert qw.scales[5, 1:].eq(qw.scales[others].abs().min()).all()
        assert qw.dequantize()[5, GROUP:].eq(0).all()
    qw = quant.quantize(torch.zeros(N, K), "int4", group_size=GROUP)  # every group zero: 1
    assert qw.scales.eq(1).all() and qw.dequantize().eq(0).all()


def test_a_scale_below_float16_is_the_smallest_subnormal_not_zero():
    w = weight(N, K, seed=7) * 1e-9
    qw = quant.quantize(w, "int8", group_size=GROUP, scheme="symmetric")
    assert (qw.scales > 0).all() and (qw.scales.float() == 2.0**-24).all()
    err = (qw.dequantize().double() - w.double()).abs()
    assert (err <= w.double().abs().amax() + 1e-30).all()


def test_per_channel_groups_span_all_of_k_and_bfloat16_scales_are_kept():
    w = weight(N, K, seed=8)
    qw = quant.quantize(w, "uint4", group_size=None, scale_dtype="bfloat16")
    assert qw.group_size == K and qw.num_groups == 1
    assert qw.scales.shape == (N, 1) and qw.scales.dtype == torch.bfloat16
    assert qw.zeros.dtype == torch.bfloat16
    s = np.repeat(qw.scales.double().numpy(), K, axis=1)
    err = np.abs(qw.dequantize(torch.float64).numpy() - w.double().numpy())
    assert (err <= s / 2 * (1 + 1e-9)).all()


def test_a_weight_too_large_for_float16_scales_fits_in_bfloat16():
    w = weight(N, K, seed=9) * 1e6
    err = error_here(lambda: quant.quantize(w, "int4", group_size=GROUP))  # ERR
    assert "overflows float16" in err.message and "bfloat16" in err.hint
    qw = quant.quantize(w, "int4", group_size=GROUP, scale_dtype="bfloat16")
    assert torch.isfinite(qw.dequantize()).all()


def test_quantizing_is_deterministic_and_ignores_autograd():
    w = weight(N, K, seed=10).requires_grad_()
    a, b = quant.quantize(w, "uint3", group_size=GROUP), quant.quantize(w, "uint3", GROUP)
    assert torch.equal(a.packed, b.packed) and torch.equal(a.scales, b.scales)


# ---- the QuantizedWeight object ---------------------------------------------------------------
def test_state_dict_round_trips_and_to_keeps_everything():
    qw = quant.quantize(weight(N, K), "int6", group_size=GROUP, scheme="asymmetric")
    back = quant.QuantizedWeight.from_state_dict(qw.state_dict())
    for name in ("packed", "scales", "zeros"):
        assert torch.equal(getattr(back, name), getattr(qw, name))
    assert (back.dtype, back.group_size, back.shape, back.zero_point, back.scheme) == \
        ("int6", GROUP, (N, K), 0.0, "asymmetric")
    moved = qw.to("cpu")
    assert torch.equal(moved.dequantize(), qw.dequantize()) and moved.bits == 6


def test_nbytes_repr_and_canonical_dtype_name():
    qw = quant.quantize(weight(N, K), "fp8_e4m3", group_size=GROUP)  # an alias
    assert qw.dtype == "float8_e4m3" and qw.bits == 8
    assert qw.nbytes == N * K + 2 * N * (K // GROUP)  # codes + f16 scales, no zeros
    text = repr(qw)
    assert "float8_e4m3" in text and "(64, 128)" in text and "symmetric" in text
    asym = quant.quantize(weight(N, K), "uint4", group_size=GROUP)
    assert asym.nbytes == N * K // 2 + 2 * 2 * N * (K // GROUP)


# ---- misuse: TC321 at the caller's line -------------------------------------------------------
@pytest.mark.parametrize("shape, text", [((64, 96), "(N, K) = (64, 96)"),
                                         ((48, 128), "(N, K) = (48, 128)")])
def test_a_shape_the_kernel_cannot_take_is_refused(shape, text):
    w = torch.randn(*shape)
    err = error_here(lambda: quant.quantize(w, "uint4", group_size=None))  # ERR
    assert text in err.message and "multiples of 64" in err.message


@pytest.mark.parametrize("group", [32, 96, 256, 0, 100.0])
def test_a_group_size_that_is_not_a_multiple_of_64_dividing_k_is_refused(group):
    w = torch.randn(N, 192)
    err = error_here(lambda: quant.quantize(w, "uint4", group_size=group))  # ERR
    assert "`group_size`" in err.message and "divides K = 192" in err.message


@pytest.mark.parametrize("dtype, text", [("float16", "1 to 8 bits"), ("int33", "unknown"),
                                         ("bool", "1 to 8 bits")])
def test_a_type_that_is_not_1_to_8_bits_is_refused(dtype, text):
    err = error_here(lambda: quant.quantize(torch.randn(N, K), dtype))  # ERR
    assert "`dtype`" in err.message and text in err.message


def test_symmetric_uint1_and_an_unknown_scheme_are_refused():
    err = error_here(lambda: quant.quantize(torch.randn(N, K), "uint1", scheme="symmetric"))  # ERR
    assert "asymmetric" in err.hint
    err = error_here(lambda: quant.quantize(torch.randn(N, K), "uint4", scheme="affine"))  # ERR
    assert "`scheme`" in err.message


@pytest.mark.parametrize("bad", [torch.randn(N, K, 1), torch.ones(N, K, dtype=torch.int32),
                                 np.ones((N, K), dtype=np.float32)])
def test_a_weight_that_is_not_a_2d_float_tensor_is_refused(bad):
    err = error_here(lambda: quant.quantize(bad, "uint4"))  # ERR
    assert "`weight`" in err.message


def test_nan_weights_and_a_bad_scale_dtype_are_refused():
    w = torch.randn(N, K)
    w[1, 2] = float("nan")
    err = error_here(lambda: quant.quantize(w, "int4"))  # ERR
    assert "NaN" in err.message
    w = torch.randn(N, K)
    err = error_here(lambda: quant.quantize(w, "int4", scale_dtype="float32"))  # ERR
    assert "`scale_dtype`" in err.message


def test_a_state_dict_whose_tensors_do_not_fit_its_metadata_is_refused():
    state = quant.quantize(weight(N, K), "uint4", group_size=GROUP).state_dict()
    state["scales"] = state["scales"][:, :1]
    err = error_here(lambda: quant.QuantizedWeight.from_state_dict(state))  # ERR
    assert "`scales` has shape (64, 1), expected (64, 2)" in err.message


def test_a_state_dict_of_an_earlier_packed_layout_is_refused():
    state = quant.quantize(weight(N, K), "float6_e3m2", group_size=GROUP).state_dict()
    state["format"] = "tilecraft.QuantizedWeight/1"  # (6-bit floats were one dense plane)
    err = error_here(lambda: quant.QuantizedWeight.from_state_dict(state))  # ERR
    assert "earlier tilecraft" in err.message and "quantize the float weight again" in err.message


def test_quantize_is_reached_lazily_from_tilecraft_quant():
    import tilecraft.nn  # noqa: F401  (imports the module quant/quantized.py first)

    assert tilecraft.quant.quantize is quant.quantize and callable(tilecraft.quant.quantize)
    assert tilecraft.quant.QuantizedWeight.__module__ == "tilecraft.quant.quantized"
