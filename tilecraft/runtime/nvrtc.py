"""Compile CUDA C++ to a cubin in-process with NVRTC (cuda-bindings), with the kernel cache.

`compile_cuda(source, "sm_90a", name="kernel")` returns a `CompiledCubin` holding machine code for
exactly that architecture plus the kernel's `Resources` (registers, spills, ...). Every compile gets
`-arch=<arch> -std=c++17 -lineinfo --ptxas-options=-v` and the include directories of `paths.py`
(tilecraft's header library, then the CUDA headers from the nvidia pip packages). Entry functions
must be `extern "C"` so `name` is the symbol in the cubin. Compiles of independent variants run in
threads with `compile_many` (NVRTC is thread-safe per program).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

from .._frozen import Frozen, _set
from .cache import CacheEntry, KernelCache, cache_key, default_cache
from .errors import CudaCompileError
from .paths import include_dirs, nvrtc_module
from .resources import Resources, parse_ptxas_log, resources_from_cubin

BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", "-lineinfo", "--ptxas-options=-v")
FAST_MATH: str = "--use_fast_math"


class CompiledCubin(Frozen):
    """Machine code for one arch, the entry function's name and resources, and the NVRTC log."""

    __slots__ = ("name", "arch", "cubin", "resources", "log", "options", "compiler_version", "key",
                 "from_cache")
    _hidden = ("cubin", "log")
    name: str
    arch: str
    cubin: bytes
    resources: Resources
    log: str
    options: tuple[str, ...]
    compiler_version: str
    key: str
    from_cache: bool

    def __init__(
        self,
        name: str,
        arch: str,
        cubin: bytes,
        resources: Resources,
        log: str = "",
        options: tuple[str, ...] = (),
        compiler_version: str = "",
        key: str = "",
        from_cache: bool = False,
    ) -> None:
        for field, value in zip(self.__slots__, (name, arch, cubin, resources, log, options,
                                                 compiler_version, key, from_cache)):
            _set(self, field, value)


class CompileJob(Frozen):
    """One input of `compile_many`."""

    __slots__ = ("source", "arch", "name", "options")
    source: str
    arch: str
    name: str
    options: tuple[str, ...]

    def __init__(self, source: str, arch: str, name: str, options: tuple[str, ...] = ()) -> None:
        _set(self, "source", source)
        _set(self, "arch", arch)
        _set(self, "name", name)
        _set(self, "options", options)


_calls = 0
_calls_lock = threading.Lock()


def nvrtc_invocations() -> int:
    """How many times this process has run NVRTC (cache hits do not count)."""
    return _calls


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    """The NVRTC version as "major.minor" (e.g. "13.0")."""
    err, major, minor = nvrtc_module().nvrtcVersion()
    _check(err, "nvrtcVersion")
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=1)
def nvrtc_release() -> str:
    """Which NVRTC compiles here, without loading it (loading libnvrtc takes tens of ms): the
    version of the installed `nvidia-cuda-nvrtc` wheel, which cuda-bindings loads first; else,
    with NVRTC from elsewhere, the loaded library's `nvrtc_version()`. The wheel is found by its
    `nvidia_cuda_nvrtc*-<version>.dist-info` folder beside the `nvidia` package (a directory
    listing; importlib.metadata's search of every path entry takes 0.5-1 ms)."""
    wheels = _nvrtc_dist_infos()
    if wheels:
        return " ".join(wheels)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"nvidia-cuda-nvrtc {version('nvidia-cuda-nvrtc')}"
    except PackageNotFoundError:
        return f"nvrtc {nvrtc_version()}"


def _nvrtc_dist_infos() -> list[str]:
    """"<name> <version>" of each nvidia-cuda-nvrtc wheel installed beside the `nvidia` package."""
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    found = []
    for location in (spec.submodule_search_locations or []) if spec else []:
        site = os.path.dirname(location)
        try:
            names = os.listdir(site)
        except OSError:
            continue
        for n in names:
            if n.startswith("nvidia_cuda_nvrtc") and n.endswith(".dist-info") and "-" in n:
                dist, _, ver = n.removesuffix(".dist-info").partition("-")
                found.append(f"{dist.replace('_', '-')} {ver}")
    return sorted(found)


def _check(err: object, call: str) -> None:
    if int(err) != 0:  # NVRTC_SUCCESS
        raise RuntimeError(f"{call} failed: {getattr(err, 'name', err)}")


