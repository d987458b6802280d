"""The user-facing entry points: `tilecraft.jit`, `tilecraft.compile` and JITKernel.

    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, ...):          # a factory returning a T.prim_func
        ...
    kernel = matmul(1024, 1024, 1024)  # prepared once per argument set, then cached
    c = kernel(a, b)                   # torch tensors: CUDA -> GPU, CPU -> interpreter

Targets: "auto" picks per call from where the tensors live; "interp" always runs the CPU
interpreter; "cuda" always the GPU. `TILECRAFT_INTERPRET=1` forces the interpreter.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from tilecraft.args import bind_arguments, is_torch
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Buffer, PrimFunc, Var

TARGETS = ("auto", "cuda", "interp")


def _interpret_forced() -> bool:
    return os.environ.get("TILECRAFT_INTERPRET", "") not in ("", "0", "false", "False")


class JITKernel:
    """A prepared kernel: call it with tensors; inspect its IR, CUDA source and resources."""

    def __init__(self, func: PrimFunc, out_idx=None, target: str = "auto", arch: str | None = None):
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        self.func = func
        self.target = target
        self.arch = arch
        n = len(func.params)
        if out_idx is None:
            out_idx = []
        elif isinstance(out_idx, int):
            out_idx = [out_idx]
        self.out_idx = sorted({i % n for i in out_idx})
        for i in self.out_idx:
            if not isinstance(func.params[i], Buffer):
                raise ValueError(f"out_idx {i} names scalar parameter `{func.params[i].name}`")
        self._cuda = None

    # ---- inspection --------------------------------------------------------------------
    @property
    def params(self):
        return self.func.params

    def script(self) -> str:
        """The kernel's Tile IR as readable script."""
        return self.func.script()

    def _cuda_kernel(self):
        if self._cuda is None:
            try:
                from tilecraft.codegen.cuda.build import build_cuda_kernel
            except ImportError:
                raise TilecraftError("TC502", span=self.func.span, detail="CUDA code generation",
                                     hint="run on the interpreter (CPU tensors or "
                                     "TILECRAFT_INTERPRET=1) until the CUDA backend lands") from None
            self._cuda = build_cuda_kernel(self.func, arch=self.arch)
        return self._cuda

    def get_kernel_source(self) -> str:
        """The generated CUDA C++."""
        return self._cuda_kernel().source

    @property
    def resources(self):
        """Registers, spills and shared memory from the compiler's report."""
        return self._cuda_kernel().resources

    def get_profiler(self, *args, **kwargs):
        from tilecraft.profiler import Profiler

        return Profiler(self, *args, **kwargs)

    # ---- calling -----------------------------------------------------------------------
    def _backend_for(self, tensors: list[Any]) -> str:
        if _interpret_forced() or self.target == "interp":
            return "interp"
        if self.target == "cuda":
            return "cuda"
        on_gpu = [t for t in tensors if is_torch(t) and t.device.type == "cuda"]
        return "cuda" if on_gpu else "interp"

    def __call__(self, *args):
        inputs = list(args)
        n_in = len(self.func.params) - len(self.out_idx)
        if self.out_idx and len(inputs) != n_in:
            raise TilecraftError("TC301", span=self.func.span, kernel=self.func.name,
                                 expected=n_in, got=len(inputs),
                                 out_hint=f"; outputs {self._out_names()} are allocated and returned")
        full = self._with_outputs(inputs) if self.out_idx else inputs
        bind_arguments(self.func, full)
        if self._backend_for(full) == "interp":
            from tilecraft import interp

            interp.run(self.func, full)
        else:
            self._cuda_kernel()(*full)
        if not self.out_idx:
            return None
        outs = [full[i] for i in self.out_idx]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _out_names(self) -> list[str]:
        return [self.func.params[i].name for i in self.out_idx]

    def _with_outputs(self, inputs: list[Any]) -> list[Any]:
        import torch

        in_params = [p for i, p in enumerate(self.func.params) if i not in self.out_idx]
        dims = {}
        for p, a in zip(in_params, inputs):
            if isinstance(p, Buffer) and hasattr(a, "shape") and len(a.shape) == p.ndim:
                for want, got in zip(p.shape, a.shape):
                    if isinstance(want, Var):
                        dims.setdefault(want, int(got))
        device = next((a.device for a in inputs if is_torch(a)), torch.device("cpu"))
        full, it = [], iter(inputs)
        for i, p in enumerate(self.func.params):
            if i not in self.out_idx:
                full.append(next(it))
                continue
            shape = []
            for d in p.shape:
                if isinstance(d, int):
                    shape.append(d)
                elif isinstance(d, Var) and d in dims:
                    shape.append(dims[d])
                else:
                    raise TilecraftError("TC108", span=p.span, detail=f"cannot size output "
                                         f"`{p.name}`: dimension `{d}` is not set by any input",
                                         hint="give the output a static shape or pass it in")
            full.append(torch.empty(shape, dtype=p.dtype.torch_dtype, device=device))
        return full


class JITFactory:
    """`@tilecraft.jit` on a factory: calling it builds (once per argument set) a JITKernel."""

    def __init__(self, factory, **options):
        self.factory = factory
        self.options = options
        self._cache: dict[Any, JITKernel] = {}
        functools.update_wrapper(self, factory)

    def __call__(self, *args, **kwargs) -> JITKernel:
        try:
            key = (args, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        result = self.factory(*args, **kwargs)
        if isinstance(result, JITKernel):
            kernel = result
        elif isinstance(result, PrimFunc):
            kernel = JITKernel(result, **self.options)
        else:
            raise TypeError(f"`{self.factory.__name__}` must return a T.prim_func, got "
                            f"{type(result).__name__}")
        if key is not None:
            self._cache[key] = kernel
        return kernel


def jit(func=None, *, out_idx=None, target: str = "auto", arch: str | None = None, **_ignored):
    """Decorate a kernel factory (or a `T.prim_func`) to get cached, callable kernels."""
    options = dict(out_idx=out_idx, target=target, arch=arch)
    if func is None:
        return lambda f: jit(f, **options)
    if isinstance(func, PrimFunc):
        return JITKernel(func, **options)
    return JITFactory(func, **options)


def compile(func: PrimFunc, out_idx=None, target: str = "auto", arch: str | None = None) -> JITKernel:  # noqa: A001
    """Prepare a `T.prim_func` for calling."""
    return JITKernel(func, out_idx=out_idx, target=target, arch=arch)
