"""Comparisons: a run's tensors against the model (within its error bounds, skipping
don't-care elements), and two runs against each other (bit-exact for integers)."""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from .values import V


def _describe(name: str, bad: np.ndarray, got, want, err=None, limit: int = 3) -> str:
    idx = list(zip(*np.nonzero(bad)))[:limit]
    parts = []
    for ix in idx:
        ix = tuple(int(i) for i in ix)
        w = f"{want[ix]}" + (f" +- {err[ix]:.3g}" if err is not None and err[ix] else "")
        parts.append(f"{list(ix)}: got {got[ix]} want {w}")
    return f"{name}: {int(bad.sum())} of {bad.size} wrong ({'; '.join(parts)})"


def against_model(expected: dict[str, V], got: dict[str, np.ndarray]) -> list[str]:
    """One line per tensor that differs from the model beyond its error bound."""
    out = []
    for name, want in expected.items():
        t = want.t
        arr = np.asarray(got[name])
        w = want.full(arr.shape)
        if t.is_float:
            g = arr.astype(np.float64)
            with np.errstate(all="ignore"):
                ok = (g == w.v) | (np.abs(g - w.v) <= w.e * 1.000001)
        else:
            g = D.from_numpy(arr, t)
            ok = np.asarray(g == w.v, dtype=bool)
        bad = ~ok & ~w.dc
        if bad.any():
            out.append(_describe(name, bad, g, w.v, w.e if t.is_float else None))
    return out


def between_runs(a: dict[str, np.ndarray], b: dict[str, np.ndarray], expected: dict[str, V],
                 names=("gpu", "interp")) -> list[str]:
    """GPU vs interpreter: integers bit-exact, floats within the model's bound (twice it:
    both runs may sit at opposite ends), don't-care elements of floats skipped."""
    out = []
    for name, want in expected.items():
        x, y = np.asarray(a[name]), np.asarray(b[name])
        w = want.full(x.shape)
        if want.t.is_float:
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            with np.errstate(all="ignore"):
                ok = (xf == yf) | (np.abs(xf - yf) <= 2 * w.e * 1.000001) | w.dc
                ok |= np.isnan(xf) & np.isnan(yf)
        else:
            ok = x == y
        if not ok.all():
            out.append(_describe(f"{name} ({names[0]} vs {names[1]})", ~ok, x, y))
    return out
