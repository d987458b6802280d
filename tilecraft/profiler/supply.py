"""What a profiler feeds a kernel: the inputs it needs (from its signature) and how to fill them.

`input_specs(kernel)` reads either a JITKernel's parameters (the Tile IR: tensor buffers and
scalars; the parameters in `out_idx` are left out, the kernel allocates them) or, for a runtime
kernel, its `params` (TensorParam/ScalarParam; scalars bound to a dynamic dim are left out).

`TensorSupplyType` has TileLang's names. Floating tensors: Normal and Randn draw N(0, 1),
Uniform and Auto U(-1, 1), Integer whole numbers in [-2, 2], Zero and One constants. Integer
tensors get small random integers ([-8, 7], or [0, 15] when unsigned) under every random
supply; bool tensors random bits. (TileLang's Normal draws N(-1, 1); tilecraft's is centred.)
Sub-byte and custom-float tensors are made as their packed bytes (`_packed_tensor`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilecraft.diagnostics import Span


class TensorSupplyType(enum.Enum):
    """How the profiler fills a kernel's input tensors (TileLang's names and values)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


@dataclass(frozen=True)
class InputSpec:
    """One argument the caller passes: a tensor (`shape` of ints and dim names) or a scalar."""

    name: str
    dtype_name: str
    torch_dtype: Any  # torch.uint8 for a packed tensor (sub-byte, custom floats)
    shape: tuple[int | str, ...] | None  # None: a scalar
    span: Span | None = None
    is_float: bool = False  # scalars: a float (else an int)
    packed: bool = False  # passed as its packed bytes (docs/dtypes.md "Host side")

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d for d in self.shape or () if isinstance(d, str))


@dataclass(frozen=True)
class KernelInputs:
    """The inputs of a kernel, in call order, and what the profiler needs to know about it."""

    kernel_name: str
    specs: tuple[InputSpec, ...]
    n_outputs: int  # outputs the kernel allocates and returns (out_idx)
    output_names: tuple[str, ...]


def input_specs(kernel: Any) -> KernelInputs:
    """The arguments `kernel` is called with (see the module docstring)."""
    from tilecraft.jit import JITKernel

    if isinstance(kernel, JITKernel):
        return _jit_inputs(kernel)
    return _runtime_inputs(kernel)


def _jit_inputs(kernel: Any) -> KernelInputs:
    from tilecraft.ir import Buffer, Var

    func = kernel.func
    specs = []
    for i, p in enumerate(func.params):
        if i in kernel.out_idx:
            continue
        if isinstance(p, Buffer):
            shape = tuple(d if isinstance(d, int) else d.name if isinstance(d, Var) else str(d)
                          for d in p.shape)
            specs.append(_tensor_spec(p.name, p.dtype.name, shape, p.span))
        else:
            specs.append(InputSpec(p.name, p.dtype.name, None, None, p.span,
                                   is_float=p.dtype.is_float))
    outs = tuple(func.params[i].name for i in kernel.out_idx)
    return KernelInputs(func.name, tuple(specs), len(outs), outs)


def _runtime_inputs(kernel: Any) -> KernelInputs:
    from tilecraft.runtime.params import ScalarParam, TensorParam

    specs = []
    for p in kernel.params:
        if isinstance(p, TensorParam):
            specs.append(_tensor_spec(p.name, p.dtype, tuple(p.shape)))
        elif isinstance(p, ScalarParam) and p.dim is None:
            specs.append(InputSpec(p.name, p.kind, None, None, is_float=p.kind.startswith("float")))
    name = getattr(kernel, "name", None) or type(kernel).__name__
    return KernelInputs(name, tuple(specs), 0, ())


def _tensor_spec(name: str, dtype: str, shape: tuple[int | str, ...],
                 span: Span | None = None) -> InputSpec:
    from tilecraft.runtime.params import packed_dtype, storage_dtype

    return InputSpec(name, dtype, storage_dtype(dtype), shape, span,
                     packed=packed_dtype(dtype) is not None)


def make_tensor(
    spec: InputSpec, supply: TensorSupplyType, sizes: Mapping[str, int], device: Any
) -> Any:
    """A tensor for `spec` filled as `supply` says; dim names take their values from `sizes`."""
    import torch

    shape = tuple(d if isinstance(d, int) else int(sizes[d]) for d in spec.shape or ())
    if spec.packed:
        return _packed_tensor(spec.dtype_name, supply, shape, device)
    dtype = spec.torch_dtype
    if supply is TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=dtype, device=device)
    if supply is TensorSupplyType.One:
        return torch.ones(shape, dtype=dtype, device=device)
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.5
    if not dtype.is_floating_point:
        lo = 0 if spec.dtype_name.startswith("uint") else -8
        return torch.randint(lo, lo + 16, shape, device=device).to(dtype)
    if supply is TensorSupplyType.Integer:
        return torch.randint(-2, 3, shape, device=device).to(dtype)
    if supply in (TensorSupplyType.Uniform, TensorSupplyType.Auto):
        return torch.empty(shape, device=device).uniform_(-1.0, 1.0).to(dtype)
    return torch.randn(shape, device=device).to(dtype)


def _packed_tensor(dtype: str, supply: TensorSupplyType, shape: tuple[int, ...],
                   device: Any) -> Any:
    """The packed bytes of a `dtype` tensor of `shape` filled as `supply` says: ints get random
    codes (every value of the type), custom floats the values of a float tensor (N(0, 1),
    U(-1, 1), whole numbers in [-2, 2]) quantized to the nearest code; Zero and One the codes
    of 0 and 1 (saturated where 1 is out of range)."""
    import torch

    from tilecraft import dtypes, lowbit

    dt = dtypes.resolve(dtype)
    count = 1
    for d in shape:
        count *= d
    if supply is TensorSupplyType.Zero:
        values = torch.zeros(count, device=device)
    elif supply is TensorSupplyType.One:
        values = torch.ones(count, device=device)
    elif not dt.is_float:
        codes = torch.randint(0, 1 << dt.bits, (count,), device=device, dtype=torch.uint8)
        return lowbit.pack(codes, dt)
    elif supply is TensorSupplyType.Integer:
        values = torch.randint(-2, 3, (count,), device=device).float()
    elif supply in (TensorSupplyType.Uniform, TensorSupplyType.Auto):
        values = torch.empty(count, device=device).uniform_(-1.0, 1.0)
    else:
        values = torch.randn(count, device=device)
    return lowbit.pack(lowbit.quantize_to(values, dt), dt)
