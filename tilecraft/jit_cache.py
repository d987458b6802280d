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
    containers, enums, dataclasses, tilecraft's frozen values, dtypes of them) by value; user
    functions likewise; functions, classes and modules of installed packages by name and file
    contents; those of tilecraft and the standard library by name (the versions above cover
    them);
  - the call's arguments, bound to the signature with defaults applied, by value.
A value that has no fingerprint by value (an arbitrary object, a tensor) makes the call
uncacheable; it is then built as before.

Entry: `<cache dir>/jit/<key[:2]>/<key>.json`: a `KernelRecord` (tilecraft/runtime/record.py:
CUDA source, entry, parameters, launch spec, source spans, the cubin's key in the cubin cache)
and the jit options, plus the sha256 of all of it. Written to a temporary name and renamed; a
file that does not parse, has another format or another key, or whose contents do not hash to
its sha256 (a damaged byte in the source or the parameters) is a miss (and is rewritten), with a
`CacheCorruptionWarning` when the file was damaged rather than of another format. The cubin
stays in the cubin cache (which checks its length and hash; a damaged or missing cubin is
compiled again from the stored source).

`TILECRAFT_JIT_CACHE=0` or `@tilecraft.jit(cache=False)` turns it off; so does
`TILECRAFT_DUMP_IR`, so that the passes run and dump.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilecraft.runtime.record import GridExpr, KernelRecord

from ._frozen import Frozen, _set
from .jit_key import FORMAT, Fingerprint, Unkeyable, call_key, tilecraft_sources_hash

__all__ = ["FORMAT", "CachedKernel", "Fingerprint", "Unkeyable", "call_key", "describe",
           "enabled", "entry_path", "load", "save", "tilecraft_sources_hash"]


def enabled() -> bool:
    """False when `TILECRAFT_JIT_CACHE` is 0/false/off or `TILECRAFT_DUMP_IR` is set."""
    off = os.environ.get("TILECRAFT_JIT_CACHE", "1").lower() in ("0", "false", "off", "no")
    return not off and not os.environ.get("TILECRAFT_DUMP_IR")


# ---- the entry -----------------------------------------------------------------------------
class CachedKernel(Frozen):
    """A jit-cache entry: the kernel's record and the jit options it was prepared with."""

    __slots__ = ("record", "out_idx", "target", "arch")
    record: KernelRecord  # the kernel, written down (tilecraft/runtime/record.py)
    out_idx: tuple[int, ...]
    target: str
    arch: str | None

    def __init__(
        self, record: KernelRecord, out_idx: tuple[int, ...], target: str, arch: str | None
    ) -> None:
        _set(self, "record", record)
        _set(self, "out_idx", out_idx)
        _set(self, "target", target)
        _set(self, "arch", arch)

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
    """The entry stored under `key`; None when absent, unreadable or not what it should be
    (damaged: with a CacheCorruptionWarning at the user's factory call)."""
    from tilecraft.runtime.cache import read_signed_json

    return read_signed_json(entry_path(key), key, FORMAT, CachedKernel.from_json,
                            "jit cache entry", "building the kernel again")


def save(key: str, kernel: CachedKernel) -> None:
    """Store `kernel` under `key` (write to a temporary name, then rename; errors ignored)."""
    from tilecraft.runtime.cache import write_signed_json

    write_signed_json(entry_path(key), {"key": key, **kernel.to_json()})
