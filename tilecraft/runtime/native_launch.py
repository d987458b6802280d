"""The compiled launcher (launch_native.c): built once per machine with the system's C compiler,
kept in the cache directory, loaded in milliseconds after that.

The fast path's Python call (fast_source.py) costs about 3 us of interpreted work around the
driver's cuLaunchKernel; the C `Launcher` does the same checks and the launch in one call
(fast_call.py uses it in front of the Python path, which stays the fallback and the reference).
It needs a C compiler (`$CC`, else `cc`) and Python's headers, no CUDA toolkit: the driver's
entry points arrive as addresses. Where either is missing, or `TILECRAFT_NATIVE_LAUNCH=0`, the
Python path is all there is; `status()` says why.

The build runs in a background thread, started by the first kernel that could use it, so no
call waits for a compiler; kernels made before it finishes switch over when it does
(`when_ready`). The shared object is named by a hash of the C source and the Python ABI, and
written under a temporary name then renamed, so concurrent processes are harmless.

    module = native_launch.module()          # the loaded module, or None (build started)
    native_launch.wait(timeout=60)           # block until built (tests, benchmarks)
    native_launch.status()                   # "ready: <path>", "building", "off: <why>"
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

_SOURCE = Path(__file__).with_name("launch_native.c")
_NAME = "_tc_launch"

_lock = threading.Lock()
_done = threading.Event()
_module: ModuleType | None = None
_state = "not started"
_thread: threading.Thread | None = None
_waiting: weakref.WeakSet[Any] = weakref.WeakSet()  # objects with an `_upgrade()` method


def enabled() -> bool:
    return os.environ.get("TILECRAFT_NATIVE_LAUNCH", "1") != "0"


def module() -> ModuleType | None:
    """The loaded module, or None: off, failed, or still building (then the build is under way:
    `when_ready` tells a caller when it is done)."""
    if not enabled():
        return None
    if _module is None:
        _start()
    return _module


def when_ready(owner: Any) -> None:
    """Call `owner._upgrade()` (from the builder thread) once the module is loaded; at once if it
    is. Held weakly: an owner that dies first is never called."""
    with _lock:
        if _module is None and not _done.is_set():
            _waiting.add(owner)
            return
    if _module is not None:
        owner._upgrade()


def wait(timeout: float | None = None) -> ModuleType | None:
    """Start the build if needed and wait for it; the module, or None (off or failed)."""
    if not enabled():
        return None
    _start()
    _done.wait(timeout)
    return _module


def status() -> str:
    if not enabled():
        return "off: TILECRAFT_NATIVE_LAUNCH=0"
    return _state


def _start() -> None:
    global _thread, _state
    with _lock:
        if _thread is not None or _done.is_set():
            return
        found = _load_built()
        if found is not None:
            _finish(found, f"ready: {_target()}")
            return
        _state = "building"
        _thread = threading.Thread(target=_build_and_load, name="tilecraft-native-launch",
                                   daemon=True)
        _thread.start()


def _finish(mod: ModuleType | None, state: str) -> None:
    """Record the outcome (the caller holds `_lock`)."""
    global _module, _state
    _module, _state = mod, state
    _done.set()


def _build_and_load() -> None:
    try:
        path = _build()
        mod, state = _import(path), f"ready: {path}"
    except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path in charge
        mod, state = None, f"off: {exc}"
    with _lock:
        _finish(mod, state)
        owners = list(_waiting)
        _waiting.clear()
    if mod is not None:
        for owner in owners:
            owner._upgrade()


def _suffix() -> str:
    """This interpreter's extension-module suffix (".cpython-312-x86_64-linux-gnu.so"), read
    without sysconfig (whose import costs milliseconds on a cached kernel's first call)."""
    import importlib.machinery

    return importlib.machinery.EXTENSION_SUFFIXES[0]


def _key() -> str:
    h = hashlib.sha256(_SOURCE.read_bytes())
    h.update(f"{sys.implementation.cache_tag} {_suffix()}".encode())
    return h.hexdigest()[:20]


def _target() -> Path:
    from .cache import cache_dir

    return cache_dir() / "native" / f"{_NAME}-{_key()}{_suffix()}"


def _load_built() -> ModuleType | None:
    try:
        target = _target()
        return _import(target) if target.is_file() else None
    except Exception:  # noqa: BLE001 - a broken file is rebuilt
        return None


def _import(path: Path) -> ModuleType:
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(_NAME, str(path))
    spec = importlib.util.spec_from_file_location(_NAME, str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    loader.exec_module(mod)
    return mod


def _build() -> Path:
    """Compile launch_native.c into the cache directory; the path of the shared object."""
    import shlex
    import shutil
    import subprocess
    import sysconfig
    import tempfile

    target = _target()
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        raise RuntimeError(f"no Python.h in {include} (install Python's development headers)")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler (set $CC or install cc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=target.suffix, dir=target.parent)
    os.close(fd)
    cmd = [*cc.split(), "-O2", "-shared", "-fPIC", "-I", include, str(_SOURCE), "-o", tmp]
    # the rename is the shell's: a process that exits while this thread waits (it is a daemon)
    # still leaves the built file for the next one
    script = f'{shlex.join(cmd)} && mv -f {shlex.quote(tmp)} {shlex.quote(str(target))}'
    script += f' || {{ rm -f {shlex.quote(tmp)}; exit 1; }}'
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()[-2000:]}")
    return target


_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7,
                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_GET_CTX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))


def entry_points(lib: Any) -> tuple[int, int, tuple]:
    """(cuLaunchKernel's address, cuCtxGetCurrent's address, what keeps them alive) of `lib`:
    a libcuda CDLL, or a stand-in with Python methods (the tests'), wrapped as C callbacks."""
    def get(name: str) -> Any:
        return lib[name] if isinstance(lib, ctypes.CDLL) else getattr(lib, name)

    launch, get_ctx = get("cuLaunchKernel"), get("cuCtxGetCurrent")
    if not isinstance(launch, ctypes._CFuncPtr):
        py_launch: Callable[..., int] = launch
        launch = _LAUNCH(lambda *a: py_launch(*a))
    if not isinstance(get_ctx, ctypes._CFuncPtr):
        py_ctx: Callable[..., int] = get_ctx
        get_ctx = _GET_CTX(lambda ref: py_ctx(ref.contents))
    return (ctypes.cast(launch, ctypes.c_void_p).value or 0,
            ctypes.cast(get_ctx, ctypes.c_void_p).value or 0, (lib, launch, get_ctx))
