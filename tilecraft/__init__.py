"""tilecraft: a tile-level GPU kernel language and compiler, with a CPU interpreter.

    import tilecraft
    import tilecraft.language as T

`import tilecraft` loads only what decorating a kernel and finding it in the jit cache take
(`jit`, `compile`, the diagnostics); the IR, the passes, the code generator and the profiler are
imported when first used (`tilecraft.TensorSupplyType` imports the profiler on first access,
`tilecraft.pack`/`unpack`/`quantize_to`/`dequantize` tilecraft/lowbit.py).
"""

__version__ = "0.1.0"

from typing import Any  # noqa: E402

from tilecraft.diagnostics import PerformanceWarning, TilecraftError  # noqa: E402
from tilecraft.jit import JITKernel, compile, jit  # noqa: E402

__all__ = ["JITKernel", "PerformanceWarning", "TensorSupplyType", "TilecraftError", "autotune",
           "compile", "dequantize", "jit", "pack", "quantize_to", "recommend", "unpack",
           "__version__"]

_LOWBIT = ("pack", "unpack", "quantize_to", "dequantize")  # tilecraft/lowbit.py


def __getattr__(name: str) -> Any:
    # the profiler (and the statistics module it imports) only when asked for
    if name == "TensorSupplyType":
        from tilecraft.profiler.supply import TensorSupplyType

        return TensorSupplyType
    if name in _LOWBIT:  # low-precision tensors on the host (docs/dtypes.md "Host side")
        from tilecraft import lowbit

        return getattr(lowbit, name)
    if name in ("recommend", "autotune"):  # tile recommendation and tuning (tilecraft/tune)
        from tilecraft import tune

        return getattr(tune, name)
    if name in ("quant", "nn", "tune"):  # tilecraft/quant, tilecraft/nn, tilecraft/tune
        import importlib

        return importlib.import_module(f"tilecraft.{name}")
    raise AttributeError(f"module 'tilecraft' has no attribute {name!r}")
