"""The tile language: `import tilecraft.language as T`.

Everything a kernel uses: kernel & parameters (prim_func, Tensor, Kernel, dynamic), allocation
(alloc_shared/fragment/local/var), tile ops (copy, gemm, reduce_*, cumsum, fill, clear,
atomic_*), loops (Parallel, Pipelined, serial, unroll, vectorized), scheduling (use_swizzle,
annotate_layout), math, and debugging (print, device_assert).
"""

from tilecraft.ir import GemmWarpPolicy

from .alloc import alloc_fragment, alloc_global, alloc_local, alloc_shared, alloc_var
from .kernel import (Buffer, DTypeHandle, Kernel, Tensor, _handle, dynamic, get_block_binding,
                     get_thread_binding, prim_func, symbolic)
from .loops import Parallel, Pipelined, serial, unroll, vectorized
from .math import (Cast, abs, ceil, ceildiv, clamp, cast, cos, erf, exp, exp2, floor, floordiv,
                   floormod, fma, if_then_else, infinity, log, log2, log10, max, max_value, min,
                   min_value, pow, round, rsqrt, sigmoid, sin, sqrt, tan, tanh, trunc)
from .schedule import annotate_layout, call_extern, device_assert, import_source, print, use_swizzle
from .tileops import (atomic_add, atomic_max, atomic_min, clear, copy, cumsum, fill, gemm, reduce,
                      reduce_abssum, reduce_absmax, reduce_max, reduce_min, reduce_sum)

float16 = _handle("float16")
float32 = _handle("float32")
float64 = _handle("float64")
bfloat16 = _handle("bfloat16")
float8_e4m3 = _handle("float8_e4m3")
float8_e5m2 = _handle("float8_e5m2")
int8 = _handle("int8")
int16 = _handle("int16")
int32 = _handle("int32")
int64 = _handle("int64")
uint8 = _handle("uint8")
uint16 = _handle("uint16")
uint32 = _handle("uint32")
uint64 = _handle("uint64")
boolean = _handle("bool")
half = float16
float = float32  # noqa: A001
double = float64

__all__ = [n for n in dir() if not n.startswith("_")] + ["layout"]


def __getattr__(name: str):
    if name == "layout":  # T.layout.make_swizzled_layout(buf), imported on first use
        import tilecraft.layout

        return tilecraft.layout
    raise AttributeError(f"module 'tilecraft.language' has no attribute {name!r}")
