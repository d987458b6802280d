"""`QuantLinear`: a drop-in for `nn.Linear` whose weight is a `QuantizedWeight`, and
`quantize_model`, which swaps the `nn.Linear` layers of a model for it.

    model = tilecraft.nn.quantize_model(model, dtype="uint4", group_size=128, skip=("lm_head",))
    y = model(x.half())                    # every QuantLinear runs tilecraft.quant.matmul

The quantized weight's tensors are buffers (`packed`, `scales`, `zeros`), so `.to()`, `.cuda()`
and `state_dict()` carry them; its metadata (type, group size, scheme, zero point, shape) is the
module's extra state, so `load_state_dict` restores the weight bit for bit. Casts of the module
(`.half()`, `.to(torch.bfloat16)`) reach the bias only: the scales keep their dtype. Inference
only (no gradient flows through the kernel).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from tilecraft.diagnostics.errors import entry_point, warn_at
from tilecraft.quant.api import matmul
from tilecraft.quant.qmm import packed_shape
from tilecraft.quant.quantized import (
    QuantizedWeight,
    group_of,
    quantize,
    refuse,
    resolve_scheme,
    scale_dtype_name,
    user_span,
    weight_dtype,
    zero_point_of,
)

__all__ = ["QuantLinear", "quantize_model"]

_QUANT_BUFFERS = ("scales", "zeros")  # float buffers whose dtype casts of the module keep


class QuantLinear(nn.Module):
    """y = x @ dequant(W).T + b with W quantized (tilecraft.quant.quantize); x of shape
    (..., in_features) in float16 or bfloat16. `QuantLinear(in, out, ...)` makes an empty
    layer to load a state dict into; `QuantLinear.from_linear(linear, ...)` quantizes one."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: Any = "uint4", group_size: int | None = 128, scheme: str | None = None,
                 scale_dtype: Any = "float16", device: Any = None) -> None:
        super().__init__()
        func = "nn.QuantLinear"
        dt = weight_dtype(func, dtype)
        scheme = resolve_scheme(func, scheme, dt)
        sdt = getattr(torch, scale_dtype_name(func, scale_dtype))
        shape = (int(out_features), int(in_features))
        group = group_of(func, group_size, shape)
        groups = (shape[0], shape[1] // group)
        self._set(QuantizedWeight(
            packed=torch.zeros(packed_shape(*shape, dt.bits), dtype=torch.uint8, device=device),
            scales=torch.ones(groups, dtype=sdt, device=device),
            zeros=torch.zeros(groups, dtype=sdt, device=device) if scheme == "asymmetric"
            else None, dtype=dt.name, group_size=group, shape=shape,
            zero_point=zero_point_of(dt, scheme), scheme=scheme))
        b = torch.zeros(shape[0], device=device) if bias else None
        self.bias = None if b is None else nn.Parameter(b, requires_grad=False)

    @classmethod
    @entry_point
    def from_linear(cls, linear: nn.Linear, dtype: Any = "uint4", group_size: int | None = 128,
                    scheme: str | None = None, scale_dtype: Any = "float16") -> QuantLinear:
        """`linear` (an nn.Linear, its weight (out, in) with in and out multiples of 64)
        quantized by `tilecraft.quant.quantize(linear.weight, dtype, group_size, scheme)`; the
        bias is copied as it is (cast to x's dtype in forward)."""
        if not isinstance(linear, nn.Linear):
            raise refuse("nn.QuantLinear.from_linear", f"argument `linear` is a "
                         f"{type(linear).__name__}, not a torch.nn.Linear")
        qweight = quantize(linear.weight, dtype, group_size, scheme, scale_dtype)
        return cls.from_qweight(qweight, linear.bias)

    @classmethod
    def from_qweight(cls, qweight: QuantizedWeight, bias: Any = None) -> QuantLinear:
        """A layer holding `qweight` (not copied) and a copy of `bias` (or none)."""
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._set(qweight)
        layer.bias = None if bias is None else nn.Parameter(bias.detach().clone(),
                                                            requires_grad=False)
        return layer

    def _set(self, qweight: QuantizedWeight) -> None:
        self.register_buffer("packed", qweight.packed)
        self.register_buffer("scales", qweight.scales)
        self.register_buffer("zeros", qweight.zeros)  # None: not in the state dict
        self._meta = {k: v for k, v in qweight.state_dict().items()
                      if k not in ("packed", "scales", "zeros")}
        self._cached = None

    @property
    def qweight(self) -> QuantizedWeight:
        """The quantized weight, made of the module's current buffers (kept between calls
        while the buffers and the metadata stay the same objects)."""
        key = (self.packed, self.scales, self.zeros)
        cached = self._cached
        if cached is not None and all(a is b for a, b in zip(cached[0], key)):
            return cached[1]
        meta = {k: v for k, v in self._meta.items() if k != "format"}
        qweight = QuantizedWeight(packed=self.packed, scales=self.scales, zeros=self.zeros,
                                  **meta)
        self._cached = (key, qweight)
        return qweight

    @property
    def in_features(self) -> int:
        return self._meta["shape"][1]

    @property
    def out_features(self) -> int:
        return self._meta["shape"][0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return matmul(x, self.qweight, self.bias)

    def extra_repr(self) -> str:
        m = self._meta
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, dtype={m['dtype']}, group_size={m['group_size']}"
                f", scheme={m['scheme']}, scale_dtype={str(self.scales.dtype)[6:]}")

    def get_extra_state(self) -> dict[str, Any]:
        return dict(self._meta)

    def set_extra_state(self, state: dict[str, Any]) -> None:
        # (from_state_dict checks the format tag: an earlier packed layout is refused, not read
        # as this one) and the loaded buffers against the metadata
        qweight = QuantizedWeight.from_state_dict(
            {**state, "packed": self.packed, "scales": self.scales, "zeros": self.zeros})
        self._meta = {k: v for k, v in qweight.state_dict().items()
                      if k not in ("packed", "scales", "zeros")}
        self._cached = None

    def _apply(self, fn: Any, recurse: bool = True) -> QuantLinear:
        """Module casts keep the scales' dtype: they see the scales as int16 bits (a move of
        device still moves them)."""
        kept, self._cached = {}, None
        for name in _QUANT_BUFFERS:
            buf = self._buffers.get(name)
            if buf is not None:
                kept[name] = buf.dtype
                self._buffers[name] = buf.view(torch.int16)
        try:
            super()._apply(fn, recurse)
        finally:
            for name, dt in kept.items():
                self._buffers[name] = self._buffers[name].view(dt)
        return self


@entry_point
def quantize_model(module: nn.Module, dtype: Any = "uint4", group_size: int | None = 128,
                   scheme: str | None = None, skip: Iterable[str] = (),
                   scale_dtype: Any = "float16") -> nn.Module:
    """Replace, in place, every nn.Linear of `module` whose qualified name matches no entry of
    `skip` (names or fnmatch patterns, e.g. "lm_head" or "*.attn.*") by a QuantLinear; return
    `module` (or the QuantLinear, when `module` is itself an nn.Linear). A Linear the kernel
    cannot take (in or out features not a multiple of 64, or K not a multiple of group_size)
    stays as it is, and one UserWarning lists them all."""
    func = "nn.quantize_model"
    dt = weight_dtype(func, dtype)  # refuse bad arguments once, before touching the model
    resolve_scheme(func, scheme, dt)
    scale_dtype_name(func, scale_dtype)
    skip = (skip,) if isinstance(skip, str) else tuple(skip)
    left: list[str] = []
    replaced: dict[str, QuantLinear] = {}
    for name, child in module.named_modules():
        if not isinstance(child, nn.Linear) or any(fnmatch.fnmatchcase(name, p) for p in skip):
            continue
        reason = _unfit(child, group_size)
        if reason:
            left.append(f"{name or '<root>'} {reason}")
            continue
        replaced[name] = QuantLinear.from_linear(child, dt, group_size, scheme, scale_dtype)
    if left:
        warn_at(f"tilecraft.nn.quantize_model left {len(left)} Linear layer(s) unquantized, "
                f"the kernel cannot take their shapes: {'; '.join(left)}", user_span(),
                UserWarning)
    if "" in replaced:
        return replaced[""]
    for name, layer in replaced.items():
        parent_name, _, attr = name.rpartition(".")
        setattr(module.get_submodule(parent_name), attr, layer)
    return module


def _unfit(linear: nn.Linear, group_size: int | None) -> str:
    """Why the kernel cannot take this layer ('' when it can)."""
    N, K = linear.out_features, linear.in_features
    if N % 64 or K % 64 or not N or not K:
        return f"({K} -> {N}: in and out features must be multiples of 64)"
    if group_size is not None and (group_size % 64 or K % group_size or group_size <= 0):
        return f"({K} -> {N}: in features not a multiple of group_size {group_size})"
    return ""
