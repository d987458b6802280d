"""Comparing a kernel's output with a reference's: `assert_close` and the message it gives.

An element matches when |kernel - reference| <= atol + rtol * |reference|, or when both are NaN, or
both the same infinity. A NaN (or infinity) on one side only never matches. Up to
`max_mismatched_ratio` of the elements may miss (0 by default). The message names the output,
counts the misses and gives the largest absolute and relative errors with their indices and values:

    output `C` of kernel `matmul` does not match the reference: 37 of 16384 elements (0.226%)
    differ by more than atol=0.01 + rtol=0.01 * |reference|
      max abs error 1.25 at [3, 17]: kernel 4.5, reference 3.25
      max rel error 0.385 at [3, 17]: kernel 4.5, reference 3.25
"""

from __future__ import annotations

from typing import Any


def as_float64(x: Any) -> Any:
    """A float64 numpy copy of a torch tensor, numpy array or number."""
    import numpy as np

    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        import torch

        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def assert_close(
    name: str,
    kernel_name: str,
    got: Any,
    want: Any,
    atol: float,
    rtol: float,
    max_mismatched_ratio: float = 0.0,
) -> None:
    """Raise AssertionError, explained, unless `got` matches `want` (see the module docstring)."""
    import numpy as np

    g, w = as_float64(got), as_float64(want)
    what = f"output `{name}` of kernel `{kernel_name}`"
    if g.shape != w.shape:
        raise AssertionError(f"{what} has shape {list(g.shape)}, the reference's has shape "
                             f"{list(w.shape)}")
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - w)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        ok = same | (diff <= atol + rtol * np.abs(w))
    bad = int((~ok).sum())
    if bad == 0 or bad <= max_mismatched_ratio * g.size:
        return
    lines = [f"{what} does not match the reference: {bad} of {g.size} elements "
             f"({100 * bad / g.size:.3g}%) differ by more than atol={atol} + rtol={rtol} * "
             "|reference|"]
    one_nan = np.isnan(g) != np.isnan(w)
    if one_nan.any():
        n_kernel = int((np.isnan(g) & ~np.isnan(w)).sum())
        n_ref = int((np.isnan(w) & ~np.isnan(g)).sum())
        lines.append(f"  NaN in the kernel's output only: {n_kernel}; in the reference's only: "
                     f"{n_ref} (first at {_index(np.argmax(one_nan), g.shape)})")
    err = np.where(ok, 0.0, diff)
    err = np.where(np.isnan(err), 0.0, err)
    if err.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(ok, 0.0, err / np.abs(w))
        rel = np.where(np.isnan(rel), 0.0, rel)
        for label, values in (("abs", err), ("rel", rel)):
            at = int(np.argmax(values))
            lines.append(f"  max {label} error {values.flat[at]:.4g} at {_index(at, g.shape)}: "
                         f"kernel {g.flat[at]:.6g}, reference {w.flat[at]:.6g}")
    raise AssertionError("\n".join(lines))


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    import numpy as np

    return [int(i) for i in np.unravel_index(int(flat), shape)] if shape else []
