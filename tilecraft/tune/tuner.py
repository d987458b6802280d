"""`@tilecraft.autotune`: time a factory's candidate configurations on the GPU, keep the fastest.

    @tilecraft.autotune(topk=8)              # or configs=[{...}, ...], or space={"block_M": [...]}
    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, ...): ...
    kernel = matmul(4096, 4096, 4096)        # the first call with these arguments tunes
    matmul.last_result                       # a TuneResult: each candidate's ms, the winner

One call (`tune`), unless it passes every keyword the space would tune (then it is the plain
factory's call):
  1. candidates: `configs` as given, else the configs of `recommend(factory, *args, space=space,
     topk=topk, **fixed)`; keywords the caller passes are fixed, not tuned;
  2. without timing (`TILECRAFT_AUTOTUNE=0`, no CUDA GPU, the interpreter, or a single candidate:
     `topk=1`, the recommender's best, as `tilecraft.jit(autotune="recommend")` asks): the
     first candidate;
  3. the table (table.py): a winner an earlier process kept is built, not timed (a JSON read and
     a jit-cache hit; the recommender does not run);
  4. else each candidate is built and compiled in threads (NVRTC leaves the GIL), then timed one
     after another by its profiler on one set of inputs; one that fails is warned about
     (AutotuneWarning) and skipped, all failing is TC331; the fastest goes to the table.
`tune_factory` is step 1-4 for any caller (`tilecraft.jit(..., autotune=True)`); the decorator
adds a memory per decorated factory. A tqdm bar shows compiling and timing when tqdm is there.
"""

from __future__ import annotations

import importlib
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from tilecraft.diagnostics import TilecraftError
from tilecraft.jit import JITKernel, _interpret_forced
from tilecraft.jit_cache import enabled as jit_cache_enabled
from tilecraft.jit_options import call_span

from . import table
from .autotuned import (
    Autotuned,
    TuneOptions,
    autotune,
    check_fixed,
    check_keywords,
    nothing_to_tune,
)
from .table import Timing

__all__ = [
    "AutotuneWarning",
    "Autotuned",
    "TuneOptions",
    "TuneResult",
    "autotune",
    "tune",
    "tune_factory",
]


class AutotuneWarning(UserWarning):
    """A candidate configuration failed to build, compile or run; autotune skipped it."""


@dataclass(frozen=True)
class TuneResult:
    """What one autotuned call did: the kernel, the winning config and how it was chosen."""

    kernel: JITKernel
    config: dict[str, Any]  # the winner's tuned keywords (the first candidate when untimed)
    ms: float | None  # the winner's milliseconds per call; None when nothing was timed
    timings: tuple[Timing, ...]  # each candidate's ms or error (the table's, when from_table)
    from_table: bool  # the winner came from the table: nothing was timed in this process
    untimed: str | None  # why nothing was timed ("no CUDA GPU", ...), or None
    key: str | None  # the table key; None when the call cannot be keyed (or untimed)


def tune_factory(jit_factory: Any, args: tuple, kwargs: dict, **options: Any) -> JITKernel:
    """The tuned JITKernel of `jit_factory(*args, **kwargs)`; `options` are autotune's keywords
    (configs, space, topk, warmup, rep, progress), checked here."""
    checked = TuneOptions.create(**options)
    check_keywords(jit_factory, checked)
    return tune(jit_factory, args, kwargs, checked).kernel


