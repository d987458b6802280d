"""DataType as a value: fields, derived properties, construction rules, equality and hashing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecraft import dtypes
from tilecraft.dtypes import DataType

ALL = dtypes.all_dtypes()


def test_all_dtypes_lists_every_type_once():
    names = [dt.name for dt in ALL]
    assert len(names) == len(set(names))
    # 6 standard floats, 26 custom splits (1 <= e, e + m + 1 <= 8), int2..8/16/32/64,
    # uint1..8/16/32/64 and bool
    assert len(dtypes.CUSTOM_FLOAT_SPLITS) == 26
    assert len(ALL) == 6 + 26 + 10 + 11 + 1


@pytest.mark.parametrize(("e", "m"), dtypes.CUSTOM_FLOAT_SPLITS)
def test_custom_float_fields_and_name(e, m):
    dt = dtypes.float_type(e, m)
    assert dt.name == f"float{1 + e + m}_e{e}m{m}"
    assert (dt.kind, dt.bits, dt.exponent_bits, dt.mantissa_bits) == ("float", 1 + e + m, e, m)
    assert dt.bias == 2 ** (e - 1) - 1
    assert dt.max == (2 - 2.0**-m) * 2.0 ** (2**e - 1 - dt.bias)  # every code is finite
    assert dt.min == -dt.max
    assert not dt.is_standard and not dt.has_inf and not dt.has_nan
    assert dt.np_dtype == np.float32 and dt.cuda_type == "uint8_t" and dt.torch_dtype is None


@pytest.mark.parametrize(
    ("dt", "maximum"),
    [
        (dtypes.float3_e1m1, 3.0),
        (dtypes.float4_e2m1, 6.0),
        (dtypes.float5_e2m2, 7.0),
        (dtypes.float6_e2m3, 7.5),
        (dtypes.float6_e3m2, 28.0),
        (dtypes.float7_e3m3, 30.0),
        (dtypes.float8_e4m3, 448.0),
        (dtypes.float8_e5m2, 57344.0),
        (dtypes.float16, 65504.0),
        (dtypes.bfloat16, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
        (dtypes.float32, float(np.finfo(np.float32).max)),
        (dtypes.float64, float(np.finfo(np.float64).max)),
    ],
    ids=str,
)
def test_float_max_is_largest_finite_value(dt, maximum):
    assert dt.max == maximum and dt.min == -maximum


def test_standard_types_map_to_host_and_device_types():
    torch = pytest.importorskip("torch")
    table = [
        (dtypes.float64, np.float64, "double", torch.float64),
        (dtypes.float32, np.float32, "float", torch.float32),
        (dtypes.float16, np.float16, "half", torch.float16),
        (dtypes.bfloat16, ml_dtypes.bfloat16, "__nv_bfloat16", torch.bfloat16),
        (dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, "__nv_fp8_e4m3", torch.float8_e4m3fn),
        (dtypes.float8_e5m2, ml_dtypes.float8_e5m2, "__nv_fp8_e5m2", torch.float8_e5m2),
        (dtypes.int8, np.int8, "int8_t", torch.int8),
        (dtypes.int32, np.int32, "int32_t", torch.int32),
        (dtypes.int64, np.int64, "int64_t", torch.int64),
        (dtypes.uint8, np.uint8, "uint8_t", torch.uint8),
        (dtypes.uint16, np.uint16, "uint16_t", getattr(torch, "uint16", None)),
        (dtypes.boolean, np.bool_, "bool", torch.bool),
    ]
    for dt, np_type, cuda, torch_type in table:
        assert dt.is_standard
        assert dt.np_dtype == np.dtype(np_type)
        assert dt.cuda_type == cuda
        assert dt.torch_dtype == torch_type


def test_subbyte_ints_compute_in_bytes_and_store_as_uint8():
    assert dtypes.int4.np_dtype == np.int8 and dtypes.uint3.np_dtype == np.uint8
    assert dtypes.int4.cuda_type == dtypes.uint1.cuda_type == "uint8_t"
    assert dtypes.int4.torch_dtype is None and not dtypes.int4.is_standard
    assert dtypes.int4.is_subbyte and not dtypes.int8.is_subbyte
    assert dtypes.int7.code_dtype == np.uint8 and dtypes.int32.code_dtype == np.uint32


def test_classification_properties():
    assert dtypes.float6_e3m2.is_float and dtypes.float6_e3m2.is_signed
    assert dtypes.int4.is_integer and dtypes.int4.is_signed
    assert dtypes.uint4.is_integer and not dtypes.uint4.is_signed
    assert dtypes.boolean.is_bool and not dtypes.boolean.is_integer
    assert dtypes.bool_ is dtypes.boolean and dtypes.boolean.bits == 8
    with pytest.raises(TypeError):
        _ = dtypes.int8.bias


def test_str_is_the_canonical_name():
    assert str(dtypes.float6_e3m2) == "float6_e3m2"
    assert str(dtypes.bfloat16) == "bfloat16"
    assert f"{dtypes.uint1}" == "uint1"


def test_constructors_return_shared_instances_and_standard_splits():
    assert dtypes.float_type(3, 2) is dtypes.float6_e3m2
    assert dtypes.float_type(4, 3) is dtypes.float8_e4m3
    assert dtypes.float_type(5, 10) is dtypes.float16
    assert dtypes.float_type(8, 7) is dtypes.bfloat16
    assert dtypes.int_type(4) is dtypes.int4
    assert dtypes.int_type(8, signed=False) is dtypes.uint8
    assert DataType.create("float", 6, 3, 2) == dtypes.float6_e3m2


@pytest.mark.parametrize(
    "args", [(0, 3), (4, 4), (7, 1), (-1, 2), (3, -1)], ids=lambda a: f"e{a[0]}m{a[1]}"
)
def test_invalid_float_splits_are_rejected(args):
    with pytest.raises(ValueError, match="invalid data type"):
        dtypes.float_type(*args)


def test_invalid_types_are_rejected():
    for bits, signed in ((1, True), (9, True), (0, False), (12, False), (128, True)):
        with pytest.raises(ValueError, match="invalid data type"):
            dtypes.int_type(bits, signed)
    with pytest.raises(ValueError, match="canonical name"):
        DataType("float6", 6, "float", 3, 2)
    with pytest.raises(ValueError, match="kind"):
        DataType.create("complex", 64)
    with pytest.raises(ValueError):
        DataType.create("int", 4, 1, 2)


def test_datatype_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        dtypes.int4.bits = 5  # type: ignore[misc]


@given(st.sampled_from(ALL), st.sampled_from(ALL))
def test_equality_and_hash_agree(a, b):
    copy = DataType(**dataclasses.asdict(a))
    assert copy == a and hash(copy) == hash(a)
    assert (a == b) == (a.name == b.name)
    if a == b:
        assert hash(a) == hash(b)


def test_module_attributes_resolve_canonical_names_on_demand():
    assert dtypes.float8_e3m4 is dtypes.float_type(3, 4)
    assert dtypes.float2_e1m0.max == 2.0
    assert "float5_e1m3" in dir(dtypes)
    from tilecraft.dtypes import float7_e2m4  # noqa: F401  (module __getattr__ serves imports)

    for missing in ("half", "float9_e4m4", "int1", "float6_e3m2fn"):
        with pytest.raises(AttributeError):
            getattr(dtypes, missing)


def test_importing_dtypes_does_not_import_torch():
    code = "import sys, tilecraft.dtypes as d; d.float16.max; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
