"""Where the CUDA pieces come from: the NVRTC Python module and the CUDA headers.

Nothing here needs a GPU or /usr/local/cuda. The search order for the headers generated code
includes (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h) is:

1. the `nvidia` pip packages (`nvidia-cuda-runtime`): `nvidia/cu13/include` (CUDA 13 wheels),
   `nvidia/cuda_runtime/include` (CUDA 12 wheels), then any other `nvidia/*/include`;
2. `cuda.pathfinder.find_nvidia_header_directory("cudart")` when cuda-pathfinder is installed;
3. `$CUDA_HOME/include`, `$CUDA_PATH/include`, then `/usr/local/cuda/include`, as a last resort.

The first directory that holds `cuda_fp16.h` wins.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import ModuleType

from .errors import CudaToolkitNotFoundError

#: tilecraft's own device header library (`#include "tilecraft/mma.cuh"`).
TILECRAFT_INCLUDE_DIR: Path = (
    Path(__file__).resolve().parent.parent / "codegen" / "cuda" / "include"
)

_MARKER = "cuda_fp16.h"
_WHEEL_SUBDIRS = ("cu13/include", "cuda_runtime/include", "cu12/include")


@functools.lru_cache(maxsize=1)
def nvrtc_module() -> ModuleType:
    """The cuda-bindings NVRTC module (`cuda.bindings.nvrtc`, or `cuda.nvrtc` in older releases)."""
    try:
        from cuda.bindings import nvrtc  # type: ignore[import-not-found]

        return nvrtc
    except ImportError:
        pass
    try:
        from cuda import nvrtc  # type: ignore[import-not-found,no-redef]

        return nvrtc
    except ImportError as exc:
        raise CudaToolkitNotFoundError(
            "NVRTC is not available: install the CUDA extra, `pip install -e '.[cuda]'` "
            "(packages cuda-bindings and nvidia-cuda-nvrtc)"
        ) from exc


def _wheel_include_dirs() -> list[Path]:
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return []
    roots = [Path(p) for p in getattr(nvidia, "__path__", [])]
    known = [root / sub for root in roots for sub in _WHEEL_SUBDIRS]
    other = [d for root in roots for d in sorted(root.glob("*/include")) if d not in known]
    return known + other


def _pathfinder_include_dirs() -> list[Path]:
    try:
        from cuda.pathfinder import find_nvidia_header_directory  # type: ignore[import-not-found]
    except ImportError:
        return []
    try:
        found = find_nvidia_header_directory("cudart")
    except Exception:  # noqa: BLE001 - pathfinder raises various errors when nothing is found
        return []
    return [Path(found)] if found else []


def _toolkit_include_dirs() -> list[Path]:
    dirs = [
        Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)
    ]
    return dirs + [Path("/usr/local/cuda/include")]


def candidate_include_dirs() -> list[Path]:
    """Every place searched for the CUDA headers, in search order (existing or not)."""
    found = _wheel_include_dirs() + _pathfinder_include_dirs() + _toolkit_include_dirs()
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> Path:
    """The directory holding cuda_fp16.h / cuda_bf16.h / cuda_fp8.h (see the module docstring)."""
    for d in candidate_include_dirs():
        if (d / _MARKER).is_file():
            return d
    searched = "\n  ".join(str(d) for d in candidate_include_dirs())
    raise CudaToolkitNotFoundError(
        f"cannot find the CUDA headers ({_MARKER}); searched:\n  {searched}\n"
        "install them with `pip install nvidia-cuda-runtime` (part of the `cuda` extra)"
    )


def include_dirs() -> list[Path]:
    """The -I directories every compile gets: tilecraft's header library, then the CUDA headers."""
    return [TILECRAFT_INCLUDE_DIR, cuda_include_dir()]
