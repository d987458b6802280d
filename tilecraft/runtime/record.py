"""KernelRecord: a RuntimeKernel written down as JSON, to be rebuilt in another process.

The jit cache (tilecraft/jit_cache.py) stores one per factory call, so that a new process gets
its kernel back without the front end, the passes, the code generator or NVRTC:

    record = KernelRecord.of(kernel, grid=(GridExpr(["//", ["+", ["dim", "m"], 127], 128]),))
    KernelRecord.from_json(json.loads(json.dumps(record.to_json()))).runtime_kernel()

The record holds the CUDA source, entry name, arch, parameter list, launch spec and what the
kernel's `ArgChecker` knows (kernel name, outputs, source spans). The cubin is not in it: it stays
in the cubin cache under `cubin_key` and is compiled again from `source` when it is gone. A grid
entry that depends on dynamic dims is a `GridExpr`: a small tree (an int, `["dim", name]`,
`["cast", x]` or `[op, a, b]`) evaluated on the bound dims, since a callable cannot be written
down. `from_json` raises ValueError/TypeError/KeyError on anything malformed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from .._frozen import Frozen, _set
from ..diagnostics import Span
from .args import ArgChecker
from .cache import default_cache
from .kernel import RuntimeKernel
from .nvrtc import CompiledCubin, compile_cuda
from .params import LaunchSpec, Param, ScalarParam, TensorMapParam, TensorParam

#: the operators of a grid tree (as the code generator evaluates grid sizes on the host)
GRID_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "min": min,
    "max": max,
    "/": lambda x, y: int(x / y),
}


class GridExpr(Frozen):
    """A grid entry computed from the bound dynamic dims, as a tree that can be written down."""

    __slots__ = ("tree",)
    tree: Any

    def __init__(self, tree: Any) -> None:
        _set(self, "tree", tree)

    @classmethod
    def checked(cls, tree: Any) -> GridExpr:
        """A GridExpr of `tree` as read back from disk; ValueError unless it is well formed."""
        _check_tree(tree)
        return cls(tree)

    def __call__(self, dims: Mapping[str, int]) -> int:
        return int(_evaluate(self.tree, dims))


def _check_tree(tree: Any) -> None:
    if type(tree) is int:
        return
    if isinstance(tree, list) and tree and isinstance(tree[0], str):
        op, *rest = tree
        if op == "dim" and len(rest) == 1 and isinstance(rest[0], str):
            return
        if (op == "cast" and len(rest) == 1) or (op in GRID_OPS and len(rest) == 2):
            for sub in rest:
                _check_tree(sub)
            return
    raise ValueError(f"not a grid expression: {tree!r}")


def _evaluate(tree: Any, dims: Mapping[str, int]) -> int:
    if isinstance(tree, int):
        return tree
    op, *rest = tree
    if op == "dim":
        return dims[rest[0]]
    if op == "cast":
        return _evaluate(rest[0], dims)
    return GRID_OPS[op](_evaluate(rest[0], dims), _evaluate(rest[1], dims))


class KernelRecord(Frozen):
    """Everything but the cubin that rebuilding a RuntimeKernel takes."""

    __slots__ = ("name", "entry", "arch", "source", "cubin_key", "params", "grid", "block", "smem",
                 "cluster", "outputs", "span", "spans", "writes")
    name: str  # the kernel's name in messages (the checker's `kernel`)
    entry: str  # the CUDA entry function
    arch: str
    source: str
    cubin_key: str  # the cubin cache's key of its cubin
    params: tuple[Param, ...]
    grid: tuple[int | GridExpr, ...]
    block: tuple[int, ...]
    smem: int
    cluster: tuple[int, ...] | None
    outputs: tuple[str, ...]  # tensor params the checker allocates and returns
    span: Span | None
    spans: Mapping[str, Span]
    writes: tuple[str, ...]  # tensor params the kernel writes (None when made: all of them)

    def __init__(
        self,
        name: str,
        entry: str,
        arch: str,
        source: str,
        cubin_key: str,
        params: tuple[Param, ...],
        grid: tuple[int | GridExpr, ...],
        block: tuple[int, ...],
        smem: int,
        cluster: tuple[int, ...] | None,
        outputs: tuple[str, ...],
        span: Span | None,
        spans: Mapping[str, Span],
        writes: tuple[str, ...] | None = None,
    ) -> None:
        if writes is None:
            writes = tuple(p.name for p in params if isinstance(p, TensorParam))
        for field, value in zip(self.__slots__, (name, entry, arch, source, cubin_key, params,
                                                 grid, block, smem, cluster, outputs, span, spans,
                                                 writes)):
            _set(self, field, value)

    @classmethod
    def of(cls, kernel: RuntimeKernel, grid: tuple[int | GridExpr, ...]) -> KernelRecord:
        """The record of `kernel`, with `grid` standing for its launch spec's grid."""
        spec, checker = kernel.launch_spec, kernel.checker
        return cls(
            name=checker.kernel,
            entry=kernel.name,
            arch=kernel.arch,
            source=kernel.source,
            cubin_key=kernel.compiled.key,
            params=kernel.params,
            grid=tuple(grid),
            block=tuple(spec.block),
            smem=spec.smem,
            cluster=spec.cluster,
            outputs=checker.outputs,
            span=checker.span,
            spans=dict(checker.spans),
            writes=checker.writes,
        )

    def runtime_kernel(self) -> RuntimeKernel:
        """The kernel: its cubin from the cubin cache, else compiled again from `source`."""
        hit = default_cache().get(self.cubin_key)
        if hit is not None and (hit.meta.get("name"), hit.meta.get("arch")) == (
            self.entry,
            self.arch,
        ):
            compiler = str(hit.meta.get("compiler", "")).removeprefix("nvrtc-")
            compiled = CompiledCubin(
                self.entry,
                self.arch,
                hit.cubin,
                hit.resources,
                hit.log,
                tuple(hit.meta.get("options", ())),
                compiler,
                self.cubin_key,
                from_cache=True,
            )
        else:
            compiled = compile_cuda(self.source, self.arch, name=self.entry)
        launch = LaunchSpec(self.grid, self.block, self.smem, self.cluster)
        checker = ArgChecker(
            self.params, kernel=self.name, outputs=self.outputs, writes=self.writes,
            spans=self.spans, span=self.span,
        )
        return RuntimeKernel(compiled, self.params, launch, self.source, checker=checker)

    def to_json(self) -> dict:
        return {
            **self.as_dict(),
            "params": [_param_json(p) for p in self.params],
            "grid": [e.tree if isinstance(e, GridExpr) else e for e in self.grid],
            "span": _span_json(self.span),
            "spans": {k: _span_json(s) for k, s in self.spans.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> KernelRecord:
        return cls(
            name=str(data["name"]),
            entry=str(data["entry"]),
            arch=str(data["arch"]),
            source=str(data["source"]),
            cubin_key=str(data["cubin_key"]),
            params=tuple(_param(p) for p in data["params"]),
            grid=tuple(e if type(e) is int else GridExpr.checked(e) for e in data["grid"]),
            block=tuple(int(b) for b in data["block"]),
            smem=int(data["smem"]),
            cluster=None if data["cluster"] is None else tuple(int(c) for c in data["cluster"]),
            outputs=tuple(str(o) for o in data["outputs"]),
            span=_span(data["span"]),
            spans={str(k): _span(s) for k, s in data["spans"].items()},
            writes=tuple(str(w) for w in data["writes"]),
        )


def _param_json(p: Param) -> dict:
    kind = ("tensor" if isinstance(p, TensorParam) else
            "tensormap" if isinstance(p, TensorMapParam) else "scalar")
    return {"param": kind, **p.as_dict()}


def _param(data: dict) -> Param:
    if data["param"] == "tensor":
        strides = None if data["strides"] is None else tuple(data["strides"])
        align = data["align"]
        if type(align) is not int:
            raise TypeError(f"align {align!r}")
        return TensorParam(data["name"], data["dtype"], tuple(data["shape"]), strides, align)
    if data["param"] == "tensormap":
        return TensorMapParam(data["name"], data["tensor"], tuple(data["box"]), data["swizzle"],
                              int(data["split"]))
    return ScalarParam(data["name"], data["kind"], data["dim"])


def _span_json(s: Span | None) -> list | None:
    return None if s is None else [s.file, s.line, s.col, s.end_col]


def _span(data: list | None) -> Span | None:
    if data is None:
        return None
    file, line, col, end_col = data
    return Span(str(file), int(line), int(col), None if end_col is None else int(end_col))
