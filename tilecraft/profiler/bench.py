"""do_bench: time a callable on the GPU with CUDA events (median of many runs, L2 flushed).

Semantics follow Triton's `do_bench`: `warmup` and `rep` are time budgets in milliseconds; the
number of runs is derived from a short estimate of one run. Before every timed run a 256 MB buffer
is zeroed so each run starts with a cold L2 (H100's L2 is 50 MB). Each run is bracketed by its own
pair of events on torch's current stream, so the flush is not timed.

Without a CUDA GPU the same loop runs with `time.perf_counter` (no flush); this times CPU work,
e.g. the interpreter, and keeps scripts runnable anywhere.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

_L2_FLUSH_BYTES = 256 * 1024 * 1024
_MODES = ("min", "max", "mean", "median", "all")
_flush_buffers: dict[int, object] = {}


def _flush_buffer(device: int):
    import torch

    buf = _flush_buffers.get(device)
    if buf is None:
        buf = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device=f"cuda:{device}")
        _flush_buffers[device] = buf
    return buf


def _summarise(times: list[float], return_mode: str) -> float | list[float]:
    if return_mode == "all":
        return times
    if return_mode == "median":
        return statistics.median(times)
    if return_mode == "mean":
        return statistics.fmean(times)
    return min(times) if return_mode == "min" else max(times)


def _counts(estimate_ms: float, warmup: float, rep: float, n_warmup: int = 0,
            n_repeat: int = 0) -> tuple[int, int]:
    """Iterations for `warmup` and `rep` milliseconds; n_warmup / n_repeat > 0 fix them."""
    per = max(estimate_ms, 1e-4)
    return (n_warmup if n_warmup > 0 else max(1, int(warmup / per)),
            n_repeat if n_repeat > 0 else max(1, int(rep / per)))


def do_bench(
    fn: Callable[[], object],
    warmup: float = 25,
    rep: float = 100,
    flush_l2: bool = True,
    return_mode: str = "median",
    max_runs: int = 10_000,
    n_warmup: int = 0,
    n_repeat: int = 0,
) -> float | list[float]:
    """Time `fn()`; returns milliseconds (median by default; "all" returns every run).
    `warmup`/`rep` are milliseconds; `n_warmup`/`n_repeat` > 0 give iteration counts instead."""
    if return_mode not in _MODES:
        raise ValueError(f"return_mode must be one of {_MODES}, got {return_mode!r}")
    if min(n_warmup, n_repeat) < 0:
        raise ValueError(f"n_warmup and n_repeat are counts >= 0, got {n_warmup}, {n_repeat}")
    import torch

    if not torch.cuda.is_available():
        return _bench_cpu(fn, warmup, rep, return_mode, max_runs, n_warmup, n_repeat)
    device = torch.cuda.current_device()
    flush = _flush_buffer(device) if flush_l2 else None
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if flush is not None:
            flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    n_warmup, n_rep = _counts(start.elapsed_time(end) / 5, warmup, rep, n_warmup, n_repeat)
    n_rep = min(n_rep, max_runs)
    for _ in range(n_warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        if flush is not None:
            flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return _summarise([s.elapsed_time(e) for s, e in zip(starts, ends)], return_mode)


def _bench_cpu(
    fn: Callable[[], object], warmup: float, rep: float, return_mode: str, max_runs: int,
    n_warmup: int = 0, n_repeat: int = 0,
) -> float | list[float]:
    t0 = time.perf_counter()
    fn()
    n_warmup, n_rep = _counts((time.perf_counter() - t0) * 1e3, warmup, rep, n_warmup, n_repeat)
    for _ in range(min(n_warmup, max_runs)):
        fn()
    times = []
    for _ in range(min(n_rep, max_runs)):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return _summarise(times, return_mode)
