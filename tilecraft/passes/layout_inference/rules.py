"""The layout rules, found by node class (one file per op family)."""

from tilecraft.ir import AnnotateLayout, Copy, Gemm, ParallelLoop, Reduce

from .rules_copy import copy_rule
from .rules_gemm import gemm_rule
from .rules_parallel import parallel_accesses, parallel_rule
from .rules_reduce import reduce_rule


def annotate_rule(ctx, op: AnnotateLayout, level: str) -> None:
    """User layouts are strict. Shared-memory layouts are kept for codegen to honour."""
    if level != "strict":
        return
    from tilecraft.layout import Fragment

    for buf, layout in op.layouts:
        if isinstance(layout, Fragment) and buf.scope == "fragment":
            ctx.set(buf, layout, op, "T.annotate_layout")


RULES = {Gemm: gemm_rule, Copy: copy_rule, Reduce: reduce_rule, ParallelLoop: parallel_rule,
         AnnotateLayout: annotate_rule}

__all__ = ["RULES", "parallel_accesses"]
