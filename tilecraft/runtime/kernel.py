"""RuntimeKernel: a compiled kernel plus what it takes to check arguments and launch it.

This is the object a code generator hands to the jit layer:

```
kernel = RuntimeKernel.from_source(source, "matmul_kernel", params, launch, arch="sm_90a")
kernel(a, b, c)                    # checks the tensors, binds dynamic dims, launches
kernel.resources.registers        # from ptxas (see resources.py)
```

Nothing touches the GPU until the first call; compiling and argument checking work on a machine
without one (a launch there raises CudaUnavailableError).
"""

from __future__ import annotations

from collections.abc import Sequence

from .args import BoundArgs, check_args
from .driver import require_gpu
from .launch import Launcher
from .module import LoadedKernel
from .nvrtc import CompiledCubin, compile_cuda
from .params import LaunchSpec, Param, ScalarParam, TensorParam
from .resources import Resources


class RuntimeKernel:
    """A cubin's entry function with its parameter list and launch configuration."""

    def __init__(
        self, compiled: CompiledCubin, params: Sequence[Param], launch: LaunchSpec, source: str = ""
    ):
        self.compiled = compiled
        self.params: tuple[Param, ...] = tuple(params)
        self.launch_spec = launch
        self.source = source
        self.loaded = LoadedKernel(compiled.cubin, compiled.name, compiled.arch)
        kinds = ["pointer" if isinstance(p, TensorParam) else p.kind for p in self.params]
        self._launcher = Launcher(self.loaded, kinds, launch.block_dims(), launch.cluster_dims())

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
        """The parameters a caller passes (dim-bound scalars are filled in by the runtime)."""
        return tuple(p for p in self.params if not (isinstance(p, ScalarParam) and p.dim))

    def get_kernel_source(self) -> str:
        return self.source

    def bind(self, *args: object, require_cuda: bool = True) -> BoundArgs:
        """Check `args` without launching; returns the values and the bound dynamic dims."""
        return check_args(self.params, args, kernel=self.name, require_cuda=require_cuda)

    def __call__(self, *args: object, stream: object = None) -> None:
        """Check the arguments, then launch on `stream` (default: torch's current stream)."""
        self.launch(*args, stream=stream)

    def launch(
        self,
        *args: object,
        grid: tuple[int, ...] | None = None,
        smem: int | None = None,
        stream: object = None,
    ) -> None:
        """Launch with optional overrides of the grid and dynamic shared memory of the spec."""
        bound = self.bind(*args)
        require_gpu(self.arch)
        device = bound.device if bound.device is not None else _torch_device()
        g = self.launch_spec.grid_dims(bound.dims) if grid is None else _pad3(grid)
        dyn = self.launch_spec.smem if smem is None else smem
        self._launcher.launch(bound.values, g, dyn, device, _stream_handle(stream, device))


def _pad3(v: Sequence[int]) -> tuple[int, int, int]:
    t = tuple(int(x) for x in v)
    return t + (1,) * (3 - len(t))  # type: ignore[return-value]


def _torch_device() -> int:
    import torch

    return torch.cuda.current_device()


def _stream_handle(stream: object, device: int) -> int:
    """Raw CUstream handle: a torch.cuda.Stream, an int handle, or None (torch's current stream)."""
    if stream is None:
        import torch

        return torch.cuda.current_stream(device).cuda_stream
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError(f"stream must be a torch.cuda.Stream or an int handle, got {stream!r}")
    return int(handle)
