"""The tile language: `import tilecraft.language as T`.

Everything a kernel uses: kernel & parameters (prim_func, Tensor, Kernel, dynamic), allocation
(alloc_shared/fragment/local/var), tile ops (copy, gemm, reduce_*, cumsum, fill, clear,
atomic_*), loops (Parallel, Pipelined, serial, unroll, vectorized), scheduling (use_swizzle,
annotate_layout), math, and debugging (print, device_assert); and the Tilus level (tilus.py:
allocate_register, load_global, dot, store_global, ... on register tensors with layouts).

Names are imported on first use (`T.gemm` loads `tilecraft.language.tileops`, and with it the
IR), so importing the language costs nothing when a kernel comes from the jit cache. Every
function is handed out wrapped by `surface.strict`: it takes exactly the arguments it honours,
and anything else is a located diagnostic (TC111-TC113) naming the closest valid keyword.
"""

from __future__ import annotations

import importlib
import sys
import types

#: submodule -> the names it gives the language
_EXPORTS: dict[str, list[str]] = {
    "alloc": ["alloc_fragment", "alloc_global", "alloc_local", "alloc_shared", "alloc_var"],
    "cluster": ["cluster_rank", "cluster_size", "cluster_sync", "remote"],
    "kernel": [
        "Buffer",
        "DTypeHandle",
        "Kernel",
        "Tensor",
        "dynamic",
        "get_block_binding",
        "get_thread_binding",
        "prim_func",
        "symbolic",
    ],
    "loops": ["Parallel", "Pipelined", "serial", "unroll", "vectorized"],
    "math": [
        "Cast",
        "abs",
        "ceil",
        "ceildiv",
        "clamp",
        "cast",
        "cos",
        "erf",
        "exp",
        "exp2",
        "floor",
        "floordiv",
        "floormod",
        "fma",
        "if_then_else",
        "infinity",
        "log",
        "log2",
        "log10",
        "max",
        "max_value",
        "min",
        "min_value",
        "pow",
        "round",
        "rsqrt",
        "sigmoid",
        "sin",
        "sqrt",
        "tan",
        "tanh",
        "trunc",
    ],
    "schedule": [
        "annotate_layout",
        "call_extern",
        "device_assert",
        "import_source",
        "print",
        "use_swizzle",
    ],
    "tileops": [
        "atomic_add",
        "atomic_max",
        "atomic_min",
        "clear",
        "copy",
        "cumsum",
        "fill",
        "gemm",
        "reduce",
        "reduce_abssum",
        "reduce_absmax",
        "reduce_max",
        "reduce_min",
        "reduce_sum",
    ],
    # the Tilus level (block instructions with explicit layouts; tilus.py)
    "tilus": ["add", "allocate_register", "amax", "amin", "sum", "allocate_shared", "cast_bytes",
              "cast_planes", "copy_async",
              "copy_async_commit_group", "copy_async_wait_group", "div", "dot", "exit",
              "load_global", "load_shared", "mod", "mul", "neg", "store_global", "store_shared",
              "sub", "synchronize", "view", "view_global"],
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

#: dtype handles: T.float16, ... (and the aliases boolean, half, float, double)
_DTYPES: dict[str, str] = {
    **{
        n: n
        for n in [
            "float16",
            "float32",
            "float64",
            "bfloat16",
            "float8_e4m3",
            "float8_e5m2",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
        ]
    },
    "boolean": "bool",
    "half": "float16",
    "float": "float32",
    "double": "float64",
}

__all__ = [*_HOME, *_DTYPES, "GemmWarpPolicy", "layout"]  # noqa: PLE0604 (all str)


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        if isinstance(value, types.FunctionType):
            from .surface import strict

            value = strict(value, f"T.{name}")
    elif name in _DTYPES:
        from .kernel import _handle

        value = _handle(_DTYPES[name])
    elif name == "GemmWarpPolicy":
        from tilecraft.ir import GemmWarpPolicy as value
    elif name == "layout":  # T.layout.make_swizzled_layout(buf)
        import tilecraft.layout as value
    else:
        raise AttributeError(f"module 'tilecraft.language' has no attribute {name!r}",
                             name=name, obj=sys.modules[__name__])  # Python adds "Did you mean"
    globals()[name] = value  # later uses are plain attribute reads
    return value


def __dir__() -> list[str]:
    return __all__
