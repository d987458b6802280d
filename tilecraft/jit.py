"""The user-facing entry points: `tilecraft.jit`, `tilecraft.compile` and JITKernel.

    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, ...):          # a factory returning a T.prim_func
        ...
    kernel = matmul(1024, 1024, 1024)  # prepared once per argument set, then cached
    c = kernel(a, b)                   # torch tensors: CUDA -> GPU, CPU -> interpreter

Targets: "auto" picks per call from where the tensors live; "interp" always runs the CPU
interpreter; "cuda" always the GPU. `TILECRAFT_INTERPRET=1` forces the interpreter.

A call on CUDA tensors is one pass of the runtime's argument checker (which also allocates the
outputs; errors point at the kernel's parameters) and one launch. A factory call in a new process
finds its CUDA kernel in the jit cache (jit_cache.py) without running the front end; the IR is
then built only if something needs it (the interpreter, `.func`, `.script()`). This module imports
neither the IR nor the compiler until they are needed.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecraft import jit_cache
from tilecraft.diagnostics import TilecraftError, warn_at

if TYPE_CHECKING:
    from tilecraft.ir import PrimFunc
    from tilecraft.runtime import RuntimeKernel

TARGETS = ("auto", "cuda", "interp")


def _interpret_forced() -> bool:
    return os.environ.get("TILECRAFT_INTERPRET", "") not in ("", "0", "false", "False")


class JITKernel:
    """A prepared kernel: call it with tensors; inspect its IR, CUDA source and resources."""

    def __init__(self, func: PrimFunc, out_idx=None, target: str = "auto", arch: str | None = None):
        from tilecraft.ir import Buffer

        self._setup(target, arch)
        self._func = func
        n = len(func.params)
        if out_idx is None:
            out_idx = []
        elif isinstance(out_idx, int):
            out_idx = [out_idx]
        self.out_idx = sorted({i % n for i in out_idx})
        for i in self.out_idx:
            if not isinstance(func.params[i], Buffer):
                raise ValueError(f"out_idx {i} names scalar parameter `{func.params[i].name}`")

    @classmethod
    def from_cache(
        cls, cached: jit_cache.CachedKernel, make_func: Callable[[], PrimFunc]
    ) -> JITKernel:
        """A kernel rebuilt from a jit-cache entry; `make_func` makes its IR if it is needed."""
        kernel = cls.__new__(cls)
        kernel._setup(cached.target, cached.arch)
        kernel._make_func = make_func
        kernel._cached = cached
        kernel.out_idx = list(cached.out_idx)
        return kernel

    def _setup(self, target: str, arch: str | None) -> None:
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        self.target = target
        self.arch = arch
        self._func: PrimFunc | None = None
        self._make_func: Callable[[], PrimFunc] | None = None
        self._cached: jit_cache.CachedKernel | None = None  # not yet turned into a RuntimeKernel
        self._save_as: str | None = None  # the jit-cache key the CUDA build is saved under
        self._cuda: RuntimeKernel | None = None

    # ---- inspection --------------------------------------------------------------------
    @property
    def func(self) -> PrimFunc:
        """The kernel's Tile IR (made on first use when the kernel came from the jit cache)."""
        if self._func is None:
            self._func = self._make_func()  # type: ignore[misc]
        return self._func

    @property
    def params(self):
        return self.func.params

    def script(self) -> str:
        """The kernel's Tile IR as readable script."""
        return self.func.script()

    def _cuda_kernel(self) -> RuntimeKernel:
        if self._cuda is None:
            if self._cached is not None:
                self._cuda = self._cached.record.runtime_kernel()
            else:
                self._cuda = self._build_cuda()
            _warn_spills(self._cuda)
        return self._cuda

    def _build_cuda(self) -> RuntimeKernel:
        try:
            from tilecraft.codegen.cuda.build import build_cuda_kernel
        except ImportError:
            raise TilecraftError(
                "TC502",
                span=self.func.span,
                detail="CUDA code generation",
                hint="run on the interpreter (CPU tensors or "
                "TILECRAFT_INTERPRET=1) until the CUDA backend lands",
            ) from None
        from tilecraft.runtime import ArgChecker, RuntimeKernel

        func = self.func
        cuda = build_cuda_kernel(func, arch=self.arch)
        built = cuda.runtime
        checker = ArgChecker(
            built.params,
            kernel=func.name,
            outputs=self._out_names(),
            spans={p.name: p.span for p in func.params if p.span is not None},
            span=func.span,
        )
        kernel = RuntimeKernel(
            built.compiled, built.params, built.launch_spec, built.source, checker=checker
        )
        grid = _lowered_grid(cuda)
        if self._save_as is not None and grid is not None:
            entry = jit_cache.describe(
                kernel, grid, out_idx=self.out_idx, target=self.target, arch=self.arch
            )
            if entry is not None:
                jit_cache.save(self._save_as, entry)
        return kernel

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
    def __call__(self, *args):
        if self._on_interpreter(args):
            return self._interpret(list(args))
        return self._cuda_kernel()(*args)

    def _on_interpreter(self, args: tuple) -> bool:
        if self.target == "interp" or _interpret_forced():
            return True
        if self.target == "cuda":
            return False
        return not any(getattr(a, "is_cuda", False) for a in args)

    def _interpret(self, inputs: list[Any]):
        from tilecraft import interp

        func = self.func
        full = self._with_outputs(inputs) if self.out_idx else inputs
        interp.run(func, full)  # checks the arguments first
        if not self.out_idx:
            return None
        outs = [full[i] for i in self.out_idx]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _out_names(self) -> list[str]:
        return [self.func.params[i].name for i in self.out_idx]

    def _with_outputs(self, inputs: list[Any]) -> list[Any]:
        """`inputs` checked by the GPU path's argument checker (tilecraft/args.py), with the
        out_idx tensors it allocates put in their places."""
        from tilecraft.args import arg_checker

        bound = arg_checker(self.func, self._out_names()).bind(inputs, require_cuda=False)
        full = list(inputs)
        for i, out in zip(self.out_idx, bound.outputs):  # ascending: each lands at its index
            full.insert(i, out)
        return full


