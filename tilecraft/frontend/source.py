"""Fetch a kernel function's source and parse it, keeping the user's file, lines and columns."""

from __future__ import annotations

import ast
import inspect
import textwrap
import threading
from dataclasses import dataclass

from tilecraft.diagnostics import Span


@dataclass(frozen=True)
class SourceInfo:
    file: str
    tree: ast.FunctionDef
    col_shift: int  # columns removed by dedent

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", 0) + self.col_shift
        end_line = getattr(node, "end_lineno", line)
        end = getattr(node, "end_col_offset", None)
        end_col = end + self.col_shift if end is not None and end_line == line else None
        return Span(self.file, line, col, end_col)


_PARSE = threading.Lock()


def parse_function_source(fn) -> SourceInfo:
    """Parse `fn`'s source into its FunctionDef, with line numbers as in the user's file."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise RuntimeError(
            f"tilecraft needs the source of `{fn.__name__}` to parse it as a kernel, but Python "
            f"cannot find it ({e}); define kernels in a .py file") from e
    raw = "".join(lines)
    dedented = textwrap.dedent(raw)
    first_raw = next((ln for ln in lines if ln.strip()), "")
    first_ded = next((ln for ln in dedented.splitlines(True) if ln.strip()), "")
    shift = len(first_raw) - len(first_raw.lstrip()) - (len(first_ded) - len(first_ded.lstrip()))
    with _PARSE:  # (CPython 3.11's ast.parse is not thread-safe: "AST constructor recursion
        module = ast.parse(dedented)  # depth mismatch" when two threads build kernels at once)
    ast.increment_lineno(module, first - 1)
    fdef = next(n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return SourceInfo(inspect.getsourcefile(fn) or "<unknown>", fdef, shift)
