"""tilecraft: a tile-level GPU kernel language and compiler, with a CPU interpreter.

    import tilecraft
    import tilecraft.language as T

`import tilecraft` loads only what decorating a kernel and finding it in the jit cache take
(`jit`, `compile`, the diagnostics); the IR, the passes, the code generator and the profiler are
imported when first used (`tilecraft.TensorSupplyType` imports the profiler on first access).
"""

__version__ = "0.1.0"

from typing import Any  # noqa: E402

from tilecraft.diagnostics import PerformanceWarning, TilecraftError  # noqa: E402
from tilecraft.jit import JITKernel, compile, jit  # noqa: E402

__all__ = ["JITKernel", "PerformanceWarning", "TensorSupplyType", "TilecraftError", "compile",
           "jit", "__version__"]


def __getattr__(name: str) -> Any:
    # the profiler (and the statistics module it imports) only when asked for
    if name == "TensorSupplyType":
        from tilecraft.profiler.supply import TensorSupplyType

        return TensorSupplyType
    raise AttributeError(f"module 'tilecraft' has no attribute {name!r}")
