"""Checking call arguments against a kernel's parameter list, before anything is launched.

`ArgChecker(params)` plans the checks once per kernel (arg_plan.py: per tensor its torch dtype,
rank, static sizes, the dynamic dims it binds, its stride rule; per scalar its kind), and
`bind(args)` runs them on every call; it is the only argument checker, on the launch path and,
with `require_cuda=False`, on the CPU interpreter (tilecraft/args.py makes its parameter list
from the IR), so both backends refuse the same calls with the same errors. Checks run in this
order, so the error a user sees names the first real problem: argument count, then per tensor
its type and dtype, rank and shape (binding dynamic dims), strides, the alignment its vector
accesses need (TC308), then that no tensor the kernel writes overlaps another tensor argument in
memory (TC317: the GPU code takes different parameters for different memory), then scalars
(arg_values.py says what each kind takes), and last the device (all tensors on one CUDA
device). Everything but the device check works on CPU tensors, so mistakes are reported the
same way on a machine without a GPU. With `require_cuda=False` numpy arrays are taken too (the
interpreter runs on them).

A tensor of a packed dtype (sub-byte ints, custom floats; params.packed_dtype) is passed as its
bytes: a contiguous uint8 or int8 tensor (or numpy array) of any shape holding exactly
`TensorParam.nbytes(dims)` bytes (TC319 for another dtype, TC318 for another byte count); fp8
tensors may be passed so too. Byte counts are compared after every tensor has bound its dims,
since a packed tensor's dims come from the others (TC320 where none has one).

The jit layer also hands the checker the tensors it allocates (`outputs`: `out_idx`, sized from
the bound dims), the tensor parameters the kernel writes (`writes`, from the IR; None for
hand-written CUDA, whose aliasing is its author's to decide: no overlap check) and the user's
source spans (`spans` per parameter, `span` for the kernel), so errors point at the kernel's
definition. The fast path (fast_call.py) reads `plan`, `empty` and `output_device`:

    checker = ArgChecker(params, kernel="gemm", outputs=("C",), writes=("C",),
                         spans={"A": span_of_A})
    bound = checker.bind([a, b])   # BoundArgs(values, dims, device, outputs=(c,))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..diagnostics import Span
from .arg_plan import CallPlan, byte_range
from .arg_values import BadScalar, HostArray, is_host_array, scalar_value
from .errors import LaunchArgumentError
from .params import Param, ScalarParam, TensorParam


class BoundArgs(NamedTuple):
    """Checked arguments: one value per parameter (data pointers for tensors), the bound dynamic
    dims, the CUDA device index of the tensors (None when there are none or the device was not
    checked), and the output tensors the checker allocated."""

    values: tuple[int | float, ...]
    dims: dict[str, int]
    device: int | None
    outputs: tuple[Any, ...] = ()


def _fmt_shape(shape: Sequence[object]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


class ArgChecker:
    """The argument checks of one kernel, planned once; `bind(args)` runs them per call."""

    def __init__(
        self,
        params: Sequence[Param],
        *,
        kernel: str = "kernel",
        outputs: Sequence[str] = (),
        writes: Sequence[str] | None = None,
        spans: Mapping[str, Span] | None = None,
        span: Span | None = None,
    ):
        import torch

        #: where each parameter's value comes from (arg_plan.py); the fast path reads it too
        self.plan = plan = CallPlan.create(params, kernel=kernel, outputs=outputs, writes=writes)
        self.params = plan.params
        self.caller_params = plan.caller_params
        self.kernel = kernel
        self.spans = dict(spans or {})
        self.span = span
        #: the outputs' allocator (torch.empty; called as `empty(*shape, dtype=, device=)`)
        self.empty = torch.empty
        self._tensor_type = torch.Tensor
        self._devices: dict[int, Any] = {}
        self.outputs = tuple(o.param.name for o in plan.outputs)
        #: the tensor parameters the kernel writes, in parameter order
        self.writes = plan.writes
        self._first_use: dict[str, str] = {}
        for t in plan.tensors:
            for name in t.param.dynamic_dims:
                self._first_use.setdefault(name, t.param.name)
        self._out_hint = (
            f"; outputs {list(self.outputs)} are allocated and returned" if self.outputs else ""
        )

    # ---- the per-call path ---------------------------------------------------------------
    def bind(self, args: Sequence[object], *, require_cuda: bool = True) -> BoundArgs:
        """Check `args` (the caller-passed parameters, in order); allocate the outputs."""
        if len(args) != len(self.caller_params):
            raise self.error("TC301", None, expected=len(self.caller_params), got=len(args))
        values: list[Any] = [0] * len(self.params)
        dims: dict[str, int] = {}
        device = None
        mixed = False
        tensor_type = self._tensor_type
        plan = self.plan
        passed_bytes = []  # (check, byte count) of the tensors passed as their bytes
        for t in plan.tensors:
            x = args[t.arg]
            if not isinstance(x, tensor_type):
                if require_cuda or not is_host_array(x):
                    raise self.error(
                        "TC303",
                        t.param.name,
                        got=f"{type(x).__name__} (not a tensor)",
                        expected=t.param.dtype,
                        torch_dtype=f"torch.{t.param.dtype}",
                    )
                x = HostArray(x)
            nbytes = t.check(x, dims, self)
            if nbytes is not None:
                passed_bytes.append((t, nbytes))
            values[t.slot] = ptr = x.data_ptr()
            if t.align and ptr % t.align:
                raise self.error("TC308", t.param.name, align=t.align, rem=ptr % t.align)
            d = x.get_device() if x.is_cuda else -1
            if device is None:
                device = d
            elif d != device:
                mixed = True
        for t, nbytes in passed_bytes:  # now that every tensor has bound its dims
            self._check_byte_count(t.param, nbytes, dims)
        if plan.pairs:
            self._check_overlap(args, values)
        for slot, p, arg in plan.scalars:
            if arg is not None:
                values[slot] = self._scalar(p, args[arg])
            elif p.dim in dims:
                values[slot] = self._scalar(p, dims[p.dim])
            else:
                raise ValueError(
                    f"scalar `{p.name}` is bound to dim `{p.dim}`, which no tensor has"
                )
        if not require_cuda:
            device = None
        elif mixed or device == -1:
            self._raise_device_error(args)
        outputs = self._allocate(values, dims, device, args) if plan.outputs else ()
        if plan.maps and device is not None:
            self._encode_maps(values, dims)
        return BoundArgs(tuple(values), dims, device, outputs)

    def _check_byte_count(self, p: TensorParam, nbytes: int, dims: dict[str, int]) -> None:
        """TC320 where a dim of `p` (passed as bytes) is bound by no tensor; TC318 where the
        bytes are not exactly `p.nbytes(dims)`."""
        for d in p.shape:
            if type(d) is not int and d not in dims:
                raise self.error(
                    "TC320", p.name, dim=d,
                    detail=f"`{p.name}` is passed as {p.dtype} bytes, whose count does not say "
                    "its shape", hint=f"give `{d}` a value through another tensor argument that "
                    f"has it in its shape, or make it static")
        expected = p.nbytes(dims)
        if nbytes != expected:
            shape = _fmt_shape(tuple(d if type(d) is int else dims[d] for d in p.shape))
            count = math.prod(d if type(d) is int else dims[d] for d in p.shape)
            hint = ("one byte per element is not packed storage: pack the codes with "
                    f"`tilecraft.pack(codes, \"{p.dtype}\")`" if nbytes == count and p.packed
                    else f"pass exactly {expected} bytes (`tilecraft.pack(codes, "
                    f"\"{p.dtype}\")` makes them from the codes)")
            raise self.error("TC318", p.name, got=nbytes, dtype=p.dtype, shape=shape,
                             expected=expected, hint=hint)

    def packed_dtype_error(self, p: TensorParam, got: object) -> LaunchArgumentError:
        """TC319: a packed parameter `p` passed a tensor of dtype `got` (not bytes)."""
        got = str(got).replace("torch.", "")
        try:
            from tilecraft.dtypes import resolve

            is_float = resolve(got).is_float
        except (ValueError, TypeError):
            is_float = False
        make = (f"tilecraft.pack(tilecraft.quantize_to(x, \"{p.dtype}\"), \"{p.dtype}\")"
                if is_float else f"tilecraft.pack(codes, \"{p.dtype}\")")
        return self.error("TC319", p.name, got=got, dtype=p.dtype,
                          hint=f"make the bytes with `{make}`")

    def _check_overlap(self, args: Sequence[object], values: list[Any]) -> None:
        """TC317 for the first pair of tensors, one of them written, whose bytes intersect on
        one device."""
        ranges = []
        tensors = self.plan.tensors
        for t in tensors:
            x = args[t.arg]
            if not isinstance(x, self._tensor_type):
                x = HostArray(x)
            start, end = byte_range(x.shape, x.stride(), x.element_size())
            ptr = values[t.slot]
            ranges.append((ptr + start, ptr + end, x.get_device() if x.is_cuda else -1))
        for i, j in self.plan.pairs:
            (a0, a1, da), (b0, b1, db) = ranges[i], ranges[j]
            if a0 < b1 and b0 < a1 and da == db:
                first, second = tensors[i].param.name, tensors[j].param.name
                param = second if second in self.writes else first
                raise self.error("TC317", param, first=first, second=second)

    def _encode_maps(self, values: list[Any], dims: dict[str, int]) -> None:
        from .tensor_map import TensorMapError

        for slot, tensor_slot, tensor, encoder in self.plan.maps:
            shape = [d if isinstance(d, int) else dims[d] for d in tensor.shape]
            try:
                values[slot] = encoder(values[tensor_slot], shape)
            except TensorMapError as exc:
                raise self.error("TC307", tensor.name, detail=str(exc)) from None

    def _scalar(self, p: ScalarParam, x: object) -> int | float:
        try:
            return scalar_value(p.kind, x)
        except BadScalar as bad:
            raise self.error("TC303", p.name, got=bad.got, expected=p.kind,
                             torch_dtype=bad.fix) from None

    def _allocate(
        self, values: list[Any], dims: dict[str, int], device: int | None, args: Sequence[object]
    ) -> tuple[Any, ...]:
        where = self.output_device(device, args)
        outputs = []
        for o in self.plan.outputs:
            p = o.param
            for d in p.shape:
                if type(d) is not int and d not in dims:
                    raise self.error(
                        "TC108",
                        p.name,
                        detail=f"cannot size output `{p.name}`: "
                        f"dimension `{d}` is not set by any input",
                        hint="give the output a static shape or pass it in",
                    )
            out = self.empty(o.size(dims), dtype=o.dtype, device=where)
            values[o.slot] = out.data_ptr()
            outputs.append(out)
        return tuple(outputs)

    def output_device(self, device: int | None, args: Sequence[object]) -> Any:
        """Where outputs go: the inputs' CUDA device, else the first input tensor's device."""
        if device is not None:
            where = self._devices.get(device)
            if where is None:
                import torch

                where = self._devices[device] = torch.device("cuda", device)
            return where
        import torch

        if self.plan.tensors:
            first = args[self.plan.tensors[0].arg]
            return torch.device("cpu") if is_host_array(first) else first.device  # type: ignore

        return torch.device("cuda", torch.cuda.current_device())

    # ---- errors --------------------------------------------------------------------------
    def error(self, code: str, param: str | None, **fields: object) -> LaunchArgumentError:
        """A catalog error about `param` (None: the whole call), at the user's source if known."""
        span = self.spans.get(param, self.span) if param is not None else self.span
        if code == "TC301":
            fields.update(kernel=self.kernel, out_hint=self._out_hint)
        return LaunchArgumentError(code, span=span, param=param, **fields)

    def shape_error(self, p: TensorParam, shape: Sequence[int]) -> LaunchArgumentError:
        return self.error(
            "TC302",
            p.name,
            got=_fmt_shape(tuple(shape)),
            expected=_fmt_shape(p.shape),
            hint="names in the expected shape are dynamic dimensions",
        )

    def dim_error(self, dim: str, first: int, second: int, param: str) -> LaunchArgumentError:
        return self.error(
            "TC305",
            param,
            dim=dim,
            first=f"{first} (in `{self._first_use.get(dim, '?')}`)",
            second=second,
        )

    def _raise_device_error(self, args: Sequence[object]) -> None:
        """TC304 for the first tensor not on CUDA, or not on the first tensor's CUDA device."""
        device, first = None, ""
        for t in self.plan.tensors:
            dev = args[t.arg].device  # type: ignore[attr-defined]
            if dev.type != "cuda":
                raise self.error(
                    "TC304",
                    t.param.name,
                    got=str(dev),
                    expected="a CUDA device",
                    hint="move it with `.cuda()`, or run the kernel with the CPU interpreter",
                )
            if device is None:
                device, first = dev.index or 0, t.param.name
            elif (dev.index or 0) != device:
                raise self.error(
                    "TC304",
                    t.param.name,
                    got=str(dev),
                    expected=f"cuda:{device}",
                    hint=f"all tensors must be on one device, as `{first}` is",
                )


def check_args(
    params: Sequence[Param],
    args: Sequence[object],
    *,
    kernel: str = "kernel",
    require_cuda: bool = True,
) -> BoundArgs:
    """Check `args` (tensors and caller-passed scalars, in parameter order) against `params`.

    A one-off `ArgChecker(params, kernel=kernel).bind(args)`; kernels keep their checker.
    """
    return ArgChecker(params, kernel=kernel).bind(args, require_cuda=require_cuda)
