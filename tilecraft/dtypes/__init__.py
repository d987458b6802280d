"""tilecraft's scalar data types: standard, sub-byte and custom low-precision types.

    from tilecraft import dtypes
    dtypes.float6_e3m2.max          # 28.0
    dtypes.resolve("half")          # float16
    codes = dtypes.int4.from_float(np.array([-2.5, 9.0]))   # rounds half-to-even, saturates
    dtypes.pack(codes, dtypes.int4) # compact bytes, LSB first

Every canonical name resolves as an attribute (`dtypes.float5_e1m3`, `dtypes.uint3`), including
custom floats that are created on first use. The rules are documented in docs/dtypes.md.
"""

from __future__ import annotations

from tilecraft.dtypes.datatype import DataType
from tilecraft.dtypes.floatcodec import FloatFormat, float_format
from tilecraft.dtypes.packing import pack, packed_nbytes, unpack
from tilecraft.dtypes.registry import (
    CUSTOM_FLOAT_SPLITS,
    all_dtypes,
    bfloat16,
    bits_of,
    bool_,
    boolean,
    float3_e1m1,
    float4_e2m1,
    float5_e2m2,
    float6_e2m3,
    float6_e3m2,
    float7_e3m3,
    float8_e4m3,
    float8_e5m2,
    float16,
    float32,
    float64,
    float_type,
    int2,
    int3,
    int4,
    int5,
    int6,
    int7,
    int8,
    int16,
    int32,
    int64,
    int_type,
    lookup_canonical,
    resolve,
    uint1,
    uint2,
    uint3,
    uint4,
    uint5,
    uint6,
    uint7,
    uint8,
    uint16,
    uint32,
    uint64,
)

__all__ = [
    "CUSTOM_FLOAT_SPLITS",
    "DataType",
    "FloatFormat",
    "all_dtypes",
    "bfloat16",
    "bits_of",
    "bool_",
    "boolean",
    "float3_e1m1",
    "float4_e2m1",
    "float5_e2m2",
    "float6_e2m3",
    "float6_e3m2",
    "float7_e3m3",
    "float8_e4m3",
    "float8_e5m2",
    "float16",
    "float32",
    "float64",
    "float_format",
    "float_type",
    "int2",
    "int3",
    "int4",
    "int5",
    "int6",
    "int7",
    "int8",
    "int16",
    "int32",
    "int64",
    "int_type",
    "lookup_canonical",
    "pack",
    "packed_nbytes",
    "resolve",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "uint5",
    "uint6",
    "uint7",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "unpack",
]


def __getattr__(name: str) -> DataType:
    """Resolve canonical type names not defined above, e.g. `dtypes.float8_e3m4`."""
    dt = lookup_canonical(name)
    if dt is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return dt


def __dir__() -> list[str]:
    return sorted(set(globals()) | {dt.name for dt in all_dtypes()})
