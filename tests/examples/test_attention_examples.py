"""The attention examples against torch: FlashAttention, FlashMLA decode, block-sparse attention.

Inputs are fresh random tensors each run; outputs are NaN-poisoned before the kernel runs; the
check is relative error below 1e-2 (fp16 data) and no NaN.
"""

import blocksparse_attention as sparse_example
import flash_attention as fa_example
import flash_mla as mla_example
import pytest
import torch

from .harness import assert_close, call_poisoned

FP16_TOL = 1e-2


def _qkv(batch, seq_len, heads, dim, device):
    return [
        torch.randn(batch, seq_len, heads, dim, dtype=torch.float16, device=device)
        for _ in range(3)
    ]


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("block_M, block_N", [(64, 64), (128, 64), (64, 128)])
def test_flash_attention_matches_torch(device, is_causal, block_M, block_N):
    """block_M=128 with block_N=64 under causal masking has key tiles whose every entry is
    masked for half the rows: they must contribute zero, not NaN."""
    batch, heads, seq_len, dim = 2, 2, 256, 64
    kernel = fa_example.flash_attention(
        batch, heads, seq_len, dim, is_causal, block_M=block_M, block_N=block_N
    )
    q, k, v = _qkv(batch, seq_len, heads, dim, device)
    out = call_poisoned(kernel, q, k, v)
    assert_close(out, fa_example.reference(q, k, v, is_causal), FP16_TOL)


def test_flash_attention_head_dim_128(device):
    batch, heads, seq_len, dim = 1, 1, 128, 128
    kernel = fa_example.flash_attention(batch, heads, seq_len, dim, True, block_M=64, block_N=32)
    q, k, v = _qkv(batch, seq_len, heads, dim, device)
    out = call_poisoned(kernel, q, k, v)
    assert_close(out, fa_example.reference(q, k, v, True), FP16_TOL)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
@pytest.mark.parametrize("seqlen_kv", [256, 200])  # 200: the last KV tile is partial
@pytest.mark.parametrize("threads", [128, 256])
def test_flash_mla_decode_matches_torch(device, kv_heads, seqlen_kv, threads):
    """kv_heads 2 and 4 give 8 and 4 query heads per KV head: VALID_BLOCK_H < block_H. On 256
    threads the 16 x 32 score tile is too small for 8 warps: two copies of 4 warps compute it."""
    batch, heads, dim, pe_dim = 2, 16, 64, 16
    kernel = mla_example.flash_mla(
        batch, heads, kv_heads, seqlen_kv, dim, pe_dim, block_N=32, block_H=16, threads=threads
    )
    f16 = {"dtype": torch.float16, "device": device}
    q = torch.randn(batch, heads, dim, **f16)
    q_pe = torch.randn(batch, heads, pe_dim, **f16)
    kv = torch.randn(batch, seqlen_kv, kv_heads, dim, **f16)
    k_pe = torch.randn(batch, seqlen_kv, kv_heads, pe_dim, **f16)
    out = call_poisoned(kernel, q, q_pe, kv, k_pe)
    assert_close(out, mla_example.reference(q, q_pe, kv, k_pe), FP16_TOL)


@pytest.mark.parametrize("mask_dtype", ["bool", "uint8", "int8"])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_blocksparse_attention_matches_torch(device, is_causal, mask_dtype):
    batch, heads, seq_len, dim, block = 2, 2, 256, 64, 64
    kernel = sparse_example.blocksparse_attention(
        batch, heads, seq_len, dim, is_causal, block, block, mask_dtype=mask_dtype
    )
    q, k, v = _qkv(batch, seq_len, heads, dim, device)
    n = seq_len // block
    mask = sparse_example.random_block_mask(batch, heads, n, n, density=0.4, device=device)
    out = call_poisoned(kernel, q, k, v, mask.to(getattr(torch, mask_dtype)))
    assert_close(out, sparse_example.reference(q, k, v, mask, is_causal), FP16_TOL)


def test_blocksparse_attention_never_reads_skipped_tiles(device):
    """Key tile 3 is masked off for every query tile: NaN in its K and V must not reach the
    output, which proves the device `if` skips the tile's loads and math."""
    batch, heads, seq_len, dim, block = 1, 2, 256, 64, 64
    kernel = sparse_example.blocksparse_attention(batch, heads, seq_len, dim, False, block, block)
    q, k, v = _qkv(batch, seq_len, heads, dim, device)
    mask = torch.ones(batch, heads, 4, 4, dtype=torch.bool, device=device)
    mask[..., 3] = False
    k_bad, v_bad = k.clone(), v.clone()
    k_bad[:, 3 * block :] = float("nan")
    v_bad[:, 3 * block :] = float("nan")
    out = call_poisoned(kernel, q, k_bad, v_bad, mask)
    assert_close(out, sparse_example.reference(q, k, v, mask, False), FP16_TOL)


@pytest.mark.gpu
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("block_M, block_N, threads", [(128, 64, 128), (128, 32, 128),
                                                       (128, 128, 256), (64, 64, 128)])
def test_flash_attention_d128_benchmark_configs(is_causal, block_M, block_N, threads):
    """The tiles benchmarks/attention.py times, at d=128 on a small problem."""
    batch, heads, seq_len, dim = 2, 3, 512, 128
    kernel = fa_example.flash_attention(batch, heads, seq_len, dim, is_causal, block_M=block_M,
                                        block_N=block_N, threads=threads)
    q, k, v = _qkv(batch, seq_len, heads, dim, "cuda")
    out = call_poisoned(kernel, q, k, v)
    assert_close(out, fa_example.reference(q, k, v, is_causal), FP16_TOL)


@pytest.mark.gpu
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_flash_attention_with_its_consumer_loop_rotated(is_causal, monkeypatch):
    """passes/overlap_dots.py, off by default (no faster on the H200), kept correct on the GPU:
    128x128 tiles on 3 stages, P x V in flight under the next iteration's softmax."""
    import tilecraft
    from tilecraft.passes import overlap_dots

    monkeypatch.setattr(overlap_dots, "ENABLED", True)
    batch, heads, seq_len, dim = 2, 3, 512, 128
    func = fa_example.flash_attention.factory(batch, heads, seq_len, dim, is_causal,
                                              block_M=128, block_N=128, num_stages=3,
                                              threads=256)
    kernel = tilecraft.compile(func, out_idx=[3], target="cuda")
    assert kernel.get_kernel_source().count("wgmma_wait<1>") == 1  # (rotated: one such wait)
    q, k, v = _qkv(batch, seq_len, heads, dim, "cuda")
    out = call_poisoned(kernel, q, k, v)
    assert_close(out, fa_example.reference(q, k, v, is_causal), FP16_TOL)
