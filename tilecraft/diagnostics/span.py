"""Source spans: where in the user's file an IR node came from."""

from __future__ import annotations

import linecache

from tilecraft._frozen import Frozen, _set


class Span(Frozen):
    """A location in user source: file, 1-based line, 0-based column range (immutable; equal
    and hashed by value)."""

    __slots__ = ("file", "line", "col", "end_col")
    file: str
    line: int
    col: int
    end_col: int | None

    def __init__(self, file: str, line: int, col: int = 0, end_col: int | None = None) -> None:
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "col", col)
        _set(self, "end_col", end_col)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Span:
            return NotImplemented
        return (self.file, self.line, self.col, self.end_col) == (
            other.file, other.line, other.col, other.end_col)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.col, self.end_col))

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str:
        """The text of the user's line (empty when the file cannot be read)."""
        return linecache.getline(self.file, self.line).rstrip("\n")

    def render(self) -> str:
        """`--> file:line:col`, the source line and a caret under the span."""
        text = self.source_line()
        gutter = str(self.line)
        pad = " " * len(gutter)
        out = [f"  --> {self}"]
        if text:
            width = max(1, (self.end_col or self.col + 1) - self.col)
            width = min(width, max(1, len(text) - self.col))
            out += [
                f"{pad} |",
                f"{gutter} | {text}",
                f"{pad} | {' ' * self.col}{'^' * width}",
            ]
        return "\n".join(out)


UNKNOWN_SPAN = Span("<unknown>", 0)
