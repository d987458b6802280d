"""Quantized weights on the host: `quantize(weight, dtype, group_size, scheme)` -> a
`QuantizedWeight`.

    qw = tilecraft.quant.quantize(linear.weight, "uint4", group_size=128)  # (N, K) float
    qw.packed, qw.scales, qw.zeros        # what the kernel reads (module quant/qmm.py)
    qw.dequantize()                       # (N, K) float32: the weight the kernel computes with

**The math** (docs/quant.md): `w[n, k] = (value(q[n, k]) - z) * s[n, k // group_size]`, value()
the type's value of code q (`tilecraft.dequantize`), s = `scales` (N, G) in float16 or bfloat16,
z = `zeros[n, g]` (asymmetric) or the constant `zero_point`: 2**(bits-1) for symmetric uint
types (centred codes), 0 for signed ints and floats.

**Scales**: symmetric: s = absmax / qmax with qmax = 2**(bits-1) - 1 for ints (int4: 7, so the
grid is symmetric and code -8 is never produced) and the type's max finite value for floats;
asymmetric ints: s = (hi - lo) / (2**bits - 1) over [lo, hi] = [min(min, 0), max(max, 0)],
z = round(qmin - lo / s) clamped to [qmin, qmax] (the values of the type's codes); asymmetric
floats: z = 0 and s as symmetric (a shifted float grid loses its fine steps near 0, and v - z
is not exact in f16). s is rounded *up* to the scale dtype (no weight clips by more than s / 2),
an all-zero group gets the weight's smallest nonzero s (1 if every group is zero).
Codes: `tilecraft.quantize_to(w / s + z, dtype)` (nearest value, ties to even, saturating),
packed with `qmm.pack_codes(codes, dtype)` (`pack_weight` in `qmm.pack_layout(dtype)`, or bit planes
for 5-bit integers and float6_e2m3, or codes in bytes for 3-, 6- and 7-bit integers (3 bits: in
nibbles) and float6_e3m2).

Refusals are TC321 at the user's line (the first frame outside tilecraft and torch).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from tilecraft import dtypes
from tilecraft.diagnostics.errors import caller_span, entry_point, is_internal_file
from tilecraft.diagnostics.span import Span
from tilecraft.dtypes import DataType
from tilecraft.lowbit import LowbitError

__all__ = ["QuantizedWeight", "quantize"]

K_TILE = 64  # the kernel's k tile: K and group sizes are multiples of it
N_TILE = 64  # N must be a multiple of this (the packed tiles are 16 rows; the kernel wants 64)
SCHEMES = ("symmetric", "asymmetric")
SCALE_DTYPES = ("float16", "bfloat16")

#: the state_dict format: its number changes with the packed layout of any type (2: 6-bit
#: floats as bit planes, session 19; 3: 3-, 6- and 7-bit integers and float6_e3m2 as codes
#: in bytes (3 bits: nibbles), session 24)
FORMAT = "tilecraft.QuantizedWeight/3"


# ---- errors at the user's line ----------------------------------------------------------------
def user_span() -> Span | None:
    """The span of the innermost frame outside tilecraft and torch (a `QuantLinear` called
    through `nn.Module.__call__` reports the user's `model(x)` line)."""
    torch_dir = _torch_dir()
    return caller_span(lambda frame: _skipped(frame, torch_dir))


def _skipped(frame: Any, torch_dir: str) -> bool:
    """tilecraft's and torch's frames, and code they generated (a dataclass's __init__)."""
    path = frame.f_code.co_filename
    if path.startswith("<"):
        return str(frame.f_globals.get("__name__", "")).startswith(("tilecraft.", "torch."))
    return is_internal_file(path) or os.path.abspath(path).startswith(torch_dir)


def _torch_dir() -> str:
    torch = sys.modules.get("torch")
    if torch is None or not getattr(torch, "__file__", None):
        return "\0"  # matches no file
    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def refuse(func: str, detail: str, hint: str = "") -> LowbitError:
    """TC321 for a misuse of `tilecraft.<func>`, located at the user's line."""
    return LowbitError("TC321", span=user_span(), func=func, detail=detail, hint=hint)


# ---- argument checks --------------------------------------------------------------------------
def weight_dtype(func: str, dtype: Any) -> DataType:
    try:
        dt = dtypes.resolve(dtype)
    except (ValueError, TypeError) as exc:
        raise refuse(func, f"unknown data type {dtype!r} (argument `dtype`)", str(exc)) from None
    if dt.bits > 8 or dt.is_bool:
        raise refuse(func, f"argument `dtype` is {dt.name}: weights are quantized to types of "
                     "1 to 8 bits", "e.g. uint4, int8, float8_e4m3, float4_e2m1")
    return dt


def resolve_scheme(func: str, scheme: Any, dt: DataType) -> str:
    if scheme is None:
        scheme = "asymmetric" if dt.is_integer and not dt.is_signed else "symmetric"
    if scheme not in SCHEMES:
        raise refuse(func, f"argument `scheme` is {scheme!r}", "\"symmetric\", \"asymmetric\" "
                     "or None (asymmetric for uint types, symmetric for the others)")
    if scheme == "symmetric" and dt.name == "uint1":
        raise refuse(func, "symmetric uint1 has the codes {-1, 0} around its zero point 1: "
                     "no positive weight", "use scheme=\"asymmetric\" (the default for uint)")
    return scheme


def scale_dtype_name(func: str, scale_dtype: Any) -> str:
    try:
        name = dtypes.resolve(scale_dtype).name
    except (ValueError, TypeError):
        name = None
    if name not in SCALE_DTYPES:
        raise refuse(func, f"argument `scale_dtype` is {scale_dtype!r}",
                     "scales are \"float16\" or \"bfloat16\"")
    return name


def group_of(func: str, group_size: Any, shape: tuple[int, int]) -> int:
    """The group size (K for None) after checking the shape the kernel needs."""
    N, K = shape
    if N % N_TILE or K % K_TILE or N == 0 or K == 0:
        raise refuse(func, f"the weight has shape (N, K) = {shape}: the kernel needs N and K "
                     f"positive multiples of {N_TILE}", "pad the weight (zero rows/columns), or "
                     "leave this layer unquantized")
    if group_size is None:
        return K
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0 \
            or group_size % K_TILE or K % group_size:
        raise refuse(func, f"argument `group_size` is {group_size!r}: it must be a multiple of "
                     f"{K_TILE} that divides K = {K}", "e.g. 64 or 128, or None for one scale "
                     "per output channel")
    return group_size


def zero_point_of(dt: DataType, scheme: str) -> float:
    """The constant zero of a symmetric scheme (unused by an asymmetric one: 0)."""
    return float(1 << (dt.bits - 1)) if scheme == "symmetric" and not dt.is_signed else 0.0


# ---- the quantized weight ---------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class QuantizedWeight:
    """A (N, K) weight quantized to `dtype` per group of `group_size` columns (module docstring):
    `packed` uint8 (N/16, K/64, 128*bits), `scales` (N, G), `zeros` (N, G) or None."""

    packed: Any
    scales: Any
    zeros: Any | None
    dtype: str
    group_size: int
    shape: tuple[int, int]
    zero_point: float
    scheme: str

    def __post_init__(self) -> None:
        from tilecraft.quant.qmm import packed_shape

        dt = weight_dtype("quant.QuantizedWeight", self.dtype)
        object.__setattr__(self, "dtype", dt.name)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "zero_point", float(self.zero_point))
        N, K = self.shape
        group = group_of("quant.QuantizedWeight", int(self.group_size), self.shape)
        want = {"packed": packed_shape(N, K, dt.bits), "scales": (N, K // group)}
        if self.zeros is not None:
            want["zeros"] = (N, K // group)
        for name, shape in want.items():
            t = getattr(self, name)
            if tuple(getattr(t, "shape", ())) != shape:
                raise refuse("quant.QuantizedWeight", f"`{name}` has shape "
                             f"{tuple(getattr(t, 'shape', ()))}, expected {shape} for a {dt.name} "
                             f"weight of shape {self.shape} in groups of {group}")
        if str(self.packed.dtype) != "torch.uint8":
            raise refuse("quant.QuantizedWeight", f"`packed` is {self.packed.dtype}, not uint8")
        for t in (self.scales, self.zeros):
            if t is not None and str(t.dtype).replace("torch.", "") not in SCALE_DTYPES:
                raise refuse("quant.QuantizedWeight", f"scales and zeros are float16 or "
                             f"bfloat16, got {t.dtype}")
            if t is not None and t.device != self.packed.device:
                raise refuse("quant.QuantizedWeight", "`packed`, `scales` and `zeros` lie on "
                             f"different devices ({self.packed.device}, {t.device})")
        if self.scheme not in SCHEMES or (self.scheme == "asymmetric") != (self.zeros is not None):
            raise refuse("quant.QuantizedWeight", f"scheme {self.scheme!r} with zeros "
                         f"{'given' if self.zeros is not None else 'None'}",
                         "an asymmetric weight has zeros, a symmetric one has not")

    @property
    def bits(self) -> int:
        return dtypes.resolve(self.dtype).bits

    @property
    def num_groups(self) -> int:
        return self.shape[1] // self.group_size

    @property
    def device(self) -> Any:
        return self.packed.device

    @property
    def nbytes(self) -> int:
        """Bytes of `packed`, `scales` and `zeros` together."""
        return sum(t.numel() * t.element_size() for t in (self.packed, self.scales, self.zeros)
                   if t is not None)

    def codes(self) -> Any:
        """The (N, K) codes (uint8), unpacked from `packed` on its device."""
        from tilecraft.quant.qmm import unpack_codes

        return unpack_codes(self.packed, self.dtype)

    def dequantize(self, dtype: Any = None) -> Any:
        """The (N, K) weight `(value(code) - z) * s`, computed in float64 from the packed codes
        and returned as `dtype` (default torch.float32): the reference of every test."""
        import torch

        import tilecraft

        values = tilecraft.dequantize(self.codes(), self.dtype).double()
        zero = self.zero_point if self.zeros is None else self._expand(self.zeros)
        w = (values - zero) * self._expand(self.scales)
        return w.to(dtype if dtype is not None else torch.float32)

    def _expand(self, t: Any) -> Any:
        return t.double().repeat_interleave(self.group_size, dim=1)

    def to(self, device: Any) -> QuantizedWeight:
        """The same weight with its tensors on `device` (bits and dtypes unchanged)."""
        z = None if self.zeros is None else self.zeros.to(device)
        return self.replace(packed=self.packed.to(device), scales=self.scales.to(device), zeros=z)

    def replace(self, **changes: Any) -> QuantizedWeight:
        fields = {**self.state_dict(), **changes}
        fields.pop("format", None)
        return QuantizedWeight(**fields)

    def state_dict(self) -> dict[str, Any]:
        """A plain dict: the tensors and the metadata (`QuantizedWeight.from_state_dict`)."""
        return {"format": FORMAT, "packed": self.packed,
                "scales": self.scales, "zeros": self.zeros, "dtype": self.dtype,
                "group_size": self.group_size, "shape": self.shape,
                "zero_point": self.zero_point, "scheme": self.scheme}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> QuantizedWeight:
        fields = dict(state)
        tag = fields.pop("format", None)
        if tag != FORMAT:
            what = "was made by an earlier tilecraft, whose packed bytes are laid out " \
                "differently (quantize the float weight again)" if isinstance(tag, str) and \
                tag.startswith("tilecraft.QuantizedWeight/") else \
                "was not made by QuantizedWeight.state_dict()"
            raise refuse("quant.QuantizedWeight.from_state_dict", f"the dict {what}")
        return cls(**fields)

    def __repr__(self) -> str:
        return (f"QuantizedWeight({self.dtype}, shape={self.shape}, group_size={self.group_size}"
                f", {self.scheme}, scales={str(self.scales.dtype).replace('torch.', '')}, "
                f"device={self.device}, nbytes={self.nbytes})")


@entry_point
def quantize(weight: Any, dtype: Any, group_size: int | None = 128, scheme: str | None = None,
             scale_dtype: Any = "float16") -> QuantizedWeight:
    """A float (N, K) weight (nn.Linear's layout; torch, CPU or CUDA) quantized to `dtype` (any
    type of 1 to 8 bits) per group of `group_size` columns (None: per output channel), with
    scheme "symmetric" or "asymmetric" (None: asymmetric for uint types, else symmetric).
    N and K must be multiples of 64, `group_size` a multiple of 64 dividing K.
    An asymmetric uint1 or uint2 group whose zero lies in the upper half of the codes (z >
    m / 2, m = 2^bits - 1) is stored with its codes flipped (m - q), its zero m - z and its
    scale negated: the same weights, and zeros that are all 0 (uint1) or 0 or 1 (uint2: all 1
    where no group's range [lo, hi] has one side under a fifth of the other),
    which the kernels then subtract as a constant (`qmm.uniform_zero`)."""
    import torch

    from tilecraft.quant.qmm import pack_codes

    func = "quant.quantize"
    dt = weight_dtype(func, dtype)
    scheme = resolve_scheme(func, scheme, dt)
    sdt = getattr(torch, scale_dtype_name(func, scale_dtype))
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.dim() != 2:
        raise refuse(func, f"argument `weight` must be a 2-D float torch tensor (N, K), got "
                     f"{_describe(weight)}")
    shape = (int(weight.shape[0]), int(weight.shape[1]))
    group = group_of(func, group_size, shape)
    w = weight.detach().double()
    if not torch.isfinite(w).all():
        raise refuse(func, "argument `weight` holds NaN or inf")
    N, K = shape
    wg = w.reshape(N, K // group, group)
    asym_int = scheme == "asymmetric" and dt.is_integer
    if asym_int:
        lo, hi = wg.amin(-1).clamp(max=0), wg.amax(-1).clamp(min=0)
        scales = _stored_scale(func, (hi - lo) / ((1 << dt.bits) - 1), sdt)
    else:
        qmax = (1 << (dt.bits - 1)) - 1 if dt.is_integer else float(dt.max)
        scales = _stored_scale(func, wg.abs().amax(-1) / qmax, sdt)
    zeros = None
    zero = torch.tensor(zero_point_of(dt, scheme), dtype=torch.float64, device=w.device)
    if asym_int:
        qmin = dt.min  # the value of the smallest code (0 for uint)
        zeros = (qmin - lo / scales.double()).round().clamp(dt.min, dt.max).to(sdt)
        zero = zeros.double()[..., None]
    elif scheme == "asymmetric":
        zeros = torch.zeros_like(scales)
    v = wg / scales.double()[..., None] + zero
    import tilecraft

    codes = tilecraft.quantize_to(v.reshape(N, K), dt)
    if asym_int and dt.kind == "uint" and dt.bits <= 2:  # zeros in the upper half as signs:
        # (q - z) s = ((m - q) - (m - z)) (-s), m = 2^bits - 1, exactly: uint1's zeros all 0,
        # uint2's 0 or 1 (mostly 1): a zero common to every group is a constant the kernels
        # subtract in the cast for free (qmm.uniform_zero)
        m = (1 << dt.bits) - 1
        up = zeros > m / 2
        codes = codes ^ (up.repeat_interleave(group, dim=1).to(codes.dtype) * m)
        scales = torch.where(up, -scales, scales)
        zeros = torch.where(up, m - zeros, zeros)
    packed = pack_codes(codes, dt)
    return QuantizedWeight(packed=packed, scales=scales, zeros=zeros, dtype=dt.name,
                           group_size=group, shape=shape, zero_point=zero_point_of(dt, scheme),
                           scheme=scheme)


def _stored_scale(func: str, s: Any, sdt: Any) -> Any:
    """`s` (float64) in the scale dtype, rounded up (never below s: no weight clips); an
    all-zero group (whose codes are its zero at any scale) takes the smallest nonzero scale of
    the weight, or 1 when there is none, which keeps the scales' range as narrow as the weight's
    (f16 activations take bf16 scales through one power of two: qmm.scale_shift); refused when
    it overflows the scale dtype."""
    import torch

    fill = s[s > 0].min() if bool((s > 0).any()) else 1.0
    s = torch.where(s == 0, fill, s)
    stored = s.to(sdt)
    bumped = (stored.view(torch.int16) + 1).view(sdt)  # the next float up (positive, finite)
    stored = torch.where(stored.double() < s, bumped, stored)
    if not torch.isfinite(stored).all():
        big = float(s.max())
        raise refuse(func, f"a scale ({big:.3g}) overflows {str(sdt).replace('torch.', '')}",
                     "pass scale_dtype=\"bfloat16\", or scale the weight down")
    return stored


def _describe(x: Any) -> str:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__name__} of dtype {x.dtype} and shape {tuple(x.shape)}"
    return type(x).__name__
