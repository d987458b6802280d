"""Timing and checking kernels: do_bench (CUDA events, L2 flush, median) and Profiler (inputs from
the kernel's signature, `do_bench`, `assert_allclose`, `run_once`)."""

from .bench import do_bench
from .profiler import Profiler, ProfilerInputError, get_profiler
from .supply import TensorSupplyType

__all__ = ["Profiler", "ProfilerInputError", "TensorSupplyType", "do_bench", "get_profiler"]
