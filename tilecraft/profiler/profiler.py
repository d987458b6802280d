"""Profiler: makes a kernel's inputs from its signature, times it, checks it against a reference.

    profiler = kernel.get_profiler(tensor_supply_type=tilecraft.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda a, b: a @ b, atol=1e-2, rtol=1e-2)
    print(profiler.do_bench(), "ms")

Works for a JITKernel (its Tile IR parameters; outputs in `out_idx` are allocated by the kernel)
and for any object with `params` (TensorParam/ScalarParam, tilecraft.runtime.params) callable
with the caller-passed arguments, such as a `RuntimeKernel`. Tensors are made on the GPU when
there is one and the kernel may run there, else on the CPU (the interpreter); `device=` decides.
Dynamic dims (`T.dynamic("m")`) take their sizes from `dynamic_sizes={"m": 1024}` and scalar
parameters their values from `scalars={...}`: a missing one is TC315 when the profiler is made.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilecraft.diagnostics import TilecraftError
from tilecraft.diagnostics.errors import entry_point
from tilecraft.jit_options import call_span

from .bench import do_bench
from .compare import assert_close
from .supply import TensorSupplyType, input_specs, make_tensor


class ProfilerInputError(TilecraftError, ValueError):
    """TC315: the profiler cannot make a kernel's inputs (a dynamic dim without a size, ...)."""


