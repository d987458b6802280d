"""The fused tile-level dataflow graph (FTG): tile ops and Parallel loops as nodes, buffers as edges.

Layout inference, pipeline planning and the cost model read it. Edges join each writer of a
buffer to each reader of it (in either program order: inside a loop a later write feeds an
earlier read on the next iteration), so connected components are the groups whose layouts
must agree.

    build_ftg(func).dump()
      n0  fill       writes C_local                      line 12
      n1  copy       A -> A_shared                       line 14
      ...
      C_local: n0 -> n3, n3 -> n4
"""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.diagnostics import Span

from .buffer import Buffer
from .expr import BufferLoad
from .func import PrimFunc
from .stmt import BufferStore, ParallelLoop, Stmt
from .tileops import AnnotateLayout, TileOp, UseSwizzle
from .visitor import stmt_children, stmt_exprs, walk, walk_expr


@dataclass(frozen=True)
class FTGNode:
    index: int
    stmt: Stmt
    reads: tuple[Buffer, ...]
    writes: tuple[Buffer, ...]
    loops: tuple[Stmt, ...]  # enclosing For loops, outermost first

    @property
    def kind(self) -> str:
        return "parallel" if isinstance(self.stmt, ParallelLoop) else self.stmt.op_name

    @property
    def span(self) -> Span | None:
        return self.stmt.span


@dataclass(frozen=True)
class FTGEdge:
    src: int
    dst: int
    buffer: Buffer


@dataclass(frozen=True)
class FTG:
    nodes: tuple[FTGNode, ...]
    edges: tuple[FTGEdge, ...]

    def users(self, buf: Buffer) -> tuple[FTGNode, ...]:
        return tuple(n for n in self.nodes if buf in n.reads or buf in n.writes)

    def components(self) -> list[set[Buffer]]:
        """Groups of non-global buffers connected through shared nodes."""
        parent: dict[Buffer, Buffer] = {}

        def find(b):
            while parent.setdefault(b, b) is not b:
                b = parent[b]
            return b

        for n in self.nodes:
            local = [b for b in n.reads + n.writes if b.scope != "global"]
            for b in local:
                find(b)
            for a, b in zip(local, local[1:]):
                parent[find(a)] = find(b)
        groups: dict[Buffer, set[Buffer]] = {}
        for b in parent:
            groups.setdefault(find(b), set()).add(b)
        return list(groups.values())

    def dump(self) -> str:
        lines = []
        for n in self.nodes:
            flow = ", ".join(b.name for b in n.reads) + " -> " + ", ".join(b.name for b in n.writes)
            line = n.span.line if n.span else "?"
            lines.append(f"n{n.index:<3} {n.kind:<10} {flow:<48} line {line}")
        by_buf: dict[str, list[str]] = {}
        for e in self.edges:
            by_buf.setdefault(e.buffer.name, []).append(f"n{e.src} -> n{e.dst}")
        lines += [f"{b}: {', '.join(es)}" for b, es in by_buf.items()]
        return "\n".join(lines)

    def to_dot(self) -> str:
        out = ["digraph ftg {"]
        out += [f'  n{n.index} [label="{n.kind}"];' for n in self.nodes]
        out += [f'  n{e.src} -> n{e.dst} [label="{e.buffer.name}"];' for e in self.edges]
        return "\n".join(out + ["}"])


def _parallel_access(loop: ParallelLoop) -> tuple[tuple[Buffer, ...], tuple[Buffer, ...]]:
    reads: dict[Buffer, None] = {}
    writes: dict[Buffer, None] = {}
    for s in walk(loop.body):
        for root in stmt_exprs(s):
            for e in walk_expr(root):
                if isinstance(e, BufferLoad):
                    reads[e.buffer] = None
        if isinstance(s, BufferStore):
            writes[s.buffer] = None
    return tuple(reads), tuple(writes)


def build_ftg(func: PrimFunc) -> FTG:
    nodes: list[FTGNode] = []

    def visit(s: Stmt, loops: tuple[Stmt, ...]) -> None:
        if isinstance(s, ParallelLoop):
            r, w = _parallel_access(s)
            nodes.append(FTGNode(len(nodes), s, r, w, loops))
            return
        if isinstance(s, TileOp):
            if not isinstance(s, (UseSwizzle, AnnotateLayout)):
                nodes.append(FTGNode(len(nodes), s, tuple(dict.fromkeys(r.buffer for r in s.reads())),
                                     tuple(dict.fromkeys(r.buffer for r in s.writes())), loops))
            return
        from .stmt import For

        inner = loops + (s,) if isinstance(s, For) else loops
        for c in stmt_children(s):
            visit(c, inner)

    visit(func.body, ())
    edges = [FTGEdge(w.index, r.index, b) for w in nodes for b in w.writes
             for r in nodes if r is not w and b in r.reads]
    return FTG(tuple(nodes), tuple(edges))
