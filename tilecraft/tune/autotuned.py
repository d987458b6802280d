"""`@tilecraft.autotune` and `tilecraft.jit(autotune=...)`: the decorator, its checked options
and the wrapper a decorated factory becomes. Light on purpose (no dataclasses, the tuner
imported at the first call that tunes): every factory declared with `autotune=` imports it.
What a call does is tuner.py's.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
from typing import Any, NamedTuple

from tilecraft.diagnostics import TilecraftError
from tilecraft.diagnostics.errors import entry_point
from tilecraft.jit_factory import JITFactory
from tilecraft.jit_options import call_span
from tilecraft.options import switches_from_env

from .space import tunable_defaults

__all__ = ["Autotuned", "TuneOptions", "autotune", "check_fixed", "check_keywords",
           "check_options", "nothing_to_tune"]


class TuneOptions(NamedTuple):
    """autotune's keywords, checked (`create`): the candidates (`configs`, else the recommender's
    `topk` best over `space`), the profiler's `warmup`/`rep` milliseconds, a `progress` bar.
    (A NamedTuple, not a dataclass: this module is imported by every decorated factory, and a
    dataclass costs a millisecond to define.)"""

    configs: tuple[dict[str, Any], ...] | None = None
    space: dict[str, Any] | None = None
    topk: int = 10
    warmup: float = 25
    rep: float = 100
    progress: bool = True

    @classmethod
    def create(
        cls,
        configs: Any = None,
        space: Any = None,
        topk: Any = 10,
        warmup: Any = 25,
        rep: Any = 100,
        progress: bool = True,
    ) -> TuneOptions:
        """The options, or TC108 at the user's keyword when one is not what it must be."""
        check_options(configs, space, topk, warmup, rep)
        configs = None if configs is None else tuple(dict(c) for c in configs)
        return cls(configs, None if space is None else dict(space), topk, warmup, rep, progress)


@entry_point
def autotune(
    configs: Any = None,
    space: dict[str, list] | None = None,
    topk: int = 10,
    warmup: float = 25,
    rep: float = 100,
    progress: bool = True,
) -> Any:
    """Decorate a `@tilecraft.jit` factory so that its first call per argument set times the
    candidate configurations on the GPU and returns the fastest's JITKernel. On a factory that
    is already tuned (`tilecraft.jit(autotune="recommend")`), these options replace its own.

    `configs`: the candidates, a list of dicts of the factory's keywords (all timed, in order);
    else the recommender's `topk` best over `space` (name -> values; None: the defaults).
    `warmup`/`rep`: the profiler's milliseconds of warm-up and timing per candidate. `progress`:
    a tqdm bar, when tqdm is installed. After a call, `.last_result` is its TuneResult.
    """
    if isinstance(configs, (JITFactory, Autotuned)):  # bare @tilecraft.autotune
        return Autotuned(configs, TuneOptions())
    options = TuneOptions.create(configs, space, topk, warmup, rep, progress)

    @entry_point
    def decorate(jit_factory: Any) -> Autotuned:
        return Autotuned(jit_factory, options)

    return decorate