def tune(jit_factory: Any, args: tuple, kwargs: dict, options: TuneOptions) -> TuneResult:
    """Steps 1-4 of the module docstring for one call."""
    fixed = dict(kwargs)
    check_fixed(options.configs, fixed)
    if nothing_to_tune(jit_factory, args, fixed, options):
        kernel = jit_factory(*args, **fixed)
        return TuneResult(kernel, {}, None, (), False, "nothing to tune", None)
    untimed = _why_untimed(jit_factory) or _single(options)
    if untimed is not None:
        config = _first_candidate(jit_factory, args, fixed, options)
        kernel = jit_factory(*args, **fixed, **config)
        return TuneResult(kernel, config, None, (), False, untimed, None)
    gpu = _gpu_name()
    configs = None if options.configs is None else list(options.configs)
    key = None  # no table without the disk caches (as the jit cache: jit_cache.enabled)
    if jit_factory.cache and jit_cache_enabled():
        key = table.table_key(jit_factory, args, fixed, gpu, configs=configs,
                              space=options.space, topk=options.topk)
    record = table.load(key) if key is not None else None
    if record is not None:
        kernel = jit_factory(*args, **fixed, **record.config)
        return TuneResult(kernel, record.config, record.ms, record.timings, True, None, key)
    candidates = _candidates(jit_factory, args, fixed, options)
    timings, kernels = _measure(jit_factory, args, fixed, candidates, options)
    done = [(t.ms, i) for i, t in enumerate(timings) if t.ms is not None]
    name = jit_factory.factory.__name__
    if not done:
        raise TilecraftError(
            "TC331",
            span=call_span(),
            func=name,
            count=len(timings),
            first=timings[0].error,
            hint="the AutotuneWarnings above name each configuration and its error; give "
            "configurations that build and run",
        )
    ms, best = min(done)
    config = timings[best].config
    if key is not None:
        record = table.TuneRecord.now(config, ms, tuple(timings), gpu)
        table.save(key, record, factory=f"{jit_factory.factory.__module__}.{name}")
    return TuneResult(kernels[best], config, ms, tuple(timings), False, None, key)


# ---- the candidates --------------------------------------------------------------------------
def _first_candidate(jit_factory: Any, args: tuple, fixed: dict, options: TuneOptions
                     ) -> dict[str, Any]:
    """The untimed pick: `configs[0]`, else the recommender's best for the target. Ranking
    takes seconds, so the best is kept in the table under the target's cost model (the key
    holds tilecraft's sources, the model's included) and a later process reads it back."""
    if options.configs is not None:
        return dict(options.configs[0])
    target = _target(jit_factory)
    model = f"cost model: {target.name} ({target.arch})"
    key = None
    if jit_factory.cache and jit_cache_enabled():
        key = table.table_key(jit_factory, args, fixed, model, configs=None,
                              space=options.space, topk=1)
    record = table.load(key) if key is not None else None
    if record is not None:
        return record.config
    ranked = _ranked(jit_factory, args, fixed, options, target)
    config = dict(ranked[0].config)
    if key is not None:
        ms = ranked[0].predicted_time * 1e3
        table.save(key, table.TuneRecord.now(config, ms, (), model),
                   factory=f"{jit_factory.factory.__module__}.{jit_factory.factory.__name__}")
    return config


def _candidates(
    jit_factory: Any, args: tuple, fixed: dict, options: TuneOptions
) -> list[dict[str, Any]]:
    if options.configs is not None:
        return [dict(c) for c in options.configs]
    ranked = _ranked(jit_factory, args, fixed, options, _target(jit_factory))
    return [dict(c.config) for c in ranked][: options.topk]


def _ranked(jit_factory: Any, args: tuple, fixed: dict, options: TuneOptions, target: Any
            ) -> list[Any]:
    """recommend()'s candidates (TC330 when it returns none)."""
    recommend = importlib.import_module("tilecraft.tune").recommend  # ranking.py's, looked up
    found = list(recommend(jit_factory, *args, space=options.space, topk=options.topk,
                           target=target, **fixed))
    if not found:
        raise TilecraftError(
            "TC330",
            span=call_span(),
            detail=f"`{jit_factory.factory.__name__}` has no candidate configuration",
            hint="give autotune configs=[...]",
        )
    return found


def _single(options: TuneOptions) -> str | None:
    """"one candidate" when there is nothing to compare, else None."""
    count = options.topk if options.configs is None else len(options.configs)
    return "one candidate" if count == 1 else None


def _target(jit_factory: Any) -> Any:
    """The target the recommender ranks for: the jit's `arch=`, else `current_target()`."""
    from tilecraft.targets import current_target, target_from_arch

    arch = jit_factory.options.get("arch")
    return target_from_arch(arch) if arch else current_target()


