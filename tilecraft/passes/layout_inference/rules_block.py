"""Declared layouts (strict, before any op's rule): what the user fixed, which the ops' rules
then follow (a gemm picks the warp partition whose accumulator layout it is: rules_gemm.py).

  * `T.annotate_layout({f: L})` and `T.alloc_fragment(..., layout=L)` (which emits one);
  * the Tilus level: every register tensor a block instruction names has that instruction's
    layout, so a register tensor used by a tile op or in T.Parallel (the fragment it stores)
    is fixed as strictly as a fragment allocated with `layout=`:

    r = T.load_global(A, layout=L)        r: L      (the Tilus instruction's layout)
    T.reduce_max(r, m, dim=1)             m: L.reduce(1)   (common, from r's)
"""

from __future__ import annotations

import dataclasses

from tilecraft.block import Instruction, RegisterTensor
from tilecraft.ir import AnnotateLayout, Stmt
from tilecraft.ir.visitor import walk


def _registers(s: Instruction):
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        for t in v if isinstance(v, tuple) else (v,):
            if isinstance(t, RegisterTensor):
                yield t


def declared_layouts(ctx, body: Stmt) -> None:
    """Give every fragment the user declared a layout for that layout (TC501 when two
    declarations disagree, naming both lines)."""
    from .rules import annotate_rule

    for s in walk(body):
        if isinstance(s, AnnotateLayout):
            annotate_rule(ctx, s, "strict")
        elif isinstance(s, Instruction):
            for t in _registers(s):
                ctx.set(t.buffer, t.layout, s, "the Tilus instruction's layout")
