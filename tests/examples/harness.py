"""Helpers for the example tests: run a kernel with NaN-poisoned outputs, compare against the
torch reference by relative error."""

from __future__ import annotations

import torch

import tilecraft
from tilecraft.ir import Var


def call_poisoned(kernel: tilecraft.JITKernel, *inputs: torch.Tensor):
    """Call `kernel` (prepared with out_idx) on `inputs`, but pass its outputs in pre-filled
    with NaN, so that an element the kernel forgets to write shows up."""
    func = kernel.func
    out_idx = kernel.out_idx
    in_params = [p for i, p in enumerate(func.params) if i not in out_idx]
    dims = {}
    for p, x in zip(in_params, inputs):
        for want, got in zip(getattr(p, "shape", ()), getattr(x, "shape", ())):
            if isinstance(want, Var):
                dims[want] = int(got)
    device = inputs[0].device
    args, it, outs = [], iter(inputs), []
    for i, p in enumerate(func.params):
        if i not in out_idx:
            args.append(next(it))
            continue
        shape = [dims[d] if isinstance(d, Var) else d for d in p.shape]
        out = torch.full(shape, float("nan"), dtype=p.dtype.torch_dtype, device=device)
        args.append(out)
        outs.append(out)
    tilecraft.compile(func, target=kernel.target)(*args)
    return outs[0] if len(outs) == 1 else tuple(outs)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref||, in float64 on the CPU."""
    out, ref = out.detach().double().cpu(), ref.detach().double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def assert_close(out: torch.Tensor, ref: torch.Tensor, tol: float) -> float:
    """No NaN in `out`, and relative error below `tol`; returns the error."""
    assert not torch.isnan(out).any(), f"{int(torch.isnan(out).sum())} NaN in the output"
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    err = rel_err(out, ref)
    assert err < tol, f"relative error {err:.3e} >= {tol:.0e}"
    return err
