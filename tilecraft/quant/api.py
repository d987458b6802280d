"""`tilecraft.quant.matmul(x, qweight, bias=None)`: x @ dequant(W).T (+ bias) on any leading shape.

    qw = tilecraft.quant.quantize(w, "uint4")          # w: (N, K)
    y = tilecraft.quant.matmul(x, qw, bias)            # x: (..., K) f16/bf16 -> y: (..., N)

The checks a user can fail are made here, before anything runs (TC321 at the user's line): a
`QuantizedWeight`, x a float16/bfloat16 torch tensor whose last dim is K, on the weight's device,
bias (N,) on that device. x is flattened to a contiguous (M, K) (M = the product of the leading
dims, any M >= 1; M = 0 gives an empty result without a launch), the bias is cast to x's dtype,
and the kernel entry `tilecraft.quant.qmm.quant_matmul(x2d, qweight, bias)` -> (M, N) computes
(on the interpreter for CPU tensors, on the GPU for CUDA tensors). Inference only: no autograd.
"""

from __future__ import annotations

from typing import Any

from tilecraft.diagnostics.errors import entry_point
from tilecraft.quant.quantized import QuantizedWeight, refuse

__all__ = ["matmul"]

_FUNC = "quant.matmul"


@entry_point
def matmul(x: Any, qweight: QuantizedWeight, bias: Any = None) -> Any:
    """`x @ qweight.dequantize().T (+ bias)` for x of shape (..., K) in float16 or bfloat16;
    the result has shape (..., N) and x's dtype (module docstring)."""
    import torch

    if not isinstance(qweight, QuantizedWeight):
        raise refuse(_FUNC, f"argument `qweight` is a {type(qweight).__name__}, not a "
                     "QuantizedWeight", "make one with tilecraft.quant.quantize(weight, dtype)")
    N, K = qweight.shape
    if not isinstance(x, torch.Tensor):
        raise refuse(_FUNC, f"argument `x` is a {type(x).__name__}, not a torch tensor")
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise refuse(_FUNC, f"argument `x` is {_name(x.dtype)}: the kernel takes float16 or "
                     "bfloat16 activations", "cast x with .half() or .bfloat16()")
    if x.dim() == 0 or x.shape[-1] != K:
        raise refuse(_FUNC, f"argument `x` has shape {tuple(x.shape)}, but the weight has shape "
                     f"(N, K) = {(N, K)}: x's last dim must be K = {K}")
    if x.device != qweight.device:
        raise refuse(_FUNC, f"argument `x` is on {x.device} but `qweight` on {qweight.device}",
                     "move one of them: qweight.to(x.device) or x.to(...)")
    if bias is not None:
        bias = _bias(bias, N, x)
    lead = tuple(x.shape[:-1])
    x2d = x.reshape(-1, K).contiguous()
    if x2d.shape[0] == 0:
        return x.new_empty(*lead, N)
    from tilecraft.quant.qmm import quant_matmul

    return quant_matmul(x2d, qweight, bias).reshape(*lead, N)


def _bias(bias: Any, N: int, x: Any) -> Any:
    import torch

    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
        raise refuse(_FUNC, f"argument `bias` must be a float torch tensor of shape ({N},), got "
                     f"{type(bias).__name__}" + (f" of {_name(bias.dtype)}"
                                                 if hasattr(bias, "dtype") else ""))
    if tuple(bias.shape) != (N,):
        raise refuse(_FUNC, f"argument `bias` has shape {tuple(bias.shape)}, expected ({N},) "
                     "(one value per output channel)")
    if bias.device != x.device:
        raise refuse(_FUNC, f"argument `bias` is on {bias.device} but `x` on {x.device}")
    return bias.detach().to(x.dtype).contiguous()


def _name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")