class Autotuned:
    """A `@tilecraft.jit` factory under `@tilecraft.autotune`: called like it, returns the tuned
    JITKernel (kept in memory per argument set); `last_result` is the last call's TuneResult
    (None after a call that passed every tunable keyword: nothing was tuned)."""

    def __init__(self, jit_factory: Any, options: TuneOptions) -> None:
        if isinstance(jit_factory, Autotuned):  # re-tuned: these options replace its own
            jit_factory = jit_factory.jit_factory
        if not isinstance(jit_factory, JITFactory):
            raise TilecraftError(
                "TC108",
                span=call_span(),
                detail=f"@tilecraft.autotune on a {type(jit_factory).__name__}",
                hint="put it above @tilecraft.jit(...) on a kernel factory: "
                "@tilecraft.autotune(...) then @tilecraft.jit(out_idx=[-1])",
            )
        check_keywords(jit_factory, options)
        self.jit_factory = jit_factory
        self.options = options
        self.last_result: Any = None  # the last call's tuner.TuneResult
        self._memory: dict[Any, Any] = {}
        functools.update_wrapper(self, jit_factory, updated=())

    def __getattr__(self, name: str) -> Any:
        """The jit factory's attributes (`.factory`, `.options`, ...) read through."""
        jit_factory = self.__dict__.get("jit_factory")
        if jit_factory is None:
            raise AttributeError(name)
        return getattr(jit_factory, name)

    @entry_point
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        options = self.options
        if nothing_to_tune(self.jit_factory, args, kwargs, options):
            # the plain factory's call, and the tuner is not imported (a process that loads
            # cached kernels never needs it)
            self.last_result = None
            return self.jit_factory(*args, **kwargs)
        from . import tuner  # looked up at call time: tests stand a GPU in for its functions

        why = tuner._why_untimed(self.jit_factory)
        try:
            key = (args, tuple(sorted(kwargs.items())), switches_from_env(), why,
                   os.environ.get("TILECRAFT_ARCH"))
            hash(key)
        except TypeError:
            key = None
        result = self._memory.get(key) if key is not None else None
        if result is None:
            result = tuner.tune(self.jit_factory, args, kwargs, options)
            if key is not None:
                self._memory[key] = result
        self.last_result = result
        return result.kernel


def nothing_to_tune(jit_factory: Any, args: tuple, kwargs: dict, options: TuneOptions) -> bool:
    """The call passes every keyword the default space would tune (no configs, no space)."""
    return options.configs is None and options.space is None and \
        not tunable_defaults(jit_factory.factory, args, kwargs)


# ---- the user's mistakes ---------------------------------------------------------------------
def check_options(configs: Any, space: Any, topk: Any, warmup: Any, rep: Any) -> None:
    """TC108 at the keyword when autotune's options are not what they must be."""
    if configs is not None and (
        not isinstance(configs, (list, tuple))
        or not configs
        or not all(isinstance(c, dict) and all(isinstance(k, str) for k in c) for c in configs)
    ):
        _refuse(
            "configs",
            configs,
            "configs is a non-empty list of dicts of the factory's "
            "keywords: configs=[{'block_M': 64}, {'block_M': 128}]",
        )
    if configs is not None and space is not None:
        _refuse(
            "space",
            space,
            "give the candidates (configs=) or the space the recommender ranks (space=), not both",
        )
    if space is not None and (
        not isinstance(space, dict)
        or not all(isinstance(v, (list, tuple)) and v for v in space.values())
    ):
        _refuse(
            "space",
            space,
            "space maps a keyword to its candidate values: "
            "space={'block_M': [64, 128], 'num_stages': [2, 3]}",
        )
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        _refuse("topk", topk, "topk is how many recommended configurations to time, an int >= 1")
    for name, value in (("warmup", warmup), ("rep", rep)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            _refuse(name, value, f"{name} is a number of milliseconds > 0")


def _refuse(keyword: str, value: Any, hint: str) -> None:
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    raise TilecraftError(
        "TC108", span=call_span(keyword), detail=f"tilecraft.autotune({keyword}={text})", hint=hint
    )


def check_keywords(jit_factory: Any, options: TuneOptions) -> None:
    """TC111 for a keyword in the options' `configs` or `space` that the factory does not take."""
    configs, space = options.configs, options.space
    params = inspect.signature(jit_factory.factory).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    valid = [n for n, p in params.items() if p.kind is not p.VAR_POSITIONAL]
    where = "configs" if configs is not None else "space"
    for name in [k for c in configs or () for k in c] + list(space or ()):
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
            raise TilecraftError(
                "TC111",
                span=call_span(where),
                func=jit_factory.factory.__name__,
                keyword=name,
                suggest=f"did you mean `{close[0]}`? " if close else "",
                params=", ".join(f"`{v}`" for v in valid),
            )


def check_fixed(configs: tuple[dict, ...] | None, fixed: dict) -> None:
    """TC108 at the keyword when the caller fixes a keyword that a config tunes."""
    for name in fixed:
        if any(name in c for c in configs or ()):
            raise TilecraftError(
                "TC108",
                span=call_span(name),
                detail=f"`{name}=` is passed to the call and also tuned by autotune's configs",
                hint=f"drop `{name}=` from the call, or from the configs",
            )
