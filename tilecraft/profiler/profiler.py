"""Profiler: times a kernel on inputs it makes from the kernel's parameter list.

`get_profiler(kernel)` works for any object with `params` (TensorParam/ScalarParam, see
tilecraft.runtime.params) that is callable with the caller-passed arguments, such as a
`RuntimeKernel`. Inputs: floating tensors are standard normal, integer tensors small random
integers (-8..7, or 0..15 when unsigned), bool tensors random; dynamic dims take the values given
in `dims`; caller-passed scalars take `scalars[name]`, else 1 (ints) or 1.0 (floats).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..runtime.params import ScalarParam, TensorParam, torch_dtype
from .bench import do_bench


def random_tensor(p: TensorParam, dims: Mapping[str, int], device: Any) -> Any:
    """A tensor for parameter `p` with its dynamic dims taken from `dims`."""
    import torch

    def size(d: int | str) -> int:
        if isinstance(d, int):
            return d
        if d not in dims:
            raise ValueError(
                f"profiling needs a value for dynamic dim `{d}`: pass dims={{'{d}': ...}}"
            )
        return int(dims[d])

    shape = tuple(size(d) for d in p.shape)
    dtype = torch_dtype(p.dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.5
    lo = 0 if p.dtype.startswith("uint") else -8
    return torch.randint(lo, lo + 16, shape, device=device, dtype=dtype)


class Profiler:
    """Makes inputs for a kernel and times it with do_bench."""

    def __init__(
        self,
        kernel: Callable[..., Any],
        dims: Mapping[str, int] | None = None,
        scalars: Mapping[str, int | float] | None = None,
        device: Any = None,
    ):
        self.kernel = kernel
        self.dims = dict(dims or {})
        self.scalars = dict(scalars or {})
        self.device = device

    def _device(self) -> Any:
        import torch

        if self.device is not None:
            return self.device
        return "cuda" if torch.cuda.is_available() else "cpu"

    def make_inputs(self) -> list[Any]:
        """Fresh arguments for one call, in the order the kernel takes them."""
        args: list[Any] = []
        for p in self.kernel.params:  # type: ignore[attr-defined]
            if isinstance(p, TensorParam):
                args.append(random_tensor(p, self.dims, self._device()))
            elif isinstance(p, ScalarParam) and p.dim is None:
                args.append(self.scalars.get(p.name, 1.0 if p.kind.startswith("float") else 1))
        return args

    def do_bench(
        self,
        func: Callable[..., Any] | None = None,
        warmup: float = 25,
        rep: float = 100,
        flush_l2: bool = True,
        return_mode: str = "median",
        input_tensors: list[Any] | None = None,
    ) -> float | list[float]:
        """Milliseconds per call of `func` (default: the kernel) on generated or given inputs."""
        target = self.kernel if func is None else func
        args = self.make_inputs() if input_tensors is None else list(input_tensors)
        return do_bench(
            lambda: target(*args),
            warmup=warmup,
            rep=rep,
            flush_l2=flush_l2,
            return_mode=return_mode,
        )


def get_profiler(
    kernel: Callable[..., Any],
    dims: Mapping[str, int] | None = None,
    scalars: Mapping[str, int | float] | None = None,
) -> Profiler:
    """A Profiler for `kernel` (an object with `params`, callable with its arguments)."""
    return Profiler(kernel, dims=dims, scalars=scalars)
