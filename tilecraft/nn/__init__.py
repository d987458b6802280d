"""tilecraft.nn: torch modules backed by tilecraft kernels.

    import tilecraft.nn
    layer = tilecraft.nn.QuantLinear.from_linear(linear, dtype="uint4", group_size=128)
    model = tilecraft.nn.quantize_model(model, dtype="int8", skip=("lm_head",))

docs/quant.md describes the quantization and the modules. Importing this package imports torch.
"""

from tilecraft.nn.quant_linear import QuantLinear, quantize_model

__all__ = ["QuantLinear", "quantize_model"]
