"""The `DataType` value class: one frozen record per scalar type tilecraft knows.

A data type is fully described by its kind ("float", "int", "uint", "bool"), its width in bits and,
for floats, its exponent/mantissa split; `name` is the canonical spelling derived from those fields
(`DataType.create` computes it, `__post_init__` checks it). Equality and hashing are by value.

Every value of a type has a *code*: its bit pattern as an unsigned integer in [0, 2**bits).
Codes are what memory holds (see `tilecraft.dtypes.packing`); `to_float`/`from_float` convert
between codes and numbers, `decode`/`encode` between codes and the numpy compute type
(`np_dtype`), and `cast_array`/`round` model what a GPU store of a value into this type does. The
rules are written out in docs/dtypes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tilecraft.dtypes import convert, floatcodec

KINDS = ("float", "int", "uint", "bool")

# (exponent_bits, mantissa_bits) -> canonical name of the types with a hardware/numpy storage type.
STANDARD_FLOATS: dict[tuple[int, int], str] = {
    (11, 52): "float64",
    (8, 23): "float32",
    (5, 10): "float16",
    (8, 7): "bfloat16",
    (4, 3): "float8_e4m3",
    (5, 2): "float8_e5m2",
}
STANDARD_INT_BITS = (8, 16, 32, 64)
MAX_CUSTOM_BITS = 8

# the floats numpy holds exactly (bf16 and fp8 through ml_dtypes, imported when first asked:
# it costs milliseconds, and a process that loads a cached kernel never asks)
_FLOAT_NP_NAMES = {"float64": "float64", "float32": "float32", "float16": "float16",
                   "bfloat16": "bfloat16", "float8_e4m3": "float8_e4m3fn",
                   "float8_e5m2": "float8_e5m2"}
_FLOAT_NP: dict[str, np.dtype] = {}


def _float_np(name: str) -> np.dtype | None:
    """The numpy dtype of the standard float `name`, or None."""
    found = _FLOAT_NP.get(name)
    if found is None and name in _FLOAT_NP_NAMES:
        attr = _FLOAT_NP_NAMES[name]
        if hasattr(np, attr):
            found = np.dtype(getattr(np, attr))
        else:
            import ml_dtypes

            found = np.dtype(getattr(ml_dtypes, attr))
        _FLOAT_NP[name] = found
    return found
_FLOAT_CUDA = {
    "float64": "double",
    "float32": "float",
    "float16": "half",
    "bfloat16": "__nv_bfloat16",
    "float8_e4m3": "__nv_fp8_e4m3",
    "float8_e5m2": "__nv_fp8_e5m2",
}
# canonical name -> attribute of the torch module (looked up lazily; missing attributes give None)
_TORCH_NAMES = {
    "float8_e4m3": "float8_e4m3fn",
    **{n: n for n in ("float64", "float32", "float16", "bfloat16", "float8_e5m2", "bool")},
    **{f"int{b}": f"int{b}" for b in STANDARD_INT_BITS},
    **{f"uint{b}": f"uint{b}" for b in STANDARD_INT_BITS},
}


def canonical_name(kind: str, bits: int, exponent_bits: int = 0, mantissa_bits: int = 0) -> str:
    """The canonical name of a type, e.g. ("float", 6, 3, 2) -> "float6_e3m2"."""
    if kind == "float":
        std = STANDARD_FLOATS.get((exponent_bits, mantissa_bits))
        return std if std is not None else f"float{bits}_e{exponent_bits}m{mantissa_bits}"
    if kind == "bool":
        return "bool"
    return f"{kind}{bits}"


def _check_fields(kind: str, bits: int, e: int, m: int) -> str | None:
    """Why (kind, bits, e, m) is not a valid type, or None when it is."""
    if kind not in KINDS:
        return f"kind must be one of {KINDS}, got {kind!r}"
    if kind == "float":
        if bits != 1 + e + m:
            return f"a float needs bits == 1 + exponent + mantissa, got {bits} != 1 + {e} + {m}"
        if (e, m) in STANDARD_FLOATS:
            return None
        if e < 1 or m < 0 or bits > MAX_CUSTOM_BITS:
            return (
                f"custom floats need 1 <= exponent_bits, 0 <= mantissa_bits and at most "
                f"{MAX_CUSTOM_BITS} bits, got e={e} m={m}"
            )
        return None
    if e != 0 or m != 0:
        return f"{kind} types have no exponent/mantissa bits"
    if kind == "bool":
        return None if bits == 8 else "bool is stored in 8 bits"
    low = 2 if kind == "int" else 1
    if bits in STANDARD_INT_BITS or low <= bits <= MAX_CUSTOM_BITS:
        return None
    return f"{kind} widths are {low}..{MAX_CUSTOM_BITS}, 16, 32 or 64 bits, got {bits}"


@dataclass(frozen=True)
class DataType:
    """A scalar data type: its canonical name, width and (for floats) exponent/mantissa split.

    Build instances with `DataType.create`, `float_type`, `int_type` or `resolve`; the module-level
    constants (`float16`, `int4`, `float6_e3m2`, ...) are the usual way to name one.
    """

    name: str
    bits: int
    kind: str
    exponent_bits: int = 0
    mantissa_bits: int = 0

    def __post_init__(self) -> None:
        problem = _check_fields(self.kind, self.bits, self.exponent_bits, self.mantissa_bits)
        if problem is None:
            expected = canonical_name(self.kind, self.bits, self.exponent_bits, self.mantissa_bits)
            if self.name != expected:
                problem = f"the canonical name is {expected!r}, got {self.name!r}"
        if problem is not None:
            raise ValueError(f"invalid data type: {problem}")

    @classmethod
    def create(
        cls, kind: str, bits: int, exponent_bits: int = 0, mantissa_bits: int = 0
    ) -> DataType:
        """Build a type from its fields, deriving the canonical name."""
        name = canonical_name(kind, bits, exponent_bits, mantissa_bits)
        return cls(name, bits, kind, exponent_bits, mantissa_bits)

    def __str__(self) -> str:
        return self.name

    # ----------------------------------------------------------------- classification
    @property
    def is_float(self) -> bool:
        """True for floating-point types."""
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integer types (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        """True for the boolean type."""
        return self.kind == "bool"

    @property
    def is_signed(self) -> bool:
        """True for types with negative values (floats and signed ints)."""
        return self.kind in ("float", "int")

    @property
    def is_standard(self) -> bool:
        """True when numpy (with ml_dtypes) has a storage type holding exactly this type."""
        if self.is_float:
            return self.name in _FLOAT_NP_NAMES
        return self.is_bool or self.bits in STANDARD_INT_BITS

    @property
    def is_subbyte(self) -> bool:
        """True for types narrower than a byte (stored compactly, see `pack`)."""
        return self.bits < 8

    # ----------------------------------------------------------------- value range
    @property
    def min(self) -> int | float:
        """The lowest finite value (-max for floats, 0 for unsigned ints and bool)."""
        if self.is_float:
            return -self.max
        if self.kind == "int":
            return -(1 << (self.bits - 1))
        return 0

    @property
    def max(self) -> int | float:
        """The largest finite value (for floats also the largest finite magnitude)."""
        if self.is_float:
            return floatcodec.float_format(self.exponent_bits, self.mantissa_bits).max_value
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1
        if self.is_bool:
            return 1
        return (1 << self.bits) - 1

    @property
    def bias(self) -> int:
        """The exponent bias of a float type, 2**(exponent_bits - 1) - 1."""
        if not self.is_float:
            raise TypeError(f"{self.name} is not a float type and has no exponent bias")
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def f16_headroom(self) -> int:
        """h such that a code of this float type placed in an f16's fields (its exponent and
        mantissa at the top of the f16's, the sign on top) reads as the value times 2^-h (the
        biases' difference, 15 - bias): for floats of at most 8 bits with every code finite
        and at most 4 exponent bits; 0 for the rest (the fast casts multiply them instead)."""
        if not self.is_float or self.bits > 8 or self.has_nan or self.exponent_bits > 4:
            return 0
        return 15 - self.bias

    @property
    def has_inf(self) -> bool:
        """True for float types with an infinity encoding (IEEE-like: float16/32/64, bf16, e5m2)."""
        return self.is_float and floatcodec.float_format(*self._em).special == "ieee"

    @property
    def has_nan(self) -> bool:
        """True for float types with a NaN encoding (all standard floats, no custom float)."""
        return self.is_float and floatcodec.float_format(*self._em).special != "finite"

    @property
    def _em(self) -> tuple[int, int]:
        return self.exponent_bits, self.mantissa_bits

    # ----------------------------------------------------------------- host types
    @property
    def np_dtype(self) -> np.dtype:
        """The numpy type holding values of this type for computation.

        Standard types map to their exact numpy/ml_dtypes type; custom floats compute in float32,
        sub-byte ints in int8/uint8.
        """
        if self.is_float:
            return _float_np(self.name) or np.dtype(np.float32)
        if self.is_bool:
            return np.dtype(np.bool_)
        width = max(self.bits, 8)
        return np.dtype(f"{'u' if self.kind == 'uint' else ''}int{width}")

    @property
    def code_dtype(self) -> np.dtype:
        """The unsigned numpy type holding this type's codes (bit patterns)."""
        return np.dtype(f"uint{max(8, self.bits)}")

    @property
    def cuda_type(self) -> str:
        """The C++ type of a scalar in generated CUDA; sub-byte/custom types use "uint8_t"."""
        if self.is_float:
            return _FLOAT_CUDA.get(self.name, "uint8_t")
        if self.is_bool:
            return "bool"
        if self.bits < 8:
            return "uint8_t"
        return f"{'u' if self.kind == 'uint' else ''}int{self.bits}_t"

    @property
    def torch_dtype(self) -> Any:
        """The torch dtype of this type, or None where torch has none usable.

        Sub-byte and custom float types return None: their tensors travel as packed torch.uint8.
        torch is imported only when this property is read.
        """
        attr = _TORCH_NAMES.get(self.name)
        if attr is None:
            return None
        import torch

        return getattr(torch, attr, None)

    # ----------------------------------------------------------------- conversions
    def to_float(self, codes: Any) -> np.ndarray:
        """Decode integer codes to their exact values as float32 (float64 where float32 is too
        narrow: float64 and 32/64-bit ints; 64-bit ints beyond 2**53 are rounded)."""
        return convert.to_float(self, codes)

    def from_float(self, values: Any) -> np.ndarray:
        """Encode numbers as codes, rounding to nearest (ties to even).

        Floats: overflow gives +-inf for float16/bfloat16/float32/float64 and saturates to +-max
        for every other float type (fp8 follows CUDA's satfinite conversions); NaN gives the code
        `floatcodec.FloatFormat.nan_code` (+0 for custom floats, which have no NaN).
        Ints: round half to even, saturate to [min, max], NaN -> 0. Bool: value != 0.
        """
        return convert.from_float(self, values)

    def decode(self, codes: Any) -> np.ndarray:
        """Codes -> values in `np_dtype` (views for standard types, sign extension for ints)."""
        return convert.decode(self, codes)

    def encode(self, values: Any) -> np.ndarray:
        """Values -> codes; the inverse of `decode` (non-representable values convert as in
        `cast_array`)."""
        return convert.encode(self, values)

    def cast_array(self, values: Any) -> np.ndarray:
        """Convert an array to `np_dtype` the way a GPU conversion to this type does.

        Float targets round to nearest even (see `from_float` for overflow); float -> int
        truncates toward zero and saturates (NaN -> 0); int -> int wraps (two's complement);
        anything -> bool is `value != 0`.
        """
        return convert.cast_array(self, values)

    def round(self, values: Any) -> np.ndarray:
        """Values after a store to this float type and a load back, as float32 (float64 for
        float64). The interpreter calls this to round exactly like GPU stores."""
        return convert.round_float(self, values)
