"""Checking call arguments against a kernel's parameter list, before anything is launched.

Checks run in this order, so the error a user sees names the first real problem: argument count,
then per tensor its type and dtype, rank and shape (binding dynamic dims), strides, then scalars,
and last the device (all tensors on one CUDA device). Everything but the device check works on CPU
tensors, so mistakes are reported the same way on a machine without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .errors import LaunchArgumentError
from .params import Param, ScalarParam, TensorParam, torch_dtype

_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


@dataclass(frozen=True)
class BoundArgs:
    """Checked arguments: one value per parameter (data pointers for tensors), the bound dynamic
    dims, and the CUDA device index of the tensors (None when there are none or they are on CPU)."""

    values: tuple[int | float, ...]
    dims: dict[str, int]
    device: int | None


def _fmt_shape(shape: Sequence[object]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


def _bind(
    dims: dict[str, int], first_in: dict[str, str], name: str, value: int, param: str
) -> None:
    if name not in dims:
        dims[name] = value
        first_in[name] = param
    elif dims[name] != value:
        raise LaunchArgumentError(
            "TC305",
            dim=name,
            first=f"{dims[name]} (in `{first_in[name]}`)",
            second=value,
            param=param,
        )


def _check_tensor(
    p: TensorParam, x: object, dims: dict[str, int], first_in: dict[str, str]
) -> None:
    import torch

    if not isinstance(x, torch.Tensor):
        raise LaunchArgumentError(
            "TC303",
            param=p.name,
            got=f"{type(x).__name__} (not a tensor)",
            expected=p.dtype,
            torch_dtype=f"torch.{p.dtype}",
        )
    want = torch_dtype(p.dtype)
    if x.dtype != want:
        raise LaunchArgumentError(
            "TC303",
            param=p.name,
            got=str(x.dtype).replace("torch.", ""),
            expected=p.dtype,
            torch_dtype=str(want),
        )
    if x.dim() != len(p.shape) or any(
        isinstance(d, int) and d != s for d, s in zip(p.shape, x.shape)
    ):
        raise LaunchArgumentError(
            "TC302",
            param=p.name,
            got=_fmt_shape(tuple(x.shape)),
            expected=_fmt_shape(p.shape),
            hint="names in the expected shape are dynamic dimensions",
        )
    for d, s in zip(p.shape, x.shape):
        if isinstance(d, str):
            _bind(dims, first_in, d, int(s), p.name)
    strides = x.stride()
    if p.strides is None:
        if not x.is_contiguous():
            raise LaunchArgumentError("TC306", param=p.name)
        return
    for want_s, got_s in zip(p.strides, strides):
        if isinstance(want_s, str):
            _bind(dims, first_in, want_s, int(got_s), p.name)
        elif want_s is not None and want_s != got_s:
            raise LaunchArgumentError("TC306", param=p.name)


def _check_scalar(p: ScalarParam, x: object) -> int | float:
    if p.kind.startswith("float"):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise LaunchArgumentError(
                "TC303",
                param=p.name,
                got=type(x).__name__,
                expected=p.kind,
                torch_dtype="float(...)",
            )
        return float(x)
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise LaunchArgumentError(
            "TC303", param=p.name, got=type(x).__name__, expected=p.kind, torch_dtype="int(...)"
        )
    v = int(x)  # type: ignore[call-overload]
    lo, hi = _INT_RANGES[p.kind]
    if not lo <= v <= hi:
        raise LaunchArgumentError(
            "TC303",
            param=p.name,
            got=f"{v} (out of range)",
            expected=p.kind,
            torch_dtype="a smaller value",
        )
    return v


def _check_device(tensors: list[tuple[str, object]]) -> int | None:
    device: int | None = None
    first = ""
    for name, x in tensors:
        dev = x.device  # type: ignore[attr-defined]
        if dev.type != "cuda":
            raise LaunchArgumentError(
                "TC304",
                param=name,
                got=str(dev),
                expected="a CUDA device",
                hint="move it with `.cuda()`, or run the kernel with the CPU interpreter",
            )
        if device is None:
            device, first = dev.index or 0, name
        elif (dev.index or 0) != device:
            raise LaunchArgumentError(
                "TC304",
                param=name,
                got=str(dev),
                expected=f"cuda:{device}",
                hint=f"all tensors must be on one device, as `{first}` is",
            )
    return device


def check_args(
    params: Sequence[Param],
    args: Sequence[object],
    *,
    kernel: str = "kernel",
    require_cuda: bool = True,
) -> BoundArgs:
    """Check `args` (tensors and caller-passed scalars, in parameter order) against `params`."""
    passed = [p for p in params if not (isinstance(p, ScalarParam) and p.dim is not None)]
    if len(args) != len(passed):
        raise LaunchArgumentError(
            "TC301", kernel=kernel, expected=len(passed), got=len(args), out_hint=""
        )
    given = dict(zip((p.name for p in passed), args))
    dims: dict[str, int] = {}
    first_in: dict[str, str] = {}
    tensors: list[tuple[str, object]] = []
    for p in params:
        if isinstance(p, TensorParam):
            _check_tensor(p, given[p.name], dims, first_in)
            tensors.append((p.name, given[p.name]))
    values: list[int | float] = []
    for p in params:
        if isinstance(p, TensorParam):
            values.append(given[p.name].data_ptr())  # type: ignore[attr-defined]
        elif p.dim is not None:
            if p.dim not in dims:
                raise ValueError(
                    f"scalar `{p.name}` is bound to dim `{p.dim}`, which no tensor has"
                )
            values.append(_check_scalar(p, dims[p.dim]))
        else:
            values.append(_check_scalar(p, given[p.name]))
    device = _check_device(tensors) if require_cuda else None
    return BoundArgs(tuple(values), dims, device)
