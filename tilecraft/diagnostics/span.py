"""Source spans: where in the user's file an IR node came from."""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A location in user source: file, 1-based line, 0-based column range."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None

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
