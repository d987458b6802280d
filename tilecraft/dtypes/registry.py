"""Constructing, naming and resolving data types.

`float_type(e, m)` and `int_type(bits, signed)` return one shared instance per type. `resolve`
turns whatever a user or kernel wrote (a DataType, a name or alias, a numpy/ml_dtypes dtype, a
torch dtype, or the python types bool/int/float) into a DataType, and names near matches when it
cannot. Aliases follow TileLang spelling ("float" is float32, "half" float16, "int" int32).
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.dtypes.datatype import MAX_CUSTOM_BITS, STANDARD_FLOATS, STANDARD_INT_BITS, DataType

_INTERNED: dict[DataType, DataType] = {}


def _intern(dt: DataType) -> DataType:
    """The one shared instance equal to `dt`."""
    return _INTERNED.setdefault(dt, dt)


def float_type(exponent_bits: int, mantissa_bits: int) -> DataType:
    """The signed float type with this exponent/mantissa split, e.g. float_type(3, 2) is
    float6_e3m2. Standard splits give the standard type: float_type(4, 3) is float8_e4m3,
    float_type(5, 10) is float16. Custom splits need 1 <= e, 0 <= m and 1 + e + m <= 8."""
    bits = 1 + exponent_bits + mantissa_bits
    return _intern(DataType.create("float", bits, exponent_bits, mantissa_bits))


def int_type(bits: int, signed: bool = True) -> DataType:
    """The integer type of this width: int2..int8 / uint1..uint8 and the 16, 32, 64-bit ones."""
    return _intern(DataType.create("int" if signed else "uint", bits))


CUSTOM_FLOAT_SPLITS: tuple[tuple[int, int], ...] = tuple(
    (e, bits - 1 - e)
    for bits in range(2, MAX_CUSTOM_BITS + 1)
    for e in range(1, bits)
    if (e, bits - 1 - e) not in STANDARD_FLOATS
)

float64 = float_type(11, 52)
float32 = float_type(8, 23)
float16 = float_type(5, 10)
bfloat16 = float_type(8, 7)
float8_e4m3 = float_type(4, 3)
float8_e5m2 = float_type(5, 2)
int8, int16, int32, int64 = (int_type(b) for b in STANDARD_INT_BITS)
uint8, uint16, uint32, uint64 = (int_type(b, signed=False) for b in STANDARD_INT_BITS)
boolean = _intern(DataType.create("bool", 8))
bool_ = boolean
int2, int3, int4, int5, int6, int7 = (int_type(b) for b in range(2, 8))
uint1, uint2, uint3, uint4, uint5, uint6, uint7 = (int_type(b, signed=False) for b in range(1, 8))
# The custom floats named in the Tilus paper; every other split resolves by name on demand.
float3_e1m1 = float_type(1, 1)
float4_e2m1 = float_type(2, 1)
float5_e2m2 = float_type(2, 2)
float6_e2m3 = float_type(2, 3)
float6_e3m2 = float_type(3, 2)
float7_e3m3 = float_type(3, 3)


def all_dtypes() -> tuple[DataType, ...]:
    """Every type tilecraft knows: standard floats, custom floats, ints, uints and bool."""
    floats = [float_type(e, m) for e, m in STANDARD_FLOATS]
    floats += [float_type(e, m) for e, m in CUSTOM_FLOAT_SPLITS]
    widths = list(range(1, MAX_CUSTOM_BITS)) + list(STANDARD_INT_BITS)
    ints = [int_type(b) for b in widths if b >= 2]
    uints = [int_type(b, signed=False) for b in widths]
    return (*floats, *ints, *uints, boolean)


_ALIASES: dict[str, DataType] = {
    **{name: float_type(e, m) for (e, m), name in STANDARD_FLOATS.items()},
    "float": float32,
    "fp32": float32,
    "f32": float32,
    "double": float64,
    "fp64": float64,
    "f64": float64,
    "half": float16,
    "fp16": float16,
    "f16": float16,
    "bf16": bfloat16,
    "float8_e4m3fn": float8_e4m3,
    "e4m3_float8": float8_e4m3,
    "fp8_e4m3": float8_e4m3,
    "e5m2_float8": float8_e5m2,
    "fp8_e5m2": float8_e5m2,
    # ml_dtypes' "fn" sub-byte floats have exactly our encoding (no inf, no NaN).
    "float4_e2m1fn": float4_e2m1,
    "float6_e2m3fn": float6_e2m3,
    "float6_e3m2fn": float6_e3m2,
    "int": int32,
    "uint": uint32,
    "bool": boolean,
    "boolean": boolean,
}
_FLOAT_NAME = re.compile(r"f(?:loat)?(\d+)_?e(\d+)m(\d+)")  # float6_e3m2, Tilus' f6e3m2
_INT_NAME = re.compile(r"(u|i|uint|int)(\d+)")  # int4, uint1, i8, u4


@functools.lru_cache(maxsize=1024)
def _from_name(name: str) -> DataType | None:
    """The type a name or alias denotes, or None (cached: types are immutable values, and the
    quantized matmul's host path resolves a few names a call)."""
    key = name.strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    try:
        if match := _FLOAT_NAME.fullmatch(key):
            bits, e, m = (int(g) for g in match.groups())
            dt = float_type(e, m)
            return dt if dt.bits == bits else None
        if match := _INT_NAME.fullmatch(key):
            return int_type(int(match.group(2)), signed=not match.group(1).startswith("u"))
    except ValueError:
        return None
    return None


def lookup_canonical(name: str) -> DataType | None:
    """The type whose canonical name is exactly `name` (no aliases), or None."""
    dt = _from_name(name)
    return dt if dt is not None and dt.name == name else None


@functools.lru_cache(maxsize=1)
def _numpy_table() -> dict[np.dtype, DataType]:
    import ml_dtypes

    table = {dt.np_dtype: dt for dt in all_dtypes() if dt.is_standard}
    for ml_name, dt in (
        ("float4_e2m1fn", float4_e2m1),
        ("float6_e2m3fn", float6_e2m3),
        ("float6_e3m2fn", float6_e3m2),
        ("int2", int2),
        ("int4", int4),
        ("uint1", uint1),
        ("uint2", uint2),
        ("uint4", uint4),
    ):
        ml_type = getattr(ml_dtypes, ml_name, None)
        if ml_type is not None:
            table[np.dtype(ml_type)] = dt
    return table


def _is_torch_dtype(x: Any) -> bool:
    cls = type(x)
    return cls.__name__ == "dtype" and cls.__module__.split(".")[0] == "torch"


class UnknownDTypeError(TilecraftError, ValueError):
    """TC210: a name (or object) that is no data type; a ValueError for callers that probe."""


def _unknown(what: str, spelled: str) -> UnknownDTypeError:
    known = sorted({dt.name for dt in all_dtypes()} | set(_ALIASES))
    near = difflib.get_close_matches(spelled.lower(), known, n=4, cutoff=0.6)
    hint = f"did you mean {', '.join(near)}?" if near else "see tilecraft.dtypes.all_dtypes()"
    return UnknownDTypeError("TC210", what=what, hint=hint)


def resolve(x: Any) -> DataType:
    """The DataType denoted by `x`.

    Accepts a DataType; a canonical name or alias ("float6_e3m2", "half", "bf16", "int",
    "float8_e4m3fn", "e4m3_float8", "f6e3m2", "u4", ...); a numpy or ml_dtypes dtype or scalar
    type; a torch dtype; or the python types bool, int (int32) and float (float32).
    Raises ValueError, naming near matches, for anything else.
    """
    if isinstance(x, DataType):
        return x
    if isinstance(x, str):
        dt = _from_name(x)
        if dt is None:
            raise _unknown(repr(x), x)
        return dt
    if x is bool:
        return boolean
    if x is int:
        return int32
    if x is float:
        return float32
    if _is_torch_dtype(x):
        name = str(x).removeprefix("torch.")
        dt = _from_name(name)
        if dt is None:
            raise _unknown(f"torch.{name} (no tilecraft equivalent)", name)
        return dt
    if x is not None:
        try:
            np_dtype = np.dtype(x)
        except TypeError:
            np_dtype = None
        if np_dtype is not None:
            dt = _numpy_table().get(np_dtype)
            if dt is None:
                raise _unknown(f"numpy dtype {np_dtype.name!r} (no tilecraft equivalent)", "")
            return dt
    raise UnknownDTypeError("TC210", what=f"{x!r} (cannot resolve a {type(x).__name__})",
                            hint='name a data type: "float16", T.float32, torch.int8, ...')


def bits_of(x: Any) -> int:
    """Width in bits of the type `x` resolves to."""
    return resolve(x).bits
