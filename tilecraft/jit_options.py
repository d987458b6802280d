"""The keywords of `tilecraft.jit` / `tilecraft.compile`: exactly the ones honoured, checked.

A keyword tilecraft does not know is TC111 with the closest valid name. A keyword TileLang's jit
takes and tilecraft does not honour is accepted only with its "do nothing" value (None, False,
an empty dict or list, `execution_backend="auto"`); any other value is TC113 with a hint of what to
use instead. Both point at the keyword in the user's call:

    @tilecraft.jit(out_idx=[-1], pass_configs={"tl.disable_tma_lower": True})
                                 ^^^^^^^^^^^^ error[TC113]: ... a TileLang option tilecraft does
                                              not honour
"""

from __future__ import annotations

import difflib
import inspect
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tilecraft.diagnostics import Span, TilecraftError

TARGETS = ("auto", "cuda", "interp")

#: TileLang jit/compile keywords tilecraft does not honour -> (accepted no-op values, hint).
TILELANG_ONLY: dict[str, tuple[tuple[Any, ...], str]] = {
    "execution_backend": (
        (None, "auto"),
        "tilecraft launches every kernel through the CUDA driver (cuLaunchKernelEx); there is no "
        "backend to choose: drop the argument",
    ),
    "target_host": (
        (None,),
        "the host side of a tilecraft kernel is Python: drop the argument",
    ),
    "verbose": (
        (None, False),
        "see what is built with kernel.get_kernel_source() and kernel.script(), or set "
        "TILECRAFT_DUMP_IR=<dir> to write the IR after every pass",
    ),
    "pass_configs": (
        (None, {}),
        "tilecraft has no pass configs; its code-generation switches are environment variables "
        "(TILECRAFT_TMA=0, TILECRAFT_WGMMA=0, TILECRAFT_WS=0 for no producer warpgroup, ...; "
        "docs/compiler.md)",
    ),
    "compile_flags": (
        (None, [], (), ""),
        "tilecraft picks the NVRTC flags itself (the target comes from `arch`); drop the argument",
    ),
}

_TARGET_HINTS = {
    "llvm": "tilecraft runs kernels on the CPU with its interpreter: target='interp'",
    "c": "tilecraft runs kernels on the CPU with its interpreter: target='interp'",
    "cpu": "tilecraft runs kernels on the CPU with its interpreter: target='interp'",
    "hip": "tilecraft has no AMD backend yet",
    "rocm": "tilecraft has no AMD backend yet",
}


def user_frame() -> Any:
    """The innermost stack frame outside the tilecraft package (the user's call), or None."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
    return frame


def call_span(keyword: str | None = None) -> Span | None:
    """The span of the user's current call; with `keyword`, of `keyword=` in it when found."""
    frame = user_frame()
    if frame is None:
        return None
    pos = inspect.getframeinfo(frame, context=0).positions
    file = frame.f_code.co_filename
    line = (pos.lineno if pos and pos.lineno else None) or frame.f_lineno
    if keyword is not None and pos is not None and pos.lineno:
        import linecache

        for n in range(pos.lineno, (pos.end_lineno or pos.lineno) + 1):
            col = linecache.getline(file, n).find(keyword + "=")
            if col >= 0:
                return Span(file, n, col, col + len(keyword))
    col = pos.col_offset if pos and pos.col_offset is not None else 0
    end = pos.end_col_offset if pos and pos.end_lineno == line else None
    return Span(file, line, col, end)


def refuse_unknown(func: str, unknown: Mapping[str, Any], valid: Sequence[str]) -> None:
    """TC111 for the first keyword of `unknown`; TC113 for a TileLang-only keyword whose value
    would have to do something. Returns when every keyword is a TileLang no-op."""
    for name, value in unknown.items():
        if name in TILELANG_ONLY:
            noops, hint = TILELANG_ONLY[name]
            if any(value is v or (type(value) is type(v) and value == v) for v in noops):
                continue
            raise TilecraftError("TC113", span=call_span(name), func=func, keyword=name,
                                 value=_short(value), hint=hint)
        close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
        suggest = f"did you mean `{close[0]}`? " if close else ""
        raise TilecraftError("TC111", span=call_span(name), func=func, keyword=name,
                             suggest=suggest, params=", ".join(f"`{v}`" for v in valid))


def check_target(func: str, target: Any) -> None:
    """TC108 unless `target` is one of TARGETS."""
    if isinstance(target, str) and target in TARGETS:
        return
    spelled = target.split()[0].lower() if isinstance(target, str) and target.split() else ""
    hint = _TARGET_HINTS.get(spelled)
    if hint is None:
        close = difflib.get_close_matches(str(target), TARGETS, n=1, cutoff=0.5)
        hint = (f"did you mean '{close[0]}'? " if close else "") + (
            "'auto' follows the tensors, 'cuda' always builds for the GPU (the arch comes from "
            "`arch=` or the GPU), 'interp' always runs the CPU interpreter")
    raise TilecraftError("TC108", span=call_span("target"),
                         detail=f"{func}(target={target!r}): the target is one of {TARGETS}",
                         hint=hint)


def check_out_idx(func: str, out_idx: Any) -> None:
    """TC108 unless `out_idx` is None, an int or a list/tuple of ints."""
    items = [out_idx] if isinstance(out_idx, int) else out_idx
    if out_idx is None or (
        isinstance(items, (list, tuple))
        and all(isinstance(i, int) and not isinstance(i, bool) for i in items)
    ):
        return
    raise TilecraftError("TC108", span=call_span("out_idx"),
                         detail=f"{func}(out_idx={out_idx!r})",
                         hint="out_idx is a parameter index or a list of them: out_idx=[-1]")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
