"""The strict language surface: every `T.*` function takes exactly the arguments it honours.

`strict(fn, "T.gemm")` wraps a language function (tilecraft.language wraps every public one):
  * an unknown keyword is TC111 at the user's line, naming the closest valid parameter
    (`T.gemm(..., transpose_b=True)` -> "did you mean `transpose_B`?");
  * too many or missing arguments are TC112 with the signature, never a bare TypeError;
  * a keyword TileLang accepts but tilecraft does not implement (TILELANG_ONLY) is accepted
    with its default value and is TC113 with a hint for any other value;
  * called outside a kernel parse (a `T.Tensor` annotation at `def` time), errors point at
    the caller's line; a TilecraftError leaves with the user's frames only (`entry_point`).

`int_arg` and `flag` check the integer and compile-time boolean arguments of the language.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any

from tilecraft.diagnostics import TilecraftError, at_span, current_span
from tilecraft.diagnostics.errors import caller_span, entry_point

_DROP = "; drop it"
_TMA = ("tilecraft chooses TMA itself, only where it is legal (whole swizzled 16-bit tiles, "
        "and staged 8-bit ones, loaded in a T.Pipelined loop on sm_90a), and TILECRAFT_TMA=0 "
        "turns it off for a build" + _DROP)
_ANNOTATIONS = "tilecraft reads no per-op annotations" + _DROP
_PARALLEL = {
    "coalesced_width": ((None,), "tilecraft picks vector widths from the inferred layouts" + _DROP),
    "loop_layout": ((None,), "fix the layout of a fragment the loop writes with "
                    "T.annotate_layout instead"),
    "prefer_async": ((None, False), "cp.async is used in T.Pipelined loops only" + _DROP),
    "annotations": ((None,), _ANNOTATIONS),
}
_REDUCE = {
    "batch": ((1,), "tilecraft chooses how reductions are batched" + _DROP),
    "nan_propagate": ((True,), "tilecraft's max/min reductions always propagate NaN, on every "
                      "backend (docs/language.md, Semantics)" + _DROP),
    "annotations": ((None,), _ANNOTATIONS),
}
_LOOP = {"annotations": ((None,), _ANNOTATIONS)}

#: T name -> keyword -> (the accepted values, which mean what tilecraft does; hint otherwise)
TILELANG_ONLY: dict[str, dict[str, tuple[tuple, str]]] = {
    "copy": {
        "coalesced_width": ((None,), "tilecraft picks vector widths from the layouts of both "
                            "sides (16-byte accesses where the tile allows)" + _DROP),
        "eviction_policy": ((None,), "tilecraft emits no cache eviction hints" + _DROP),
        "annotations": ((None,), _ANNOTATIONS),
        "loop_layout": ((None,), "fix the layout of the fragment side with T.annotate_layout"),
    },
    "gemm": {
        "k_pack": ((1,), "k_pack is an AMD MFMA option; it has no effect on NVIDIA GPUs" + _DROP),
        "wg_wait": ((0,), "tilecraft has no asynchronous wgmma without a wait: every T.gemm "
                    "completes before the next statement (T.Pipelined overlaps the loads)"
                    + _DROP),
        "mbar": ((None,), "mbar is for Blackwell tcgen05 MMAs, which tilecraft does not emit"
                 + _DROP),
    },
    "Kernel": {
        "is_cpu": ((False,), "a tilecraft kernel runs on the CPU interpreter unchanged (CPU "
                   "tensors, or tilecraft.jit(target='interp'))" + _DROP),
        "prelude": ((None,), "injecting C source into the kernel is not supported yet" + _DROP),
        "cluster_dims": ((None, 1, (1,), (1, 1), (1, 1, 1), [1, 1, 1]),
                         "thread block clusters are not supported yet" + _DROP),
    },
    "Parallel": _PARALLEL,
    "Pipelined": {
        "sync": ((None, []), "tilecraft places the pipeline's barriers itself" + _DROP),
        "annotations": ((None,), _ANNOTATIONS),
    },
    "serial": _LOOP,
    "vectorized": _LOOP,
    "unroll": {
        **_LOOP,
        "explicit": ((False,), "tilecraft asks the CUDA compiler to unroll (#pragma unroll)"
                     + _DROP),
        "unroll_factor": ((None,), "T.unroll unrolls fully; use T.serial for a rolled loop"),
    },
    **{f"reduce_{k}": _REDUCE for k in ("sum", "max", "min", "abssum", "absmax")},
    "reduce": _REDUCE,
    "atomic_add": {"use_tma": ((False,), _TMA)},  # (memory_order, return_prev: tileops.py)
    "alloc_shared": {"scope": (("shared.dyn", "shared"), "T.alloc_shared allocates in shared "
                               "memory; use T.alloc_fragment / T.alloc_local for registers")},
    "alloc_fragment": {"scope": (("local.fragment",), "use T.alloc_shared / T.alloc_local for "
                                 "another scope")},
    "alloc_local": {"scope": (("local",), "use T.alloc_shared / T.alloc_fragment for another "
                              "scope")},
    "alloc_var": {"scope": (("local.var",), "a T.alloc_var lives in a register")},
    "Tensor": {
        **{k: ((None,), "tilecraft tensor parameters are dense row-major tensors" + _DROP)
           for k in ("data", "strides", "elem_offset", "axis_separators")},
        "scope": (("global",), "kernel parameters live in global memory"),
        **{k: ((0,), "tilecraft checks alignment itself" + _DROP) for k in ("align",
                                                                           "offset_factor")},
        "buffer_type": (("",), "tilecraft tensor parameters are dense row-major" + _DROP),
    },
    "print": {k: ((0,), "T.print prints a tile once per block, from thread 0" + _DROP)
              for k in ("warp_group_id", "warp_id")},
    "device_assert": {"no_stack_info": ((False,), "the message is the user's line" + _DROP)},
}
TILELANG_ONLY["Buffer"] = TILELANG_ONLY["Tensor"]


def _is_default(value: Any, accepted: tuple) -> bool:
    for a in accepted:
        if value is a:
            return True
        if type(value) in (bool, int, str, tuple, list) and type(value) is type(a) and value == a:
            return True
    return value == {} if isinstance(value, dict) else False


def signature_text(sig: inspect.Signature) -> str:
    """`(A, B, C, transpose_A=False, ...)`: the signature without annotations."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _bad_call(name: str, sig: inspect.Signature, args: tuple, kwargs: dict,
              err: TypeError) -> TilecraftError:
    params = sig.parameters
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for kw in kwargs:
        if kw not in params and not has_var_kw:
            close = difflib.get_close_matches(kw, named, n=1, cutoff=0.5)
            if not close:
                lower = [n for n in named if n.lower() == kw.lower()]
                close = lower[:1]
            suggest = f"did you mean `{close[0]}`? " if close else ""
            return TilecraftError("TC111", func=name, keyword=kw, suggest=suggest,
                                  params=signature_text(sig))
    return TilecraftError("TC112", func=name, detail=_why(sig, args, err),
                          signature=signature_text(sig))