def _arch_option(arch: str) -> str:
    if not arch.startswith("sm_"):
        raise ValueError(f"arch must look like 'sm_90a' or 'sm_80', got {arch!r}")
    return f"-arch={arch}"


def full_options(arch: str, options: Sequence[str] = ()) -> tuple[str, ...]:
    """The options NVRTC gets, without the include directories (which vary per machine)."""
    return (_arch_option(arch), *BASE_OPTIONS, *options)


def _run_nvrtc(source: str, filename: str, opts: Sequence[str]) -> tuple[bytes | None, str]:
    """Run NVRTC once; returns (cubin or None on failure, log)."""
    global _calls
    with _calls_lock:
        _calls += 1
    nv = nvrtc_module()
    err, prog = nv.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        encoded = [o.encode() for o in opts]
        (result,) = nv.nvrtcCompileProgram(prog, len(encoded), encoded)
        err, size = nv.nvrtcGetProgramLogSize(prog)
        _check(err, "nvrtcGetProgramLogSize")
        buf = b" " * size
        _check(nv.nvrtcGetProgramLog(prog, buf)[0], "nvrtcGetProgramLog")
        log = buf.rstrip(b"\0 ").decode("utf-8", "replace")
        if int(result) != 0:
            return None, log
        err, size = nv.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nv.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
        return cubin, log
    finally:
        nv.nvrtcDestroyProgram(prog)


def _entry_resources(cubin: bytes, log: str, name: str) -> Resources:
    found = parse_ptxas_log(log).get(name)
    if found is not None:
        return found
    from .elf import Cubin  # ELF parsing only after a compile (a cache hit never needs it)

    kernels = Cubin(cubin).kernel_names()
    if name not in kernels:
        raise ValueError(
            f"entry function `{name}` is not in the compiled code (kernels: {kernels}); "
            'declare it `extern "C" __global__`'
        )
    return resources_from_cubin(cubin, name)


def compile_cuda(
    source: str,
    arch: str,
    *,
    name: str,
    options: Sequence[str] = (),
    fast_math: bool = False,
    use_cache: bool = True,
    cache: KernelCache | None = None,
) -> CompiledCubin:
    """Compile `source` for `arch` ("sm_90a", "sm_80", ...) to a cubin; `name` is the entry.

    `options` are extra NVRTC options (e.g. "-DTILE=128", "-maxrregcount=128"); `fast_math` adds
    `--use_fast_math`. Results are cached on disk and in memory unless `use_cache` is False.
    Raises `CudaCompileError` (log plus the offending source lines) when NVRTC rejects the source.
    """
    opts = full_options(arch, (*options, *((FAST_MATH,) if fast_math else ())))
    version = nvrtc_version()
    key = cache_key(source, arch, (*opts, f"entry={name}"), f"nvrtc-{version}")
    store = (cache or default_cache()) if use_cache else None
    if store is not None and (hit := store.get(key)) is not None:
        return CompiledCubin(
            name, arch, hit.cubin, hit.resources, hit.log, opts, version, key, True
        )
    filename = f"{name}.cu"
    includes = [f"-I{d}" for d in include_dirs()]
    cubin, log = _run_nvrtc(source, filename, (*opts, *includes))
    if cubin is None:
        raise CudaCompileError(name, arch, log, source, filename=filename)
    resources = _entry_resources(cubin, log, name)
    if store is not None:
        meta = {"name": name, "arch": arch, "options": list(opts), "compiler": f"nvrtc-{version}"}
        store.put(key, CacheEntry(cubin, resources, log, meta))
    return CompiledCubin(name, arch, cubin, resources, log, opts, version, key, False)


def compile_many(
    jobs: Sequence[CompileJob],
    *,
    max_workers: int | None = None,
    return_exceptions: bool = False,
    use_cache: bool = True,
) -> list[CompiledCubin | BaseException]:
    """Compile independent jobs in a thread pool; results come back in the order of `jobs`.

    With `return_exceptions=True` a failed job yields its exception instead of raising, which is
    what an autotuner wants; otherwise the first failure (in job order) is raised.
    """

    from concurrent.futures import ThreadPoolExecutor

    def one(job: CompileJob) -> CompiledCubin:
        return compile_cuda(
            job.source, job.arch, name=job.name, options=job.options, use_cache=use_cache
        )

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = [pool.submit(one, job) for job in jobs]
    results: list[CompiledCubin | BaseException] = []
    for fut in futures:
        exc = fut.exception()
        if exc is not None and not return_exceptions:
            raise exc
        results.append(exc if exc is not None else fut.result())
    return results
