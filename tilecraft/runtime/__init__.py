"""Runtime: NVRTC compile, kernel cache, module loading, argument checks and launch.

Never imports tilecraft.ir: the code generator hands over CUDA source, an entry name, a parameter
list (`TensorParam`/`ScalarParam`) and a `LaunchSpec`; see docs/runtime.md.
"""

from .args import ArgChecker, BoundArgs, check_args
from .cache import KernelCache, cache_dir, cache_key, default_cache
from .errors import (
    CacheCorruptionWarning,
    CudaCompileError,
    CudaDriverError,
    CudaToolkitNotFoundError,
    CudaUnavailableError,
    LaunchArgumentError,
)
from .kernel import RuntimeKernel
from .nvrtc import (
    CompiledCubin,
    CompileJob,
    compile_cuda,
    compile_many,
    nvrtc_invocations,
    nvrtc_version,
)
from .params import LaunchSpec, Param, ScalarParam, TensorMapParam, TensorParam, torch_dtype
from .paths import TILECRAFT_INCLUDE_DIR, cuda_include_dir, include_dirs
from .resources import Resources, parse_ptxas_log, resources_from_cubin

__all__ = [
    "TILECRAFT_INCLUDE_DIR",
    "ArgChecker",
    "BoundArgs",
    "CacheCorruptionWarning",
    "CompileJob",
    "CompiledCubin",
    "CudaCompileError",
    "CudaDriverError",
    "CudaToolkitNotFoundError",
    "CudaUnavailableError",
    "KernelCache",
    "LaunchArgumentError",
    "LaunchSpec",
    "Param",
    "Resources",
    "RuntimeKernel",
    "ScalarParam",
    "TensorMapParam",
    "TensorParam",
    "cache_dir",
    "cache_key",
    "check_args",
    "compile_cuda",
    "compile_many",
    "cuda_include_dir",
    "default_cache",
    "include_dirs",
    "nvrtc_invocations",
    "nvrtc_version",
    "parse_ptxas_log",
    "resources_from_cubin",
    "torch_dtype",
]