def _why_untimed(jit_factory: Any) -> str | None:
    """Why this call is not timed (the first candidate is taken), or None."""
    if os.environ.get("TILECRAFT_AUTOTUNE", "1").lower() in ("0", "false", "off", "no"):
        return "TILECRAFT_AUTOTUNE=0"
    if jit_factory.options.get("target") == "interp" or _interpret_forced():
        return "the interpreter"
    try:
        import torch
    except ImportError:
        return "no torch"
    return None if torch.cuda.is_available() else "no CUDA GPU"


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


# ---- building and timing ---------------------------------------------------------------------
def _measure(
    jit_factory: Any, args: tuple, fixed: dict, candidates: list[dict], options: TuneOptions
) -> tuple[list[Timing], list[Any]]:
    """Each candidate's Timing and JITKernel (None where it failed); failures are warned."""
    name = jit_factory.factory.__name__
    bar = _bar(2 * len(candidates), f"autotune {name}", options.progress)
    try:
        built = _build_all(jit_factory, args, fixed, candidates, bar)
        ok = [i for i, k in enumerate(built) if isinstance(k, JITKernel)]
        bar.update(len(candidates) - len(ok))
        bar.set_description(f"autotune {name}: timing")
        pairs = [(candidates[i], built[i]) for i in ok]
        times = _time_candidates(pairs, options.warmup, options.rep, bar)
    finally:
        bar.close()
    outcome: list[Any] = list(built)
    for i, t in zip(ok, times):
        outcome[i] = t
    timings: list[Timing] = []
    kernels: list[Any] = []  # a JITKernel, or None where it failed
    for config, got, kernel in zip(candidates, outcome, built):
        if isinstance(got, BaseException):
            timings.append(Timing(config, error=_first_line(got)))
            kernels.append(None)
            _warn_failed(jit_factory, config, _first_line(got))
        else:
            timings.append(Timing(config, ms=float(got)))
            kernels.append(kernel)
    return timings, kernels


def _build_all(
    jit_factory: Any, args: tuple, fixed: dict, candidates: list[dict], bar: Any
) -> list[Any]:
    """Each candidate's compiled JITKernel, or the exception its build raised (in threads)."""

    def build(config: dict) -> Any:
        try:
            kernel = jit_factory(*args, **fixed, **config)
            _compile(kernel)
            return kernel
        except Exception as err:  # noqa: BLE001 - reported and skipped, never fatal
            return err

    workers = max(1, min(len(candidates), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tilecraft-autotune") as pool:
        futures = [pool.submit(build, c) for c in candidates]
        for _ in as_completed(futures):
            bar.update()
    return [f.result() for f in futures]


def _compile(kernel: JITKernel) -> None:
    kernel._cuda_kernel()


def _time_candidates(
    built: list[tuple[dict, JITKernel]], warmup: float, rep: float, bar: Any
) -> list[float | BaseException]:
    """Milliseconds per call of each kernel (or what it raised), one after another, all on the
    inputs the first kernel's profiler makes."""
    inputs = None
    out: list[float | BaseException] = []
    for _config, kernel in built:
        try:
            prof = kernel.get_profiler()
            if inputs is None:
                inputs = prof.make_inputs()
            out.append(float(prof.do_bench(warmup=warmup, rep=rep, input_tensors=inputs)))
        except Exception as err:  # noqa: BLE001 - reported and skipped, never fatal
            out.append(err)
        bar.update()
    return out


def _first_line(err: BaseException) -> str:
    """The error's first line (a TilecraftError's names its code; others get their type)."""
    lines = str(err).strip().splitlines()
    line = lines[0] if lines else ""
    if isinstance(err, TilecraftError):
        return line
    return f"{type(err).__name__}: {line}" if line else type(err).__name__


def _warn_failed(jit_factory: Any, config: dict, error: str) -> None:
    from tilecraft.runtime.errors import warn_at_caller

    call = ", ".join(f"{k}={v!r}" for k, v in config.items())
    warn_at_caller(
        f"tilecraft.autotune: {jit_factory.factory.__name__}({call}) failed and is "
        f"skipped: {error}",
        AutotuneWarning,
    )


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, desc: str, progress: bool) -> Any:
    """A tqdm bar when `progress` and tqdm is installed, else one that shows nothing."""
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return _NoBar()
        return tqdm(total=total, desc=f"{desc}: compiling", leave=False)
    return _NoBar()


