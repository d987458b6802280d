"""The jit cache: a factory call -> its CUDA kernel, found on disk without the front end.

The runtime's cubin cache is keyed by the generated CUDA source, so a warm start still parsed the
kernel, ran the passes and emitted CUDA just to find its cubin. This cache keys one step earlier,
on what the factory call is made of, and stores what rebuilding the `RuntimeKernel` takes:

    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, ...): ...        # matmul(4096, 4096, 4096) in a new process: one JSON
                                          # read and one cubin read, no IR, no passes, no NVRTC
Key: sha256 of
  - this format's number, tilecraft's version and a hash of its sources (*.py, *.cuh), the
    Python version, the NVRTC release (`nvrtc_release()`: no library load);
  - the target (`current_target()` or the `arch` option) and the jit options;
  - the factory: its file's path and contents, its code (bytecode, constants, names), its
    defaults, and the values it reads from its closure and globals, recursively: constants (and
    containers, enums, dataclasses, dtypes of them) by value; user functions likewise; functions,
    classes and modules of installed packages by name and file contents; those of tilecraft and
    the standard library by name (the versions above cover them);
  - the call's arguments, bound to the signature with defaults applied, by value.
A value that has no fingerprint by value (an arbitrary object, a tensor) makes the call
uncacheable; it is then built as before.

Entry: `<cache dir>/jit/<key[:2]>/<key>.json`: a `KernelRecord` (tilecraft/runtime/record.py:
CUDA source, entry, parameters, launch spec, source spans, the cubin's key in the cubin cache)
and the jit options. Written to a temporary name and renamed; a file that does not parse, has
another format or another key is a miss (and is rewritten). The cubin stays in the cubin cache
(and is compiled again from the stored source if it is gone).

`TILECRAFT_JIT_CACHE=0` or `@tilecraft.jit(cache=False)` turns it off; so does
`TILECRAFT_DUMP_IR`, so that the passes run and dump.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import json
import os
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tilecraft

if TYPE_CHECKING:
    from tilecraft.runtime.record import GridExpr, KernelRecord

FORMAT = 1
_PACKAGE_DIR = Path(__file__).resolve().parent


def enabled() -> bool:
    """False when `TILECRAFT_JIT_CACHE` is 0/false/off or `TILECRAFT_DUMP_IR` is set."""
    off = os.environ.get("TILECRAFT_JIT_CACHE", "1").lower() in ("0", "false", "off", "no")
    return not off and not os.environ.get("TILECRAFT_DUMP_IR")


# ---- the key -------------------------------------------------------------------------------
class Unkeyable(Exception):
    """A value the key cannot capture by value."""


@functools.lru_cache(maxsize=1)
def tilecraft_sources_hash() -> str:
    """sha256 over tilecraft's own sources: every .py and .cuh file's path, size and mtime
    (a stat per file, as Python's bytecode cache does; reading them all cost 6-9 ms a process)."""
    h = hashlib.sha256()
    for directory, subdirs, files in os.walk(_PACKAGE_DIR):
        subdirs.sort()
        for name in sorted(files):
            if name.endswith((".py", ".cuh")):
                path = os.path.join(directory, name)
                st = os.stat(path)
                h.update(f"{os.path.relpath(path, _PACKAGE_DIR)}\0{st.st_size}\0"
                         f"{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def call_key(
    factory: Callable, args: tuple, kwargs: dict, options: Mapping[str, Any]
) -> str | None:
    """The key of `factory(*args, **kwargs)` under the jit `options`; None when uncacheable."""
    from tilecraft.runtime.nvrtc import nvrtc_release
    from tilecraft.targets import current_target, target_from_arch

    try:
        bound = inspect.signature(factory).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None  # calling the factory will report it
    bound.apply_defaults()
    arch = options.get("arch")
    fp = Fingerprint()
    fp.add("format", FORMAT, tilecraft.__version__, tilecraft_sources_hash(), sys.version)
    fp.add("nvrtc", nvrtc_release())
    fp.add("target", repr(target_from_arch(arch) if arch else current_target()))
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


# ---- the entry -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CachedKernel:
    """A jit-cache entry: the kernel's record and the jit options it was prepared with."""

    record: KernelRecord  # the kernel, written down (tilecraft/runtime/record.py)
    out_idx: tuple[int, ...]
    target: str
    arch: str | None

    def to_json(self) -> dict:
        jit = {"out_idx": list(self.out_idx), "target": self.target, "arch": self.arch}
        return {"format": FORMAT, "kernel": self.record.to_json(), "jit": jit}

    @classmethod
    def from_json(cls, data: dict) -> CachedKernel:
        from tilecraft.runtime.record import KernelRecord

        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, expected {FORMAT}")
        jit = data["jit"]
        arch = jit["arch"]
        return cls(
            record=KernelRecord.from_json(data["kernel"]),
            out_idx=tuple(int(i) for i in jit["out_idx"]),
            target=str(jit["target"]),
            arch=None if arch is None else str(arch),
        )


def describe(
    kernel: Any, grid_exprs: tuple, *, out_idx: list[int], target: str, arch: str | None
) -> CachedKernel | None:
    """The entry of a kernel just built (`kernel`: its RuntimeKernel, `grid_exprs`: the IR of its
    grid); None when the grid cannot be written down or does not evaluate as the code
    generator's launch spec does on a few sample dims."""
    from tilecraft.runtime.record import GridExpr, KernelRecord

    spec = kernel.launch_spec
    try:
        grid = tuple(
            e if isinstance(e, int) else GridExpr(_grid_tree(g))
            for e, g in zip(spec.grid, grid_exprs, strict=True)
        )
    except (Unkeyable, ValueError):
        return None
    names = sorted({n for p in kernel.params for n in getattr(p, "dynamic_dims", ())})
    samples = (
        {n: 1000 + 7 * i for i, n in enumerate(names)},
        dict.fromkeys(names, 1),
        {n: 4097 + 13 * i for i, n in enumerate(names)},
    )
    for theirs, ours in zip(spec.grid, grid):
        if callable(theirs) and not all(_agree(theirs, ours, dims) for dims in samples):
            return None
    return CachedKernel(KernelRecord.of(kernel, grid), tuple(out_idx), target, arch)


def _grid_tree(e: Any) -> Any:
    """A grid expression of the IR as a GridExpr tree."""
    from tilecraft.ir import BinOp, Cast, Const, Var
    from tilecraft.runtime.record import GRID_OPS

    if isinstance(e, bool) or not isinstance(e, (int, Const, Var, Cast, BinOp)):
        raise Unkeyable(f"grid expression {e}")
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return _grid_tree(e.value)
    if isinstance(e, Var):
        return ["dim", e.name]
    if isinstance(e, Cast):
        return ["cast", _grid_tree(e.value)]
    if e.op not in GRID_OPS:
        raise Unkeyable(f"grid operator {e.op}")
    return [e.op, _grid_tree(e.a), _grid_tree(e.b)]


def _agree(theirs: Callable, ours: GridExpr, dims: dict[str, int]) -> bool:
    try:
        want = theirs(dims)
    except Exception:  # noqa: BLE001 - a sample the code generator's grid cannot take either
        return True
    try:
        return ours(dims) == want
    except Exception:  # noqa: BLE001
        return False


def entry_path(key: str) -> Path:
    from tilecraft.runtime.cache import cache_dir

    return cache_dir() / "jit" / key[:2] / f"{key}.json"


def load(key: str) -> CachedKernel | None:
    """The entry stored under `key`; None when absent, unreadable or not what it should be."""
    try:
        data = json.loads(entry_path(key).read_bytes())
        if data["key"] != key:
            return None
        return CachedKernel.from_json(data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None


def save(key: str, kernel: CachedKernel) -> None:
    """Store `kernel` under `key` (write to a temporary name, then rename; errors ignored)."""
    from tilecraft.runtime.cache import atomic_write

    try:
        data = json.dumps({"key": key, **kernel.to_json()}).encode()
        atomic_write(entry_path(key), data)
    except (OSError, TypeError, ValueError):  # unwritable directory, a value JSON cannot hold
        pass
