"""The example kernels the backend must compile (and, on a GPU, run): (id, module, factory args)."""

import importlib
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CONFIGS = [
    ("gemm_partial", "gemm", "matmul", (200, 136, 72, 64, 64, 32), {}),
    ("gemm_relu", "gemm", "matmul", (256, 256, 128, 128, 128, 32), {"relu": True}),
    ("elementwise_add", "elementwise_add", "elementwise_add", (), {}),
    ("softmax", "softmax", "softmax", (50, 300), {}),
    ("rmsnorm_silu", "rmsnorm_silu", "rmsnorm_silu", (100, 160), {}),
    ("layernorm", "layernorm", "layernorm", (30, 96), {}),
    ("flash_attention", "flash_attention", "flash_attention", (1, 2, 256, 64, False),
     {"block_M": 128, "block_N": 64}),
    ("flash_attention_causal", "flash_attention", "flash_attention", (1, 2, 256, 64, True),
     {"block_M": 128, "block_N": 64}),
    ("splitk_gemm", "splitk_gemm", "splitk_gemm", (100, 72, 200), {"split_k": 3}),
    ("blocksparse_attention", "blocksparse_attention", "blocksparse_attention",
     (1, 2, 256, 64, False, 64, 64), {}),
    ("flash_mla", "flash_mla", "flash_mla", (2, 16, 1, 200, 64, 16),
     {"block_N": 32, "block_H": 16, "threads": 128}),
]
# Tilus-level low-precision examples (Figure 2 for every weight type, the Figure 9 transform and
# its inverse): compiled by test_compile_examples.py; not in CONFIGS, whose other users run the
# Tile IR interpreter, which does not run Tilus-level kernels (the block VM does)
LOWBIT_TYPES = ["int6", "uint1", "uint2", "uint3", "uint4", "uint8", "int4", "int8",
                "float8_e4m3", "float6_e3m2", "float4_e2m1", "float3_e1m1"]
LOWBIT_CONFIGS = [
    *[(f"tilus_lowbit_matmul_{t}", "tilus_lowbit_matmul", "matmul", (64, 64, 64, t), {})
      for t in LOWBIT_TYPES],
    ("tilus_lowbit_matmul_int6_scaled", "tilus_lowbit_matmul", "matmul", (64, 64, 64, "int6"),
     {"scale": True}),
    ("tilus_weight_transform_int6", "tilus_weight_transform", "transform_b", (64, 64, "int6"), {}),
    ("tilus_weight_transform_uint3", "tilus_weight_transform", "transform_b", (64, 64, "uint3"),
     {}),
    ("tilus_weight_restore_int6", "tilecraft.quant.kernels", "restore_b", (64, 64, "int6"), {}),
    *[(f"dequant_gemm_{t}", "dequant_gemm", "dequant_matmul", (1024, 1024, 2048, t), {})
      for t in ("uint4", "int4")],
]


def load(module: str):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(module)


def make(cfg):
    _, module, factory, args, kwargs = cfg
    return getattr(load(module), factory)(*args, **kwargs)
