"""Runtime errors.

User-facing argument errors are `TilecraftError`s from the diagnostics catalog (codes TC301-TC306),
raised as `LaunchArgumentError`, which is also a `ValueError`. Toolchain and driver failures are
`RuntimeError`s: they describe the machine, not the user's kernel.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

from ..diagnostics import TilecraftError

_PACKAGE = str(Path(__file__).resolve().parent.parent)


class LaunchArgumentError(TilecraftError, ValueError):
    """A kernel argument failed the checks made before launch (count, dtype, shape, device...)."""


class CacheCorruptionWarning(UserWarning):
    """A cached kernel on disk was damaged (truncated, overwritten, half gone); it is rebuilt."""


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """Issue `category` attributed to the innermost frame outside tilecraft (the user's call)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__", "tilecraft"),
                           registry=frame.f_globals.setdefault("__warningregistry__", {}))


class CudaToolkitNotFoundError(RuntimeError):
    """NVRTC or the CUDA headers could not be found."""


class CudaUnavailableError(RuntimeError):
    """A launch was requested on a machine (or device) that cannot run it."""


class CudaDriverError(RuntimeError):
    """A CUDA driver call returned something other than CUDA_SUCCESS."""

    def __init__(self, call: str, result: object, detail: str = ""):
        self.call = call
        self.result = result
        name = getattr(result, "name", str(result))
        super().__init__(f"{call} failed: {name}" + (f" ({detail})" if detail else ""))


class CudaCompileError(RuntimeError):
    """NVRTC rejected a CUDA source. `log` is NVRTC's log; `source` the source that failed.

    The message shows the log and, for every `name(line): error` in it, the source lines around it.
    """

    def __init__(
        self, name: str, arch: str, log: str, source: str, *, filename: str = "", context: int = 2
    ):
        self.name = name
        self.arch = arch
        self.log = log
        self.source = source
        self.filename = filename or f"{name}.cu"
        self.error_lines = _error_lines(log, self.filename)
        parts = [f"NVRTC failed to compile `{name}` for {arch}:", log.rstrip()]
        lines = source.splitlines()
        for ln in self.error_lines:
            lo, hi = max(1, ln - context), min(len(lines), ln + context)
            snippet = [
                f"{'>' if i == ln else ' '} {i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1)
            ]
            parts.append(f"--- {self.filename}:{ln} ---\n" + "\n".join(snippet))
        super().__init__("\n".join(parts))


def _error_lines(log: str, filename: str) -> list[int]:
    """Line numbers of `filename(LINE): error` / `catastrophic error` entries in an NVRTC log."""
    pat = re.compile(rf"^{re.escape(filename)}\((\d+)\): (?:catastrophic )?error", re.MULTILINE)
    seen: list[int] = []
    for m in pat.finditer(log):
        ln = int(m.group(1))
        if ln not in seen:
            seen.append(ln)
    return seen
