"""The cost model's counts against hand-computed numbers: GEMM and attention bytes and flops,
occupancy by registers and shared memory, and model()'s waves, bounds and refusals.

Everything runs on the CPU: the passes lower the examples' kernels up to the arena plan, as
`estimate` does, and counts.py reads the lowered block program; nothing is compiled.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tilecraft.diagnostics import TilecraftError
from tilecraft.targets import H100_SXM
from tilecraft.tune.cost import block_counts, estimate, model, occupancy
from tilecraft.tune.counts import BlockCounts, Site

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FP16 = 2  # bytes


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"tune_counts_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gemm = _example("gemm")
attention = _example("flash_attention")


def _counts(func) -> BlockCounts:
    """count_block of `func` lowered as `estimate` lowers it (the passes up to plan_arena)."""
    return block_counts(func, H100_SXM)[0]


# ---- GEMM ------------------------------------------------------------------------------------
GEMMS = [  # M, N, K, block_M, block_N, block_K (num_stages=3 throughout)
    (1024, 1024, 1024, 128, 128, 32),
    (512, 256, 1024, 128, 64, 32),
]


@pytest.mark.parametrize("M, N, K, bM, bN, bK", GEMMS)
def test_gemm_flops_blocks_and_writes_match_the_tiles(M, N, K, bM, bN, bK):
    func = gemm.matmul.factory(M, N, K, block_M=bM, block_N=bN, block_K=bK, num_stages=3)
    c = _counts(func)
    assert c.blocks == (M // bM) * (N // bN)
    assert c.tensor_flops == 2 * bM * bN * K
    assert c.tensor_dtype == "float16"
    assert c.global_write == bM * bN * FP16
    assert c.iterations == K // bK
    est = estimate(func, H100_SXM)
    assert est.tensor_flops == 2 * M * N * K
    assert est.blocks == c.blocks


@pytest.mark.parametrize("M, N, K, bM, bN, bK", GEMMS)
def test_gemm_global_reads_count_the_pipelines_guarded_copy_once(M, N, K, bM, bN, bK):
    c = _counts(gemm.matmul.factory(M, N, K, block_M=bM, block_N=bN, block_K=bK, num_stages=3))
    k_tiles, tile = K // bK, (bM * bK + bK * bN) * FP16
    # The lowered loop (print lowered_program) copies tile 0 of A and B before the loop, then
    # in each of its k_tiles iterations `if ko + 1 < k_tiles: copy tile ko + 1`. counts.py
    # counts an `if` body on every iteration, so the last guarded copy, which never runs, is
    # counted too: k_tiles + 1 tiles, one K-tile more than the block reads.
    assert c.global_read == (k_tiles + 1) * tile
    assert c.global_read - (bM * K + K * bN) * FP16 == tile


@pytest.mark.parametrize("M, N, K, bM, bN, bK", GEMMS)
def test_a_gemm_in_one_wave_reads_each_panel_of_a_and_b_once_from_hbm(M, N, K, bM, bN, bK):
    est = estimate(gemm.matmul.factory(M, N, K, block_M=bM, block_N=bN, block_K=bK,
                                       num_stages=3), H100_SXM)
    assert est.waves == 1
    unique = (M * K + K * N + M * N) * FP16  # A and B read, C written
    # the prologue's copy is a site of its own: one more K-tile per distinct A and B panel,
    # as in the per-block reads above
    guarded = (M // bM) * bM * bK * FP16 + (N // bN) * bK * bN * FP16
    assert est.hbm_bytes == unique + guarded
    assert est.hbm_bytes < est.l2_bytes  # the blocks of a row share their A panel in L2


def test_a_swizzled_gemm_over_several_waves_reads_less_from_hbm_than_its_blocks_do():
    M = N = 4096
    K = 256
    est = estimate(gemm.matmul.factory(M, N, K, block_M=128, block_N=128, block_K=32,
                                       num_stages=3), H100_SXM)
    assert est.waves > 1
    assert (M * K + K * N + M * N) * FP16 <= est.hbm_bytes < est.l2_bytes


# ---- attention -------------------------------------------------------------------------------
B, H, S, D = 1, 2, 256, 64


def _attention(causal: bool, bM: int = 64, bN: int = 64):
    return attention.flash_attention.factory(B, H, S, D, causal, block_M=bM, block_N=bN)


def test_full_attention_does_four_b_h_s_s_d_tensor_flops():
    est = estimate(_attention(False), H100_SXM)
    assert est.tensor_flops == 4 * B * H * S * S * D


@pytest.mark.parametrize("bM, bN", [(64, 64), (128, 64)])
def test_causal_attention_counts_the_key_loops_mean_trip_count(bM, bN):
    c = _counts(_attention(True, bM, bN))
    # the example's causal loop: min(ceildiv(S, bN), ceildiv((bx + 1) * bM, bN)) key tiles,
    # each two dots (Q K^T and P V) of 2 * bM * bN * D flops
    trips = [min(-(-S // bN), -(-(bx + 1) * bM // bN)) for bx in range(S // bM)]
    assert c.iterations == sum(trips) / len(trips)
    assert c.tensor_flops == sum(trips) / len(trips) * 4 * bM * bN * D
    assert c.blocks * c.tensor_flops == B * H * sum(trips) * 4 * bM * bN * D


def test_causal_attention_with_square_tiles_is_half_the_flops_plus_the_diagonal():
    est = estimate(_attention(True), H100_SXM)
    half_plus_diagonal = 4 * B * H * D * (S * S / 2 + S * 64 / 2)
    assert est.tensor_flops == half_plus_diagonal


def test_attentions_exp2_runs_on_the_sfu():
    c = _counts(_attention(False))
    # per key tile: exp2 of the scores (bM x bN) and of the rescale factor (bM)
    assert c.sfu_ops == (S // 64) * (64 * 64 + 64)
    assert estimate(_attention(False), H100_SXM).sfu_ops > 0


def test_causal_attention_is_predicted_faster_than_full_attention():
    causal, full = estimate(_attention(True), H100_SXM), estimate(_attention(False), H100_SXM)
    assert causal.time < full.time


# ---- occupancy -------------------------------------------------------------------------------
def test_occupancy_by_registers_is_the_register_file_over_a_blocks_registers():
    # 128 threads x 128 registers = 16384 of the SM's 65536
    assert occupancy(BlockCounts(threads=128, registers=128), 0, H100_SXM) == 4


def test_occupancy_rounds_registers_up_to_256_per_warp():
    # 170 x 32 = 5440 -> 5632 per warp, x 4 warps = 22528: 2 blocks (3 without the rounding)
    assert occupancy(BlockCounts(threads=128, registers=170), 0, H100_SXM) == 2


def test_occupancy_by_shared_memory_reserves_one_kb_per_block():
    counts = BlockCounts(threads=128, registers=32)
    assert occupancy(counts, 100 * 1024, H100_SXM) == 2  # 228 KB // 101 KB
    assert occupancy(counts, 113 * 1024, H100_SXM) == 2  # 228 KB // 114 KB
    assert occupancy(counts, 114 * 1024, H100_SXM) == 1


def test_occupancy_by_threads_and_the_blocks_per_sm_limit():
    assert occupancy(BlockCounts(threads=768, registers=16), 0, H100_SXM) == 2  # 2048 // 768
    assert occupancy(BlockCounts(threads=32, registers=16), 0, H100_SXM) == 32


# ---- model -----------------------------------------------------------------------------------
def _compute_bound(blocks: int = 132) -> BlockCounts:
    return BlockCounts(blocks=blocks, threads=128, registers=128, tensor_flops=1e9,
                       tensor_dtype="float16", global_read=1024.0,
                       sites=[Site("A", 1024.0, None)])


def test_a_block_over_255_registers_is_tc330():
    with pytest.raises(TilecraftError) as info:
        model(BlockCounts(threads=128, registers=300), 0, H100_SXM)
    assert info.value.code == "TC330"
    assert "spill" in str(info.value)


def test_a_block_that_fits_no_sm_is_tc330():
    with pytest.raises(TilecraftError) as info:
        model(BlockCounts(threads=128, registers=32), 229 * 1024, H100_SXM)
    assert info.value.code == "TC330"


def test_more_blocks_than_one_wave_run_in_several_waves():
    counts = _compute_bound(blocks=132 * 4 + 1)  # 4 blocks per SM by registers
    est = model(counts, 0, H100_SXM)
    assert est.occupancy == 4
    assert est.waves == 2
    assert model(_compute_bound(blocks=132 * 4), 0, H100_SXM).waves == 1


def test_dot_heavy_counts_are_bound_by_the_tensor_cores():
    est = model(_compute_bound(), 0, H100_SXM)
    assert est.bound == "tensor cores"
    assert est.tensor_flops == 132 * 1e9


def test_a_pure_copy_is_bound_by_hbm():
    mb = float(1 << 20)
    counts = BlockCounts(blocks=132, threads=128, registers=32, global_read=mb,
                         global_write=mb, sites=[Site("A", mb, None)])
    est = model(counts, 0, H100_SXM)
    assert est.bound == "HBM"
    assert est.hbm_bytes == 132 * 2 * mb
