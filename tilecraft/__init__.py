"""tilecraft: a tile-level GPU kernel language and compiler, with a CPU interpreter.

    import tilecraft
    import tilecraft.language as T
"""

__version__ = "0.1.0"

from tilecraft.diagnostics import PerformanceWarning, TilecraftError  # noqa: E402
from tilecraft.jit import JITKernel, compile, jit  # noqa: E402
from tilecraft.profiler.supply import TensorSupplyType  # noqa: E402

__all__ = ["JITKernel", "PerformanceWarning", "TensorSupplyType", "TilecraftError", "compile",
           "jit", "__version__"]
