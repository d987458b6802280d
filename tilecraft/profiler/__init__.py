"""Timing kernels on the GPU: do_bench (CUDA events, L2 flush, median) and Profiler."""

from .bench import do_bench
from .profiler import Profiler, get_profiler, random_tensor

__all__ = ["Profiler", "do_bench", "get_profiler", "random_tensor"]
