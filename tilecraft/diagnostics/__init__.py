"""Diagnostics: source spans, the error catalog and rendering with the user's line and a caret."""

from .catalog import CATALOG, Diagnostic
from .errors import PerformanceWarning, TilecraftError, at_span, current_span, warn_at
from .span import UNKNOWN_SPAN, Span

__all__ = ["CATALOG", "Diagnostic", "PerformanceWarning", "Span", "TilecraftError", "UNKNOWN_SPAN",
           "at_span", "current_span", "warn_at"]