def _why(sig: inspect.Signature, args: tuple, err: TypeError) -> str:
    """sig.bind's complaint in the user's words."""
    text = str(err)
    quoted = text.rsplit(" ", 1)[-1].strip("'")
    if text.startswith("missing a required argument"):
        return f"the argument `{quoted}` is missing"
    if text.startswith("multiple values for argument"):
        return f"`{quoted}` is given twice (by position and by keyword)"
    if text.startswith("too many positional arguments"):
        most = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                   for p in sig.parameters.values())
        return f"{len(args)} positional arguments, but it takes at most {most}"
    return text


def check_option(name: str, keyword: str, value: Any) -> None:
    """TC113 unless `value` of TileLang keyword `keyword` of `name` ("T.copy") is accepted."""
    accepted, hint = TILELANG_ONLY[name.removeprefix("T.")][keyword]
    if not _is_default(value, accepted):
        raise TilecraftError("TC113", func=name, keyword=keyword, value=repr(value), hint=hint)


def strict(fn: Callable, name: str) -> Callable:
    """`fn` as the language function `name` (e.g. "T.copy"), with strict argument checking."""
    sig = inspect.signature(fn)
    short = name.removeprefix("T.")
    tilelang = TILELANG_ONLY.get(short, {})

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        span = current_span()
        with at_span(span if span is not None else caller_span()):
            for kw in [k for k in kwargs if k in tilelang and k not in sig.parameters]:
                check_option(name, kw, kwargs.pop(kw))
            try:
                sig.bind(*args, **kwargs)
            except TypeError as err:
                raise _bad_call(name, sig, args, kwargs, err) from None
            return fn(*args, **kwargs)

    wrapper.__signature__ = sig  # type: ignore[attr-defined]
    checked = entry_point(wrapper)
    checked.__tc_strict__ = True  # type: ignore[attr-defined]
    return checked


@functools.lru_cache(maxsize=1024)
def _signature(fn: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature
        return None


def check_call(fn: Any, args: list, kwargs: dict) -> None:
    """TC111/TC112 at the current line when `fn(*args, **kwargs)` does not fit `fn`'s signature
    (a helper function or a tilecraft.layout function called in a kernel), instead of
    Python's TypeError; the language's own functions check themselves (`strict`)."""
    if getattr(fn, "__tc_strict__", False) or not callable(fn):
        return
    try:
        sig = _signature(fn)
    except TypeError:  # unhashable callable
        return
    if sig is None:
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as err:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        module = getattr(fn, "__module__", "") or ""
        if module.startswith("tilecraft.layout"):
            name = f"T.layout.{name}"
        raise _bad_call(name, sig, tuple(args), kwargs, err) from None


def int_arg(value: Any, what: str, *, device: bool = True) -> Any:
    """`value` as an int (or an integer device expression when `device`), else TC211."""
    from tilecraft.ir import Const, Expr

    if isinstance(value, Const) and value.dtype.kind in ("int", "uint"):
        return int(value.value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if device and isinstance(value, Expr) and value.dtype.kind in ("int", "uint"):
        return value
    if isinstance(value, float) or (isinstance(value, Expr) and value.dtype.is_float):
        if isinstance(value, float):
            got, hint = f"the float {value!r}", "use `//` for integer division, or int(...)"
        else:
            got, hint = f"`{value}` ({value.dtype})", 'convert it: T.cast(x, "int32")'
    else:
        got = f"{value!r}" if not isinstance(value, Expr) else f"`{value}` ({value.dtype})"
        hint = "give a Python int" + (" or an integer expression" if device else "")
    if not device and isinstance(value, Expr):
        hint = "it must be known at compile time: give a Python int"
    raise TilecraftError("TC211", what=what, got=got, hint=hint)


def flag(value: Any, what: str) -> bool:
    """`value` as a compile-time bool (Python bool or 0/1), else TC108."""
    from tilecraft.ir import Const

    if isinstance(value, Const):
        value = value.value
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise TilecraftError("TC108", detail=f"{what}={value!r} is not a Python bool",
                         hint=f"{what} is decided at compile time: pass True or False")
