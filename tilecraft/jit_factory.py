"""`@tilecraft.jit` on a factory: JITFactory, which prepares one JITKernel per argument set.

    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, ...):   # returns a T.prim_func
        ...
    kernel = matmul(1024, 1024, 1024)        # the factory runs once per argument set

In memory, kernels are kept per argument set; on disk, the jit cache keeps the CUDA kernel of each
call (jit_cache.py), so a new process skips the front end, passes and code generation. The
shape-polymorphic jit (jit_poly.py) is a JITFactory keyed by the call's shapes and dtypes.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from tilecraft import jit_cache
from tilecraft.diagnostics import TilecraftError
from tilecraft.diagnostics.errors import entry_point
from tilecraft.jit import JITKernel, _interpret_forced
from tilecraft.jit_options import call_span
from tilecraft.options import switches_from_env


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

    @entry_point
    def __call__(self, *args, **kwargs) -> JITKernel:
        try:
            key = (args, tuple(sorted(kwargs.items())), switches_from_env())
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
                return JITKernel.from_cache(
                    cached,
                    lambda: self._build(args, kwargs).func,
                    debug_nans=self.options.get("debug_nans", False),
                    debug_root_path=self.options.get("debug_root_path"),
                )
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
        raise TilecraftError(
            "TC108", span=call_span(), detail=f"the factory `{self.factory.__name__}` returned a "
            f"{type(result).__name__}", hint="a factory decorated with @tilecraft.jit returns its "
            "T.prim_func")
