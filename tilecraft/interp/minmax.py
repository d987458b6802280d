"""max / min with the GPU's order of signed zeros: -0.0 < +0.0 (PTX max/min, IEEE 754-2019
maximum/minimum), NaN propagating. numpy's maximum/minimum return their second operand when
the operands compare equal, so max(+0.0, -0.0) would be -0.0 there."""

from __future__ import annotations

import numpy as np


def _is_float(x) -> bool:
    return np.asarray(x).dtype.kind == "f"


def maximum(a, b):
    r = np.maximum(a, b)
    if not (_is_float(a) or _is_float(b)):
        return r
    return np.where((a == b) & np.signbit(r), np.where(np.signbit(a), b, a), r)[()]


def minimum(a, b):
    r = np.minimum(a, b)
    if not (_is_float(a) or _is_float(b)):
        return r
    return np.where((a == b) & ~np.signbit(r), np.where(np.signbit(a), a, b), r)[()]


def max_along(x, axis):
    """The maximum of `x` along `axis`: +0.0 where the largest values are zeros of both signs."""
    r = np.max(x, axis=axis)
    if not _is_float(x):
        return r
    positive_zero = np.any((x == 0) & ~np.signbit(x), axis=axis)
    return np.where((r == 0) & positive_zero, np.zeros_like(r), r)


def min_along(x, axis):
    """The minimum of `x` along `axis`: -0.0 where the smallest values are zeros of both signs."""
    r = np.min(x, axis=axis)
    if not _is_float(x):
        return r
    negative_zero = np.any((x == 0) & np.signbit(x), axis=axis)
    return np.where((r == 0) & negative_zero, -np.zeros_like(r), r)
