"""The GEMM example over many shapes and tile configurations on the GPU (the interpreter runs the
same kernels in test_examples.py at two shapes; here the code generator's paths are the point:
the register-pipelined mainloop, per-thread ldmatrix offsets, hoisted cp.async addresses,
dropped bounds guards, warp grids of 4 and 8 warps)."""

import random

import gemm as gemm_example
import pytest
import torch

from .harness import assert_close, call_poisoned

# (block_M, block_N, block_K, stages, threads)
CONFIGS = [(128, 128, 32, 3, 128), (128, 256, 64, 3, 256), (256, 128, 128, 2, 256),
           (64, 64, 32, 2, 128), (128, 128, 64, 4, 128), (64, 128, 16, 3, 128)]
_rng = random.Random(20261122)
SHAPES = [(256, 512, 256), (1024, 1024, 1024)] + [
    (_rng.randrange(1, 700), _rng.randrange(8, 700, 8), _rng.randrange(8, 700, 8))
    for _ in range(6)
]


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_config_matches_torch(cfg, shape):
    M, N, K = shape
    bm, bn, bk, stages, threads = cfg
    kernel = gemm_example.matmul(M, N, K, bm, bn, bk, num_stages=stages, threads=threads)
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c = call_poisoned(kernel, a, b)
    assert_close(c, gemm_example.reference(a, b), 1e-2)


@pytest.mark.parametrize("M, N, K", [(20, 40, 24), (1, 8, 200)])
def test_gemm_tiles_larger_than_the_tensors(device, M, N, K):
    """M, N, K below the tile sizes: the start-corner copies clip (zeros in, writes dropped)."""
    kernel = gemm_example.matmul(M, N, K, 128, 128, 32)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c = call_poisoned(kernel, a, b)
    assert_close(c, gemm_example.reference(a, b), 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("shape", SHAPES[:5], ids=lambda s: "x".join(map(str, s)))
def test_gemm_config_with_a_producer_warpgroup_matches_torch(cfg, shape, monkeypatch):
    """Every loop that can take the split takes it (TILECRAFT_WS=always, whatever measured
    faster): 3 stages or more, TMA tiles, several k steps (the first two shapes)."""
    monkeypatch.setenv("TILECRAFT_WS", "always")
    M, N, K = shape
    bm, bn, bk, stages, threads = cfg
    kernel = gemm_example.matmul(M, N, K, bm, bn, bk, num_stages=stages, threads=threads)
    if stages >= 3 and shape in SHAPES[:2]:
        assert "tc::setmaxnreg_inc" in kernel.get_kernel_source()
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c = call_poisoned(kernel, a, b)
    assert_close(c, gemm_example.reference(a, b), 1e-2)