def _warn_spills(kernel: RuntimeKernel) -> None:
    """A PerformanceWarning at the kernel's line when ptxas spilled registers to local memory."""
    res = kernel.resources
    if not res.has_spills:
        return
    amount = (f"{res.spill_stores} bytes of spill stores, {res.spill_loads} bytes of spill loads"
              if res.spill_bytes is not None else f"{res.spill_instructions} spill instructions")
    warn_at(
        f"kernel `{kernel.name}` spills registers to local memory on {kernel.arch} ({amount}; "
        f"{res.registers} registers per thread) and will run slowly: give each thread fewer "
        "live values (more threads, a smaller tile, fewer pipeline stages)",
        kernel.checker.span,
    )


def _lowered_grid(cuda: Any) -> tuple | None:
    """The IR of the grid the code generator launched (None when the build does not say)."""
    state = getattr(getattr(cuda, "generated", None), "state", None)
    launch = getattr(state, "kernel", None)
    return None if launch is None else launch.grid


class JITFactory:
    """`@tilecraft.jit` on a factory: calling it prepares (once per argument set) a JITKernel.

    In memory, kernels are kept per argument set; on disk, the jit cache keeps the CUDA kernel of
    each call (see jit_cache.py), so a new process skips the front end, passes and code generation.
    """

    def __init__(self, factory, *, cache: bool = True, **options):
        self.factory = factory
        self.options = options
        self.cache = cache
        self._kernels: dict[Any, JITKernel] = {}
        functools.update_wrapper(self, factory)

    def __call__(self, *args, **kwargs) -> JITKernel:
        try:
            key = (args, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._kernels:
            return self._kernels[key]
        kernel = self._prepare(args, kwargs)
        if key is not None:
            self._kernels[key] = kernel
        if self._explicit_arch() and kernel.target != "interp" and not _interpret_forced():
            kernel._cuda_kernel()  # an explicit arch builds the cubin now, GPU or not
        return kernel

    def _explicit_arch(self) -> bool:
        return bool(self.options.get("arch") or os.environ.get("TILECRAFT_ARCH"))

    def _prepare(self, args: tuple, kwargs: dict) -> JITKernel:
        disk_key = None
        if self.cache and jit_cache.enabled():
            disk_key = jit_cache.call_key(self.factory, args, kwargs, self.options)
        if disk_key is not None:
            cached = jit_cache.load(disk_key)
            if cached is not None:
                return JITKernel.from_cache(cached, lambda: self._build(args, kwargs).func)
        kernel = self._build(args, kwargs)
        if kernel._cuda is None:
            kernel._save_as = disk_key
        return kernel

    def _build(self, args: tuple, kwargs: dict) -> JITKernel:
        from tilecraft.ir import PrimFunc

        result = self.factory(*args, **kwargs)
        if isinstance(result, JITKernel):
            return result
        if isinstance(result, PrimFunc):
            return JITKernel(result, **self.options)
        raise TypeError(
            f"`{self.factory.__name__}` must return a T.prim_func, got {type(result).__name__}"
        )


def jit(
    func=None,
    *,
    out_idx=None,
    target: str = "auto",
    arch: str | None = None,
    cache: bool = True,
    **_ignored,
):
    """Decorate a kernel factory (or a `T.prim_func`) to get cached, callable kernels.

    `cache=False` keeps the factory's kernels out of the disk jit cache (as does
    `TILECRAFT_JIT_CACHE=0` for every factory)."""
    options = {"out_idx": out_idx, "target": target, "arch": arch}
    if func is None:
        return lambda f: jit(f, cache=cache, **options)
    if not isinstance(func, types.FunctionType):
        from tilecraft.ir import PrimFunc

        if isinstance(func, PrimFunc):
            return JITKernel(func, **options)
    return JITFactory(func, cache=cache, **options)


def compile(
    func: PrimFunc, out_idx=None, target: str = "auto", arch: str | None = None
) -> JITKernel:
    """Prepare a `T.prim_func` for calling."""
    return JITKernel(func, out_idx=out_idx, target=target, arch=arch)
