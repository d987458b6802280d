"""InferenceContext: the one place layouts are assigned, so every conflict is reported alike."""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Buffer, ParallelLoop

from ..context import KernelState


def where(node) -> str:
    """`T.gemm (line 12)`: the op and its user's line, for messages."""
    span = getattr(node, "span", None)
    line = f" (line {span.line})" if span is not None and getattr(span, "line", None) else ""
    return f"{describe(node)}{line}"


def describe(node) -> str:
    if isinstance(node, ParallelLoop):
        return f"T.Parallel{tuple(node.extents)}"
    if getattr(node, "NAME", ""):  # a block instruction (the Tilus level)
        return "the Tilus-level register tensor"
    name = type(node).__name__
    return {"Gemm": "T.gemm", "Copy": "T.copy", "Reduce": "T.reduce", "Fill": "T.fill",
            "Allocate": "the allocation", "AnnotateLayout": "T.annotate_layout"}.get(name, name)


class InferenceContext:
    def __init__(self, state: KernelState):
        self.state = state
        self.changed = False
        self.origin: dict[Buffer, object] = {}

    def get(self, buf: Buffer):
        return self.state.layouts.get(buf)

    def set(self, buf: Buffer, layout, node, why: str) -> None:
        """Give `buf` `layout` (decided by `node`); TC501 when it already has another one."""
        if layout.num_threads != self.state.num_threads:
            raise TilecraftError("TC501", span=getattr(node, "span", None), buffer=buf.name,
                                 detail=f"{where(node)} needs {layout} over "
                                 f"{layout.num_threads} threads, the block has "
                                 f"{self.state.num_threads}", hint="change threads= or the tile")
        old = self.state.layouts.get(buf)
        if old is None:
            self.state.layouts[buf] = layout
            self.state.layout_origin[buf] = f"{why} from {where(node)}"
            self.origin[buf] = node
            self.changed = True
            return
        if old != layout:
            first = self.origin.get(buf)
            raise TilecraftError(
                "TC501", span=getattr(node, "span", None), buffer=buf.name,
                detail=f"{where(first)} gives it {old}, but {where(node)} needs {layout}",
                hint="make both ops agree (e.g. the same warp policy), or copy through shared "
                     "memory between them",
                notes=tuple((sp, "the other layout comes from here")
                            for sp in (getattr(first, "span", None),) if sp is not None))

    def set_loop(self, loop: ParallelLoop, layout) -> None:
        old = self.state.loop_layouts.get(loop)
        if old is None:
            self.state.loop_layouts[loop] = layout
            self.changed = True
        elif old != layout:
            raise TilecraftError("TC501", span=loop.span, buffer="(loop)",
                                 detail=f"{where(loop)} is mapped as {old} and as {layout}",
                                 hint="index fragments of one layout in one T.Parallel loop")
