"""TilecraftError: every user-facing error, rendered with the user's file, line and a caret."""

from __future__ import annotations

import contextlib
import contextvars
import string
from collections.abc import Iterator

from .catalog import CATALOG
from .span import Span

_current_span: contextvars.ContextVar[Span | None] = contextvars.ContextVar("tc_span", default=None)


class _Lenient(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fmt(template: str, fields: dict) -> str:
    return string.Formatter().vformat(template, (), _Lenient(fields))


class PerformanceWarning(UserWarning):
    """The kernel runs, but a build step found something that makes it slow (register spills)."""


def warn_at(message: str, span: Span | None, category: type[Warning] = PerformanceWarning) -> None:
    """Issue `category` attributed to the user's line `span` (else to the caller's caller)."""
    import warnings

    if span is None or not span.file or span.line <= 0:
        warnings.warn(message, category, stacklevel=3)
    else:
        warnings.warn_explicit(message, category, span.file, span.line, module="tilecraft")


class TilecraftError(Exception):
    """An error in the user's kernel or call, with a catalog code, a span and a hint.

    `TilecraftError("TC204", src="A", ...)` formats the catalog's message with the fields;
    `span` defaults to the span of the statement being processed.
    """

    def __init__(self, code: str, span: Span | None = None, *, notes: tuple = (), **fields):
        entry = CATALOG[code]
        self.code = code
        self.fields = fields
        self.span = span if span is not None else _current_span.get()
        self.message = _fmt(entry.title, fields)
        self.hint = _fmt(entry.hint, fields) if entry.hint else ""
        self.notes = tuple(notes)
        super().__init__(self.render())

    @property
    def file(self) -> str | None:
        return self.span.file if self.span else None

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    def render(self) -> str:
        out = [f"error[{self.code}]: {self.message}"]
        if self.span is not None:
            out.append(self.span.render())
        for note_span, note in self.notes:
            out.append(f"note: {note}")
            if note_span is not None:
                out.append(note_span.render())
        if self.hint:
            out.append(f"  = hint: {self.hint}")
        return "\n".join(out)


def current_span() -> Span | None:
    """The span of the user statement being processed, if any."""
    return _current_span.get()


@contextlib.contextmanager
def at_span(span: Span | None) -> Iterator[None]:
    """Make `span` the default location for errors raised inside the block."""
    token = _current_span.set(span)
    try:
        yield
    finally:
        _current_span.reset(token)
