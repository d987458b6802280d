"""Every example kernel is also a block program (lower_tile_ops); the block printer prints each
and, on the GPU, it gives what the Tile IR kernel gives there (the CUDA emitters print it today;
this is the path that replaces them). A config that stops printing must be listed in
NOT_PRINTED with its TC502 reason."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import CONFIGS, make

NOT_PRINTED: dict[str, str] = {}  # config -> the reason; every example prints now
SPILL = {"gemm_relu", "flash_attention", "flash_attention_causal"}  # SIMT staging: a baseline


def _program(cfg):
    return lowered_program(lower(make(cfg).func, H100_SXM))


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_every_example_prints_or_is_refused_at_a_line(cfg):
    if cfg[0] in NOT_PRINTED:
        with pytest.raises(TilecraftError) as e:
            print_cuda(_program(cfg))
        assert e.value.code == "TC502" and NOT_PRINTED[cfg[0]] in str(e.value)
        assert e.value.span is not None
        return
    source = print_cuda(_program(cfg)).source
    assert "__global__" in source


@pytest.mark.parametrize("name", ["gemm_partial", "softmax", "rmsnorm_silu", "layernorm",
                                  "flash_mla", "elementwise_add", "splitk_gemm"])
def test_printed_examples_compile_without_spills(name):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    printed = print_cuda(_program(next(c for c in CONFIGS if c[0] == name)))
    res = compile_cuda(printed.source, "sm_90a", name=printed.name).resources
    assert res.spill_stores == 0


def _inputs(func, rng, dynamic: int = 1000):
    import torch

    out = []
    for p in func.params:
        shape = [d if isinstance(d, int) else dynamic for d in p.shape]  # T.dynamic dims
        if p.dtype.is_float:
            a = rng.standard_normal(shape)
        else:
            a = rng.integers(0, 4, shape)
        out.append(torch.from_numpy(np.asarray(a).astype(p.dtype.np_dtype)).cuda())
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c[0] not in NOT_PRINTED],
                         ids=[c[0] for c in CONFIGS if c[0] not in NOT_PRINTED])
def test_printed_examples_match_the_tile_ir_kernel_on_the_gpu(cfg):
    import warnings

    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.codegen.cuda.build import build_cuda_kernel

    func = make(cfg).func
    want = _inputs(func, np.random.default_rng(0))
    got = [t.clone() for t in want]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # spills of the SIMT baseline
        build_cuda_kernel(func, "sm_90a")(*want)
        build_block_kernel(_program(cfg))(*got)
    torch.cuda.synchronize()
    for p, a, b in zip(func.params, want, got):
        a, b = a.double(), b.double()
        scale = a.abs().max().item() or 1.0
        assert (a - b).abs().max().item() <= 2e-2 * scale, p.name
