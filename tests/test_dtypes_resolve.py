"""resolve(): names, TileLang/Tilus aliases, numpy/ml_dtypes and torch dtypes, python types."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tilecraft import dtypes

ALIASES = {
    "float": "float32",
    "half": "float16",
    "fp16": "float16",
    "f16": "float16",
    "bf16": "bfloat16",
    "double": "float64",
    "int": "int32",
    "uint": "uint32",
    "bool": "bool",
    "boolean": "bool",
    "float8_e4m3fn": "float8_e4m3",
    "e4m3_float8": "float8_e4m3",
    "e5m2_float8": "float8_e5m2",
    "fp8_e4m3": "float8_e4m3",
    "float4_e2m1fn": "float4_e2m1",
    "float6_e3m2fn": "float6_e3m2",
    "f6e3m2": "float6_e3m2",
    "i4": "int4",
    "u1": "uint1",
    "float16_e5m10": "float16",
    "Float32": "float32",
}


@pytest.mark.parametrize(("alias", "name"), ALIASES.items())
def test_aliases_resolve_to_canonical_types(alias, name):
    assert dtypes.resolve(alias).name == name


@pytest.mark.parametrize("dt", dtypes.all_dtypes(), ids=str)
def test_every_canonical_name_resolves_to_the_same_instance(dt):
    assert dtypes.resolve(dt.name) is dt
    assert dtypes.resolve(dt) is dt
    assert getattr(dtypes, dt.name) is dt


def test_numpy_and_ml_dtypes_types_resolve():
    assert dtypes.resolve(np.float16) is dtypes.float16
    assert dtypes.resolve(np.dtype("float32")) is dtypes.float32
    assert dtypes.resolve(np.int64) is dtypes.int64
    assert dtypes.resolve(np.bool_) is dtypes.boolean
    assert dtypes.resolve(ml_dtypes.bfloat16) is dtypes.bfloat16
    assert dtypes.resolve(ml_dtypes.float8_e4m3fn) is dtypes.float8_e4m3
    assert dtypes.resolve(np.dtype(ml_dtypes.float8_e5m2)) is dtypes.float8_e5m2
    assert dtypes.resolve(ml_dtypes.int4) is dtypes.int4
    if hasattr(ml_dtypes, "float6_e2m3fn"):
        assert dtypes.resolve(ml_dtypes.float6_e2m3fn) is dtypes.float6_e2m3


@pytest.mark.parametrize("dt", [dt for dt in dtypes.all_dtypes() if dt.is_standard], ids=str)
def test_standard_np_dtype_resolves_back(dt):
    assert dtypes.resolve(dt.np_dtype) is dt


def test_numpy_types_with_other_encodings_are_rejected():
    # ml_dtypes' float8_e4m3 is the IEEE variant with infinities; tilecraft's is e4m3fn
    for other in ("float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        if hasattr(ml_dtypes, other):
            with pytest.raises(ValueError, match="no tilecraft equivalent"):
                dtypes.resolve(getattr(ml_dtypes, other))
    with pytest.raises(ValueError):
        dtypes.resolve(np.complex64)


def test_torch_dtypes_resolve_and_round_trip():
    torch = pytest.importorskip("torch")
    assert dtypes.resolve(torch.float16) is dtypes.float16
    assert dtypes.resolve(torch.half) is dtypes.float16
    assert dtypes.resolve(torch.bfloat16) is dtypes.bfloat16
    assert dtypes.resolve(torch.float8_e4m3fn) is dtypes.float8_e4m3
    assert dtypes.resolve(torch.float8_e5m2) is dtypes.float8_e5m2
    assert dtypes.resolve(torch.bool) is dtypes.boolean
    assert dtypes.resolve(torch.uint8) is dtypes.uint8
    if hasattr(torch, "uint4"):
        assert dtypes.resolve(torch.uint4) is dtypes.uint4
    for dt in dtypes.all_dtypes():
        if dt.torch_dtype is not None:
            assert dtypes.resolve(dt.torch_dtype) is dt
    for bad in ("complex64", "float8_e4m3fnuz", "float4_e2m1fn_x2", "int1"):
        if hasattr(torch, bad):
            with pytest.raises(ValueError, match="torch"):
                dtypes.resolve(getattr(torch, bad))


def test_python_types_follow_kernel_conventions():
    assert dtypes.resolve(bool) is dtypes.boolean
    assert dtypes.resolve(int) is dtypes.int32
    assert dtypes.resolve(float) is dtypes.float32


def test_unknown_names_raise_value_error_listing_near_matches():
    with pytest.raises(ValueError, match=r"did you mean.*float16"):
        dtypes.resolve("flaot16")
    with pytest.raises(ValueError, match="bfloat16"):
        dtypes.resolve("bfloat61")
    for bad in ("float9_e4m4", "int1", "uint9", "float6_e3m3", "", "complex"):
        with pytest.raises(ValueError):
            dtypes.resolve(bad)
    for bad in (None, 3.5, [1]):
        with pytest.raises(ValueError, match="cannot resolve"):
            dtypes.resolve(bad)


def test_bits_of_reports_width():
    assert dtypes.bits_of("float6_e3m2") == 6
    assert dtypes.bits_of(np.float16) == 16
    assert dtypes.bits_of(dtypes.uint1) == 1
