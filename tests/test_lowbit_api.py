"""tilecraft.pack / unpack / quantize_to / dequantize (tilecraft/lowbit.py): bit-exact with
tilecraft.dtypes for every type of at most 8 bits, on numpy arrays and torch tensors (the torch
code is the one CUDA tensors run; the gpu tests check it there), with TC321 for misuse."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import tilecraft
from tilecraft import dtypes

LOW = [dt for dt in dtypes.all_dtypes() if dt.bits <= 8 and not dt.is_bool]
IDS = [dt.name for dt in LOW]
RNG = np.random.default_rng(12)


def sweep(dt) -> np.ndarray:
    """Every value of `dt`, the midpoints between neighbours (ties), the float64 numbers next to
    them, subnormal-range and out-of-range numbers, +-inf, +-0 and +-NaN."""
    values = dt.to_float(np.arange(1 << dt.bits)).astype(np.float64)
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[:-1] + finite[1:]) / 2
    big = float(dt.max)
    return np.concatenate([
        values, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 2 * big, -2 * big,
         big + 0.5, -big - 0.5, 1e30, -1e30],
        RNG.standard_normal(500) * big,
    ])


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


# ---- bit-exact with tilecraft.dtypes -----------------------------------------------------------
@pytest.mark.parametrize("dt", LOW, ids=IDS)
def test_quantize_to_rounds_like_from_float_on_numpy_and_torch(dt):
    x = sweep(dt)
    want = dt.from_float(x)
    assert same_bits(tilecraft.quantize_to(x, dt), want)
    for torch_dtype in (torch.float64, torch.float32):
        xt = torch.from_numpy(x).to(torch_dtype)
        got = tilecraft.quantize_to(xt, dt)
        assert got.dtype == torch.uint8
        assert same_bits(got.numpy(), dt.from_float(xt.numpy()))
    for torch_dtype in (torch.float16, torch.bfloat16):  # narrower inputs, read exactly
        xt = torch.from_numpy(x).to(torch_dtype)
        assert same_bits(tilecraft.quantize_to(xt, dt).numpy(),
                         dt.from_float(xt.float().numpy()))


@pytest.mark.parametrize("dt", LOW, ids=IDS)
def test_dequantize_gives_every_codes_exact_value_with_nan_signs(dt):
    codes = np.arange(1 << dt.bits, dtype=np.uint8)
    want = dt.to_float(codes).astype(np.float32)
    assert same_bits(tilecraft.dequantize(codes, dt), want)
    got = tilecraft.dequantize(torch.from_numpy(codes).view(2, -1), dt)
    assert got.dtype == torch.float32 and got.shape == (2, len(codes) // 2)
    assert same_bits(got.reshape(-1).numpy(), want)


@pytest.mark.parametrize("dt", LOW, ids=IDS)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 3, 9)])
def test_pack_and_unpack_match_dtypes_packing(dt, shape):
    codes = RNG.integers(0, 1 << dt.bits, shape).astype(np.uint8)
    want = dtypes.pack(codes, dt)
    assert same_bits(tilecraft.pack(codes, dt), want)
    assert same_bits(tilecraft.pack(codes.tolist(), dt), want)
    for codes_t in (torch.from_numpy(codes), torch.from_numpy(codes).to(torch.int64)):
        packed = tilecraft.pack(codes_t, dt)
        assert packed.dtype == torch.uint8 and same_bits(packed.numpy(), want)
    back = tilecraft.unpack(torch.from_numpy(want), dt, shape)
    assert back.dtype == torch.uint8 and same_bits(back.numpy(), codes)
    assert same_bits(tilecraft.unpack(torch.from_numpy(want).view(torch.int8), dt, shape).numpy(),
                     codes)
    assert same_bits(tilecraft.unpack(want, dt, shape), codes)
    assert same_bits(tilecraft.unpack(want.tobytes(), dt, shape), codes)


def test_pack_writes_lsb_first_as_the_docs_say():
    packed = tilecraft.pack(torch.tensor([5, 3, 6, 1]), "uint3")
    assert packed.tolist() == [157, 3]
    assert tilecraft.unpack(packed, "uint3", 4).tolist() == [5, 3, 6, 1]
    codes = torch.tensor([[1, 2], [3, 0]], dtype=torch.uint8)
    assert tilecraft.pack(codes, "uint8").data_ptr() != codes.data_ptr()  # a copy, flat
    assert tilecraft.pack(codes, "uint8").tolist() == [1, 2, 3, 0]


def test_a_round_trip_through_the_packed_bytes_keeps_quantized_weights():
    w = torch.randn(64, 48, generator=torch.Generator().manual_seed(3))
    for name in ("int6", "uint4", "float4_e2m1", "float6_e3m2", "float8_e4m3", "float3_e1m1"):
        codes = tilecraft.quantize_to(w, name)
        packed = tilecraft.pack(codes, name)
        assert packed.numel() == dtypes.packed_nbytes(w.numel(), name)
        again = tilecraft.unpack(packed, name, w.shape)
        assert torch.equal(again, codes)
        values = tilecraft.dequantize(again, name)
        assert torch.equal(tilecraft.quantize_to(values, name), codes)


def test_the_host_example_of_docs_dtypes_runs():
    w = torch.tensor([[0.3, -1.7, 2.5], [100.0, -0.2, 3.5]])
    codes = tilecraft.quantize_to(w, "int6")
    assert codes.tolist() == [[0, 62, 2], [31, 0, 4]]  # -2 is code 62; 100 saturates to 31
    packed = tilecraft.pack(codes, "int6")
    assert packed.shape == (5,) and packed.dtype == torch.uint8
    assert tilecraft.dequantize(tilecraft.unpack(packed, "int6", (2, 3)), "int6").tolist() == [
        [0.0, -2.0, 2.0], [31.0, 0.0, 4.0]]


# ---- misuse: TC321 at the caller's line --------------------------------------------------------
def _line_of(fn) -> tuple[str, int]:
    try:
        fn()
    except tilecraft.TilecraftError as err:
        return err.code, err.line
    raise AssertionError("no error")


@pytest.mark.parametrize("call, text", [
    (lambda: tilecraft.pack([4], "uint2"), "codes of uint2 lie in [0, 4), got values in [4, 4]"),
    (lambda: tilecraft.pack(torch.tensor([-1]), "int4"), "got values in [-1, -1]"),
    (lambda: tilecraft.pack(torch.tensor([0.5]), "int4"), "must be integers, got dtype float32"),
    (lambda: tilecraft.pack([1], "float16"), "float16 is not a low-precision type"),
    (lambda: tilecraft.pack([1], "int9"), "unknown data type 'int9'"),
    (lambda: tilecraft.unpack(torch.zeros(4, dtype=torch.uint8), "int6", (2, 3)),
     "6 elements of int6 pack into 5 bytes, got 4"),
    (lambda: tilecraft.unpack(torch.zeros(5), "int6", (2, 3)), "uint8 or int8, got dtype float32"),
    (lambda: tilecraft.dequantize([300], "uint8"), "codes of uint8 lie in [0, 256)"),
    (lambda: tilecraft.quantize_to(np.array(["a"]), "int4"), "cannot quantize an array"),
])
def test_misuse_is_tc321_at_the_callers_line(call, text):
    with pytest.raises(tilecraft.TilecraftError) as info:
        call()
    err = info.value
    assert err.code == "TC321" and text in err.message and isinstance(err, ValueError)
    assert err.file == __file__


def test_tc321_points_at_the_line_of_the_call():
    code, line = _line_of(lambda: tilecraft.pack([9], "uint3"))  # THE_CALL
    with open(__file__) as f:
        want = [k for k, text in enumerate(f, 1) if text.rstrip().endswith("# THE_CALL")]
    assert (code, [line]) == ("TC321", want)


def test_import_tilecraft_stays_light():
    code = ("import sys, tilecraft; assert 'tilecraft.lowbit' not in sys.modules; "
            "assert 'torch' not in sys.modules; tilecraft.pack; "
            "assert 'tilecraft.lowbit' in sys.modules and 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- CUDA tensors ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dt", LOW, ids=IDS)
def test_cuda_tensors_give_the_cpu_results_and_stay_on_the_gpu(dt):
    x = torch.from_numpy(sweep(dt))
    for work in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        got = tilecraft.quantize_to(x.to(work).cuda(), dt)
        assert got.is_cuda and torch.equal(got.cpu(), tilecraft.quantize_to(x.to(work), dt))
    codes = torch.from_numpy(RNG.integers(0, 1 << dt.bits, (33, 7)).astype(np.uint8))
    packed = tilecraft.pack(codes.cuda(), dt)
    assert packed.is_cuda and torch.equal(packed.cpu(), tilecraft.pack(codes, dt))
    back = tilecraft.unpack(packed, dt, (33, 7))
    assert back.is_cuda and torch.equal(back.cpu(), codes)
    every = torch.arange(1 << dt.bits, dtype=torch.uint8)
    values = tilecraft.dequantize(every.cuda(), dt)
    assert values.is_cuda and same_bits(values.cpu().numpy(),
                                        tilecraft.dequantize(every, dt).numpy())
