"""examples/quant_mlp.py: a small Llama-style model converted with tilecraft.nn.quantize_model
matches the fp32 model built from the dequantized weights (relative error < 1e-2), on the
interpreter and (marked gpu) on the GPU."""

import quant_mlp

TOL = 1e-2


def test_quantized_llama_mlp_matches_the_dequantized_fp32_model(device, capsys):
    errors = quant_mlp.main(device)
    assert len(errors) >= 3 and {"uint4 float16", "float4_e2m1 float16"} <= set(errors)
    assert all(e < TOL for e in errors.values()), errors
    assert capsys.readouterr().out.count("rel err") == len(errors)
