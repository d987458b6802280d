"""The jit cache's key: a fingerprint of a factory call by value (see jit_cache.py).

`call_key(factory, args, kwargs, options)` hashes this format's number, tilecraft's version and
sources, the Python and NVRTC versions, the CompileOptions (target and switches), the jit options, the factory (file, code,
defaults, and what it reads from closures and globals, recursively) and the bound arguments.
`Fingerprint` does the by-value walk; a value it cannot capture raises `Unkeyable` and the call
is then simply not cached.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import tilecraft
from tilecraft._frozen import Frozen

FORMAT = 3
_PACKAGE_DIR = Path(__file__).resolve().parent


class Unkeyable(Exception):
    """A value the key cannot capture by value."""


@functools.lru_cache(maxsize=1)
def tilecraft_sources_hash() -> str:
    """sha256 over tilecraft's own sources: every .py and .cuh file's path, size and mtime
    (a stat per file, as Python's bytecode cache does; reading them all cost 6-9 ms a process)."""
    h = hashlib.sha256()
    _hash_tree(h, str(_PACKAGE_DIR), "")
    return h.hexdigest()


def _hash_tree(h: Any, directory: str, rel: str) -> None:
    with os.scandir(directory) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.name.endswith((".py", ".cuh")) and e.is_file():
            st = e.stat()
            h.update(f"{rel}{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        elif e.is_dir() and e.name != "__pycache__":
            _hash_tree(h, e.path, f"{rel}{e.name}/")


def call_key(
    factory: Callable, args: tuple, kwargs: dict, options: Mapping[str, Any]
) -> str | None:
    """The key of `factory(*args, **kwargs)` under the jit `options`; None when uncacheable."""
    from tilecraft.options import CompileOptions
    from tilecraft.runtime.nvrtc import nvrtc_release

    try:
        bound = inspect.signature(factory).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None  # calling the factory will report it
    bound.apply_defaults()
    arch = options.get("arch")
    fp = Fingerprint()
    fp.add("format", FORMAT, tilecraft.__version__, tilecraft_sources_hash(), sys.version)
    fp.add("nvrtc", nvrtc_release())
    fp.add("compile options", *CompileOptions.from_env(arch).key())
    try:
        fp.value(dict(options))
        if isinstance(factory, types.FunctionType):
            fp.function(factory, root=True)
        else:
            fp.value(factory)
        fp.value(tuple(bound.arguments.items()))
    except Exception:  # noqa: BLE001 - Unkeyable, RecursionError, or a value that fails to be
        return None  # inspected: the cache is an optimisation, the call goes on without it
    return fp.hexdigest()


def _versioned(path: str) -> bool:
    """Code whose changes the key already follows by version: tilecraft (its sources hash) and
    the standard library (the Python version)."""
    if path.startswith("<frozen"):
        return True
    return os.path.realpath(path).startswith((str(_PACKAGE_DIR) + os.sep, _STDLIB))


def _installed(path: str) -> bool:
    """Code of an installed package: fingerprinted by file, not followed into its globals."""
    p = os.path.realpath(path)
    return any(f"{os.sep}{d}{os.sep}" in p for d in ("site-packages", "dist-packages"))


_STDLIB = os.path.realpath(os.path.dirname(os.__file__)) + os.sep
_SCALARS = (type(None), bool, int, float, complex, str, bytes)


class Fingerprint:
    """A sha256 fed with Python values by value (see the module docstring for what counts)."""

    def __init__(self, budget: int = 20_000):
        self._h = hashlib.sha256()
        self._seen: dict[int, int] = {}  # id of a function/class/module -> order of first visit
        self._files: dict[str, str] = {}  # path -> sha256 of its contents
        self._budget = budget

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def add(self, tag: str, *parts: object) -> None:
        for text in (tag, *map(str, parts)):
            data = text.encode("utf-8", "surrogatepass")
            self._h.update(len(data).to_bytes(8, "little") + data)

    def value(self, v: object) -> None:
        self._budget -= 1
        if self._budget < 0:
            raise Unkeyable("too large")
        t = type(v)
        if t in _SCALARS:
            self.add(t.__name__, repr(v))
        elif t in (tuple, list):
            self.add(t.__name__, len(v))  # type: ignore[arg-type]
            for x in v:  # type: ignore[attr-defined]
                self.value(x)
        elif t is dict:
            self.add("dict", len(v))  # type: ignore[arg-type]
            for k, x in v.items():  # type: ignore[attr-defined]
                self.value(k)
                self.value(x)
        elif t in (set, frozenset):
            if not all(type(x) in _SCALARS for x in v):  # type: ignore[attr-defined]
                raise Unkeyable("a set of non-constants")
            self.add(t.__name__, sorted(f"{type(x).__name__}:{x!r}" for x in v))  # type: ignore[attr-defined]
        elif isinstance(v, enum.Enum):
            self.add("enum", t.__module__, t.__qualname__, v.name)
        elif isinstance(v, _SCALARS[2:]):  # a subclass, e.g. T.float16 (a str)
            base = next(b for b in _SCALARS[2:] if isinstance(v, b))
            self.add("subclass", t.__module__, t.__qualname__, base.__repr__(v))
        elif isinstance(v, types.FunctionType):
            self.function(v)
        elif isinstance(v, types.BuiltinFunctionType):
            self.add("builtin", getattr(v, "__module__", ""), v.__qualname__)
        elif isinstance(v, types.ModuleType):
            self._named(v, "module", v.__name__, getattr(v, "__file__", None))
        elif isinstance(v, type):
            module = sys.modules.get(v.__module__)
            self._named(
                v, "class", f"{v.__module__}.{v.__qualname__}", getattr(module, "__file__", None)
            )
        elif isinstance(v, types.CodeType):
            self._code(v)
        elif isinstance(v, functools.partial):
            self.add("partial")
            self.value((v.func, v.args, v.keywords))
        elif isinstance(v, Frozen):  # tilecraft's value classes (spans, targets, ...)
            self.add("frozen", t.__module__, t.__qualname__)
            self.value(v._values())
        elif is_dataclass(v):
            self.add("dataclass", t.__module__, t.__qualname__)
            self.value(tuple(getattr(v, f.name) for f in fields(v)))
        elif t.__module__ in ("torch", "numpy") and t.__name__ == "dtype":
            self.add("dtype", t.__module__, str(v))
        elif t.__module__ == "numpy" and getattr(v, "shape", None) == ():
            self.add("numpy-scalar", getattr(v, "dtype", ""), repr(v))
        elif hasattr(v, "__wrapped__"):  # @tilecraft.jit factories, functools.wraps wrappers
            self.add("wrapper", t.__module__, t.__qualname__)
            self.value(v.__wrapped__)  # type: ignore[attr-defined]
        else:
            raise Unkeyable(f"a {t.__module__}.{t.__qualname__}")

    def _first_visit(self, obj: object) -> bool:
        if id(obj) in self._seen:
            self.add("seen", self._seen[id(obj)])
            return False
        self._seen[id(obj)] = len(self._seen)
        return True

    def _file(self, path: str) -> None:
        if path not in self._files:
            try:
                with open(path, "rb") as f:
                    self._files[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                raise Unkeyable(f"cannot read {path}") from None
        self.add("file", path, self._files[path])

    def _named(self, obj: object, kind: str, name: str, path: str | None) -> None:
        self.add(kind, name)
        if path and self._first_visit(obj) and not _versioned(path):
            self._file(path)

    def function(self, f: types.FunctionType, *, root: bool = False) -> None:
        """`f` by its code and file; a user function (and always the `root`, the factory) also
        by its defaults, closure and the globals it reads, recursively."""
        self.add("function", f.__module__, f.__qualname__)
        path = f.__code__.co_filename
        if not self._first_visit(f) or (_versioned(path) and not root):
            return
        self._file(path)
        self._code(f.__code__)
        if _installed(path) and not root:
            return
        self.value((f.__defaults__, f.__kwdefaults__))
        for cell in f.__closure__ or ():
            try:
                self.value(cell.cell_contents)
            except ValueError:  # an empty cell: a name assigned later in the enclosing function
                self.add("empty cell")
        names = sorted(n for n in _global_names(f.__code__) if n in f.__globals__)
        for name in names:
            self.add("global", name)
            self.value(f.__globals__[name])

    def _code(self, c: types.CodeType) -> None:
        self.add(
            "code",
            c.co_name,
            c.co_code.hex(),
            c.co_names,
            c.co_varnames,
            c.co_freevars,
            c.co_cellvars,
            c.co_argcount,
            c.co_kwonlyargcount,
            c.co_flags,
        )
        self.value(c.co_consts)


def _global_names(code: types.CodeType) -> set[str]:
    """Names `code` and the functions nested in it may read from globals (and attribute names,
    which are harmless extras)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names
