"""A small Llama-style model (two RMSNorm + SwiGLU MLP blocks and an output projection, random
weights) converted with `tilecraft.nn.quantize_model`: every nn.Linear becomes a QuantLinear that
runs the quantized matmul (tilecraft.quant.matmul) on f16/bf16 activations.

The check: the quantized model's output against the same model in fp32 whose Linear weights are
the dequantized weights (`layer.qweight.dequantize()`): they differ only by the f16/bf16
arithmetic, so the relative error is small for every weight type. The error against the
original fp32 model (the quantization error itself, large for 2 bits) is printed beside it.

    python examples/quant_mlp.py           # on the GPU when torch sees one, else the interpreter
"""

import copy

import torch
from torch import nn

import tilecraft.nn


class LlamaMLP(nn.Module):
    """x + down(silu(gate(norm(x))) * up(norm(x)))."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


def build(dim: int, hidden: int, device: str, seed: int = 0) -> nn.Sequential:
    """Two blocks and an output projection with a bias, fp32, random weights."""
    torch.manual_seed(seed)
    model = nn.Sequential(LlamaMLP(dim, hidden), LlamaMLP(dim, hidden), nn.Linear(dim, dim))
    for block in model[:2]:
        nn.init.uniform_(block.norm.weight, 0.5, 1.5)
    return model.to(device)


def dequantized(model: nn.Module, qmodel: nn.Module) -> nn.Module:
    """`model` in fp32 with the weight of each quantized layer replaced by its dequantization."""
    ref = copy.deepcopy(model).float()
    for name, layer in qmodel.named_modules():
        if isinstance(layer, tilecraft.nn.QuantLinear):
            ref.get_submodule(name).weight.data = layer.qweight.dequantize()
    return ref


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def check(wtype: str, act: torch.dtype, device: str, dim: int, hidden: int, group: int) -> float:
    model = build(dim, hidden, device)
    qmodel = tilecraft.nn.quantize_model(copy.deepcopy(model), dtype=wtype, group_size=group)
    assert sum(isinstance(m, tilecraft.nn.QuantLinear) for m in qmodel.modules()) == 7
    qmodel = qmodel.to(act)  # the norms and the bias; the quantized weights keep their scales
    x = torch.randn(2, 3, dim, device=device)
    with torch.no_grad():
        y = qmodel(x.to(act))
        ref = dequantized(model, qmodel)(x)
        orig = model(x)
    err = rel_err(y, ref)
    name = str(act).replace("torch.", "")
    print(f"{wtype:12s} {name:8s} rel err {err:.2e} vs the dequantized fp32 model; "
          f"quantization error {rel_err(ref, orig):.3f} vs the original fp32 model")
    return err


def main(device: str = "cpu") -> dict[str, float]:
    """Relative errors per (weight type, activation dtype)."""
    if device == "cpu":  # the interpreter: tiny shapes, a few types
        dim, hidden, group = 64, 128, 64
        cases = [("uint4", torch.float16), ("int8", torch.bfloat16),
                 ("float4_e2m1", torch.float16)]
    else:
        dim, hidden, group = 1024, 2816, 128
        cases = [(t, a) for t in ("uint4", "int4", "uint2", "uint8", "float8_e4m3",
                                  "float6_e3m2", "float4_e2m1")
                 for a in (torch.float16, torch.bfloat16)]
    return {f"{t} {str(a)[6:]}": check(t, a, device, dim, hidden, group) for t, a in cases}


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
