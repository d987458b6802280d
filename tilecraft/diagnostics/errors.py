"""TilecraftError: every user-facing error, rendered with the user's file, line and a caret.

A TilecraftError leaves tilecraft through a public entry point (`T.prim_func`, every `T.*`
function, `tilecraft.jit`/`compile`, a kernel call) decorated with `entry_point`, which drops
tilecraft's own frames from its traceback: `python kernel.py` shows the user's lines, then the
message. The full traceback stays on the error as `err.internal_traceback` for debugging
tilecraft itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import string
import sys
import types
from collections.abc import Callable, Iterator
from typing import TypeVar

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
    """Issue `category` attributed to the user's line `span` (else to the innermost frame
    outside tilecraft)."""
    import warnings

    if span is None or not span.file or span.line <= 0:
        span = caller_span()
    if span is None:
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


# ---- user frames ------------------------------------------------------------------------------
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_F = TypeVar("_F", bound=Callable)


def is_internal_file(path: str) -> bool:
    """Whether `path` is one of tilecraft's own source files."""
    return os.path.abspath(path).startswith(_PACKAGE_DIR)


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """`tb` without the entries of tilecraft's own frames (the user's frames, in order)."""
    kept = []
    while tb is not None:
        if not is_internal_file(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    return _chain(kept, None)


def caller_span(skip=None) -> Span | None:
    """The span of the innermost frame on the stack outside tilecraft (the user's call);
    `skip(frame)`, when given, decides instead which frames are not the user's."""
    frame = sys._getframe(1)
    while frame is not None and (skip(frame) if skip is not None
                                 else is_internal_file(frame.f_code.co_filename)):
        frame = frame.f_back
    if frame is None:
        return None
    line, col, end = frame.f_lineno, 0, None
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if 0 <= index < len(positions):
        first, last, c0, c1 = positions[index]
        if first == line and c0 is not None:
            col, end = c0, (c1 if last == line else None)
    return Span(frame.f_code.co_filename, line, col, end)


def _chain(entries: list, tail: types.TracebackType | None) -> types.TracebackType | None:
    for entry in reversed(entries):
        tail = types.TracebackType(tail, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return tail


def _trim(err: TilecraftError) -> None:
    """Show only the user's frames of `err`; keep the whole traceback as internal_traceback
    (spliced across nested entry points: the part above the last trim + the full part below)."""
    tb, shown = err.__traceback__, getattr(err, "_shown_traceback", None)
    above = []
    while tb is not None and tb is not shown:
        above.append(tb)
        tb = tb.tb_next
    full = _chain(above, getattr(err, "internal_traceback", None))
    err.internal_traceback = full
    err._shown_traceback = user_traceback(full)
    err.__suppress_context__ = True
    err.with_traceback(err._shown_traceback)


def entry_point(fn: _F) -> _F:
    """Decorate a public entry point: a TilecraftError raised inside it leaves with the user's
    frames only (message first, no internal traceback); other exceptions pass untouched."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TilecraftError as err:
            _trim(err)
            raise  # a bare raise adds no frame of this wrapper

    return wrapper  # type: ignore[return-value]


TilecraftError.__module__ = "tilecraft"  # printed as `tilecraft.TilecraftError: error[...]`