class Profiler:
    """Makes inputs for a kernel, runs and times it on them, and compares it with a reference."""

    def __init__(
        self,
        kernel: Callable[..., Any],
        tensor_supply_type: TensorSupplyType = TensorSupplyType.Normal,
        dynamic_sizes: Mapping[str, int] | None = None,
        scalars: Mapping[str, int | float] | None = None,
        device: Any = None,
    ):
        self.kernel = kernel
        self.inputs = input_specs(kernel)
        self.supply_type = tensor_supply_type
        self.dynamic_sizes = dict(dynamic_sizes or {})
        self.scalars = dict(scalars or {})
        self.device = device
        self._check()

    # ---- checks (at construction, pointing at the user's get_profiler call) -------------
    def _refuse(self, detail: str, hint: str) -> None:
        raise ProfilerInputError("TC315", span=call_span(), kernel=self.inputs.kernel_name,
                             detail=detail, hint=hint)

    def _check(self) -> None:
        if not isinstance(self.supply_type, TensorSupplyType):
            names = ", ".join(f"TensorSupplyType.{t.name}" for t in TensorSupplyType)
            self._refuse(f"tensor_supply_type={self.supply_type!r}", f"use one of {names}")
        specs = self.inputs.specs
        dims = list(dict.fromkeys(d for s in specs for d in s.dims))
        self._check_names("dynamic_sizes", self.dynamic_sizes, dims)
        for d in dims:
            if d not in self.dynamic_sizes:
                users = ", ".join(f"`{s.name}`" for s in specs if d in s.dims)
                self._refuse(f"no size for dynamic dim `{d}` (used by {users})",
                             f"give it one: get_profiler(dynamic_sizes={{'{d}': 1024}})")
            value = self.dynamic_sizes[d]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self._refuse(f"dynamic_sizes['{d}'] = {value!r}", "a size is an int >= 0")
        names = [s.name for s in specs if s.shape is None]
        self._check_names("scalars", self.scalars, names)
        for s in specs:
            if s.shape is None and s.name not in self.scalars:
                self._refuse(f"no value for scalar parameter `{s.name}` ({s.dtype_name})",
                             f"give it one: get_profiler(scalars={{'{s.name}': ...}})")
            if s.shape is not None and s.torch_dtype is None:
                self._refuse(f"torch has no dtype for `{s.name}` ({s.dtype_name})",
                             "pass the inputs yourself: do_bench(input_tensors=[...])")

    def _check_names(self, what: str, given: Mapping[str, Any], known: Sequence[str]) -> None:
        for name in given:
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
                have = ", ".join(f"`{k}`" for k in known) or "none"
                self._refuse(f"{what} names `{name}`, which the kernel does not have",
                             (f"did you mean `{close[0]}`? " if close else "")
                             + f"the kernel's {what.replace('_', ' ')}: {have}")

    # ---- inputs -------------------------------------------------------------------------
    def _device(self) -> Any:
        import torch

        if self.device is not None:
            return self.device
        from tilecraft.jit import JITKernel, _interpret_forced

        if isinstance(self.kernel, JITKernel) and (
            self.kernel.target == "interp" or _interpret_forced()
        ):
            return "cpu"
        return "cuda" if torch.cuda.is_available() else "cpu"

    def make_inputs(self) -> list[Any]:
        """Fresh arguments for one call, in the order the kernel takes them (outputs in out_idx
        are not among them: the kernel allocates and returns those)."""
        args: list[Any] = []
        device = self._device()
        for s in self.inputs.specs:
            if s.shape is None:
                args.append(self.scalars[s.name])
            else:
                args.append(make_tensor(s, self.supply_type, self.dynamic_sizes, device))
        return args

    # ---- running ------------------------------------------------------------------------
    def run_once(self, func: Callable[..., Any] | None = None) -> Any:
        """Call `func` (default: the kernel) once on fresh inputs; return what it returns."""
        target = self.kernel if func is None else func
        return target(*self.make_inputs())

    def do_bench(
        self,
        func: Callable[..., Any] | None = None,
        warmup: float = 25,
        rep: float = 100,
        flush_l2: bool = True,
        return_mode: str = "median",
        input_tensors: Sequence[Any] | None = None,
        n_warmup: int = 0,
        n_repeat: int = 0,
    ) -> float | list[float]:
        """Milliseconds per call of `func` (default: the kernel) on inputs made once (or
        `input_tensors`): CUDA events on the GPU, wall clock on the CPU (see bench.py).
        `n_warmup`/`n_repeat` > 0 fix the iteration counts (TileLang's keywords)."""
        target = self.kernel if func is None else func
        args = self.make_inputs() if input_tensors is None else list(input_tensors)
        return do_bench(
            lambda: target(*args),
            warmup=warmup,
            rep=rep,
            flush_l2=flush_l2,
            return_mode=return_mode,
            n_warmup=n_warmup,
            n_repeat=n_repeat,
        )

    def assert_allclose(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Sequence[Any] | None = None,
        atol: float = 1e-2,
        rtol: float = 1e-2,
        max_mismatched_ratio: float = 0.0,
    ) -> None:
        """Run the kernel and `reference_program` on the same inputs and compare the outputs.

        With out_idx, the reference takes the inputs and returns the outputs (a tensor, or a
        tuple in out_idx order). Without, both write their arguments in place: the reference
        gets copies of the same inputs and every tensor argument is compared afterwards.
        Raises AssertionError naming the output, with the largest absolute/relative errors.
        """
        args = self.make_inputs() if input_tensors is None else list(input_tensors)
        ref_args = [_copy(a) for a in args]
        got = self.kernel(*args)
        want = reference_program(*ref_args)
        name = self.inputs.kernel_name
        if self.inputs.n_outputs == 0:
            if want is not None:
                raise AssertionError(
                    f"kernel `{name}` has no out_idx: it writes its arguments in place, so the "
                    "reference must too (and return None); or give the kernel out_idx")
            pairs = [(s.name, a, r) for s, a, r in zip(self.inputs.specs, args, ref_args)
                     if s.shape is not None]
        else:
            got_list = _as_list(got)
            want_list = _as_list(want)
            if len(want_list) != len(got_list):
                raise AssertionError(
                    f"kernel `{name}` returns {len(got_list)} output(s) "
                    f"({', '.join(self.inputs.output_names)}), the reference "
                    f"{len(want_list)}")
            pairs = list(zip(self.inputs.output_names, got_list, want_list))
        for out_name, g, w in pairs:
            assert_close(out_name, name, g, w, atol, rtol, max_mismatched_ratio)


def _copy(x: Any) -> Any:
    return x.clone() if hasattr(x, "clone") else x.copy() if hasattr(x, "copy") else x


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (tuple, list)) else [x]


@entry_point
def get_profiler(
    kernel: Callable[..., Any],
    tensor_supply_type: TensorSupplyType = TensorSupplyType.Normal,
    dynamic_sizes: Mapping[str, int] | None = None,
    scalars: Mapping[str, int | float] | None = None,
    device: Any = None,
) -> Profiler:
    """A Profiler for `kernel` (a JITKernel, or an object with `params` callable with its
    arguments)."""
    return Profiler(kernel, tensor_supply_type, dynamic_sizes, scalars, device)
