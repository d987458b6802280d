"""RuntimeKernel: a compiled kernel plus what it takes to check arguments and launch it.

This is the object a code generator hands to the jit layer:

```
kernel = RuntimeKernel.from_source(source, "matmul_kernel", params, launch, arch="sm_90a")
kernel(a, b, c)                    # checks the tensors, binds dynamic dims, launches
kernel.resources.registers        # from ptxas (see resources.py)
```

Nothing touches the GPU until the first call; compiling and argument checking work on a machine
without one (a launch there raises CudaUnavailableError).

A first call with arguments of a new signature does, in Python: one pass of the kernel's
`ArgChecker` (args.py), the grid (precomputed when it does not depend on dynamic dims) checked
against CUDA's limits (limits.py: an empty grid launches nothing, a negative or oversized one is
TC309), torch's current stream by one direct call, and `Launcher.launch` (launch.py), which writes
the values into a prebuilt parameter block. The block is checked once, when the kernel is made
(TC310). Later calls with that signature (per tensor: dtype, shape, strides, device) take the fast
path (fast_call.py): data pointers, scalars, outputs and one cuLaunchKernel, about 2-3 us of
Python, or under 1 us through the compiled launcher (native_launch.py) where a C compiler built
it; anything they do not know goes back to the checker, so errors are the checker's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .args import ArgChecker, BoundArgs
from .driver import require_gpu
from .fast_call import MISS, FastCall
from .launch import Launcher, current_stream
from .limits import check_block, check_grid
from .module import LoadedKernel
from .nvrtc import CompiledCubin, compile_cuda
from .params import LaunchSpec, Param, TensorMapParam, TensorParam
from .resources import Resources


class RuntimeKernel:
    """A cubin's entry function with its parameter list and launch configuration.

    `checker` decides what a caller passes (default: every parameter but the dim-bound scalars);
    the jit layer's checker also allocates and returns outputs and points errors at the source.
    """

    def __init__(
        self,
        compiled: CompiledCubin,
        params: Sequence[Param],
        launch: LaunchSpec,
        source: str = "",
        *,
        checker: ArgChecker | None = None,
    ):
        self.compiled = compiled
        self.params: tuple[Param, ...] = tuple(params)
        self.launch_spec = launch
        self.source = source
        self.checker = checker or ArgChecker(self.params, kernel=compiled.name)
        if self.checker.params != self.params:
            raise ValueError(f"the checker given to `{compiled.name}` has other parameters")
        check_block(launch.block_dims(), kernel=self.checker.kernel, span=self.checker.span)
        self.loaded = LoadedKernel(compiled.cubin, compiled.name, compiled.arch)
        kinds = ["pointer" if isinstance(p, TensorParam) else
                 "tensormap" if isinstance(p, TensorMapParam) else p.kind for p in self.params]
        self._launcher = Launcher(self.loaded, kinds, launch.block_dims(), launch.cluster_dims())
        dynamic = any(callable(e) for e in launch.grid)
        self._static_grid = None if dynamic else tuple(launch.grid)
        self._cluster = launch.cluster_dims()
        self._fast: FastCall | None = None  # made at the first launch through ctypes

    @classmethod
    def from_source(
        cls,
        source: str,
        name: str,
        params: Sequence[Param],
        launch: LaunchSpec,
        *,
        arch: str,
        options: Sequence[str] = (),
        fast_math: bool = False,
    ) -> RuntimeKernel:
        """Compile `source` (cached) for `arch` and wrap entry function `name`."""
        compiled = compile_cuda(source, arch, name=name, options=options, fast_math=fast_math)
        return cls(compiled, params, launch, source)

    @property
    def name(self) -> str:
        return self.compiled.name

    @property
    def arch(self) -> str:
        return self.compiled.arch

    @property
    def resources(self) -> Resources:
        """Registers, spills, stack and static shared memory of the entry function."""
        return self.compiled.resources

    @property
    def tensor_params(self) -> tuple[TensorParam, ...]:
        return tuple(p for p in self.params if isinstance(p, TensorParam))

    @property
    def caller_params(self) -> tuple[Param, ...]:
        """The parameters a caller passes (dim-bound scalars and outputs are filled in)."""
        return self.checker.caller_params

    def get_kernel_source(self) -> str:
        return self.source

    def bind(self, *args: object, require_cuda: bool = True) -> BoundArgs:
        """Check `args` without launching; returns the values and the bound dynamic dims."""
        return self.checker.bind(args, require_cuda=require_cuda)

    def __call__(self, *args: object, stream: object = None) -> Any:
        """Check the arguments, then launch on `stream` (default: torch's current stream).

        Returns the outputs the checker allocated: None when there are none, the tensor when
        there is one, else a tuple."""
        fast = self._fast
        if fast is not None and (stream is None or _is_stream(stream)):
            out = fast.call(args, None if stream is None else _stream_handle(stream))
            if out is not MISS:
                return out
        return self.launch(*args, stream=stream)

    @property
    def fast_call(self) -> Callable[[Sequence[object], int | None], Any] | None:
        """`fast_call(args, stream)`: `self(*args)` when the arguments' signature was accepted
        before, else NotImplemented (fast_call.py); None before the first ctypes launch."""
        return None if self._fast is None else self._fast.call

    def launch(
        self,
        *args: object,
        grid: tuple[int, ...] | None = None,
        smem: int | None = None,
        stream: object = None,
    ) -> Any:
        """Launch with optional overrides of the grid and dynamic shared memory of the spec."""
        bound = self.checker.bind(args)
        values, dims, device, outputs = bound
        grid_given = grid
        if grid is None:
            grid = self._static_grid or tuple(e(dims) if callable(e) else e
                                              for e in self.launch_spec.grid)
        checker = self.checker
        g = check_grid(grid, kernel=checker.kernel, span=checker.span, dims=dims,
                       cluster=self._cluster)
        if g is not None:  # None: an empty grid, nothing to launch
            if device is None:  # no tensor arguments
                require_gpu(self.arch)
                device = _torch_device()
            dyn = self.launch_spec.smem if smem is None else smem
            handle = _current_stream(device) if stream is None else _stream_handle(stream)
            self._launcher.launch(values, g, dyn, device, handle)
        if grid_given is None and smem is None:
            self._remember(args, bound, g)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _remember(self, args: Sequence[object], bound: BoundArgs, grid: Any) -> None:
        """After a checked launch: let later calls with these arguments' signature take the
        fast path (only where the launch goes through ctypes: launch.py's DirectLaunch)."""
        if self._fast is None:
            if not self._launcher.uses_ctypes():
                return
            self._fast = FastCall(self.checker, self._launcher, self.launch_spec.smem)
        self._fast.remember(args, bound, grid)


def _current_stream(device: int) -> int:
    """Raw handle of torch's current stream on `device` (launch.current_stream)."""
    return current_stream(device)


def _torch_device() -> int:
    import torch

    return torch.cuda.current_device()


def _is_stream(stream: object) -> bool:
    return isinstance(stream, int) or getattr(stream, "cuda_stream", None) is not None


def _stream_handle(stream: object) -> int:
    """Raw CUstream handle of a torch.cuda.Stream or an int handle."""
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError(f"stream must be a torch.cuda.Stream or an int handle, got {stream!r}")
    return int(handle)
