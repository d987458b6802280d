"""FlashMLA decode (TileLang paper, appendix I.4): one query token per sequence against a latent
KV cache, as in DeepSeek's Multi-Head Latent Attention.

    Q    [batch, heads, dim]         the "nope" part of the query
    Q_pe [batch, heads, pe_dim]      the rotary ("rope") part
    KV   [batch, seqlen_kv, kv_heads, dim]     the compressed latent: both K (nope part) and V
    K_pe [batch, seqlen_kv, kv_heads, pe_dim]  the rotary part of K
    Output[b, h] = softmax((Q K^T + Q_pe K_pe^T) / sqrt(dim + pe_dim)) @ KV

A block takes VALID_BLOCK_H = min(block_H, kv_group_num) heads of one KV head, so every head in
the block reads the same KV tiles; the scores are the sum of two gemms. All gemms use the FullCol
warp policy: the warps split the wide `dim` axis of the output, which keeps the [block_H, dim]
accumulator small per warp. seqlen_kv need not be a multiple of block_N (the tail is masked).

Tile sizes, stages and threads that a call leaves out are the recommender's best for its
arguments and the target (`autotune="recommend"`: tilecraft.recommend's cost model, nothing
timed; docs/tuning.md); the signature's defaults are the first values it considers.

    python examples/flash_mla.py
"""

import math

import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit(out_idx=[4], autotune="recommend")
def flash_mla(
    batch,
    heads,
    kv_heads,
    seqlen_kv,
    dim,
    pe_dim,
    block_N=64,
    block_H=64,
    num_stages=2,
    threads=256,
    dtype="float16",
    accum_dtype="float32",
):
    assert heads % kv_heads == 0, "heads must be a multiple of kv_heads"
    kv_group_num = heads // kv_heads
    VALID_BLOCK_H = min(block_H, kv_group_num)
    assert kv_group_num % VALID_BLOCK_H == 0, "a block's heads must share one KV head"
    scale = (1.0 / (dim + pe_dim)) ** 0.5 * 1.44269504  # softmax scale * log2(e), for exp2

    @T.prim_func
    def flash_mla_decode(
        Q: T.Tensor([batch, heads, dim], dtype),
        Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
        KV: T.Tensor([batch, seqlen_kv, kv_heads, dim], dtype),
        K_pe: T.Tensor([batch, seqlen_kv, kv_heads, pe_dim], dtype),
        Output: T.Tensor([batch, heads, dim], dtype),
    ):
        with T.Kernel(batch, heads // VALID_BLOCK_H, threads=threads) as (bx, by):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            O_shared = T.alloc_shared([block_H, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_H], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_H], accum_dtype)
            scores_scale = T.alloc_fragment([block_H], accum_dtype)
            scores_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)

            cur_kv_head = by // (kv_group_num // VALID_BLOCK_H)
            T.use_swizzle(10)
            if VALID_BLOCK_H < block_H:  # fewer heads per KV head than rows in the tile
                T.clear(Q_shared)
                T.clear(Q_pe_shared)
            T.copy(
                Q[bx, by * VALID_BLOCK_H : (by + 1) * VALID_BLOCK_H, :],
                Q_shared[0:VALID_BLOCK_H, :],
            )
            T.copy(
                Q_pe[bx, by * VALID_BLOCK_H : (by + 1) * VALID_BLOCK_H, :],
                Q_pe_shared[0:VALID_BLOCK_H, :],
            )
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = T.ceildiv(seqlen_kv, block_N)
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(KV[bx, k * block_N : (k + 1) * block_N, cur_kv_head, :], KV_shared)
                T.copy(K_pe[bx, k * block_N : (k + 1) * block_N, cur_kv_head, :], K_pe_shared)
                T.clear(acc_s)
                T.gemm(
                    Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol
                )
                T.gemm(
                    Q_pe_shared,
                    K_pe_shared,
                    acc_s,
                    transpose_B=True,
                    policy=T.GemmWarpPolicy.FullCol,
                )
                if seqlen_kv % block_N != 0:  # mask the keys past the end of the cache
                    for i, j in T.Parallel(block_H, block_N):
                        acc_s[i, j] = T.if_then_else(
                            k * block_N + j < seqlen_kv, acc_s[i, j], -T.infinity(accum_dtype)
                        )

                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_H):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                T.copy(acc_s, S_shared)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(
                O_shared[0:VALID_BLOCK_H, :],
                Output[bx, by * VALID_BLOCK_H : (by + 1) * VALID_BLOCK_H, :],
            )

    return flash_mla_decode


def reference(q, q_pe, kv, k_pe) -> torch.Tensor:
    """MLA decode in float32: each query head attends to its KV head's latent cache."""
    heads, kv_heads = q.shape[1], kv.shape[2]
    group = heads // kv_heads
    q, q_pe, kv, k_pe = (x.float() for x in (q, q_pe, kv, k_pe))
    kv_h = kv.repeat_interleave(group, dim=2)  # [batch, seqlen_kv, heads, dim]
    k_pe_h = k_pe.repeat_interleave(group, dim=2)
    s = torch.einsum("bhd,bshd->bhs", q, kv_h) + torch.einsum("bhd,bshd->bhs", q_pe, k_pe_h)
    p = torch.softmax(s / math.sqrt(q.shape[-1] + q_pe.shape[-1]), dim=-1)
    return torch.einsum("bhs,bshd->bhd", p, kv_h)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    batch, heads, seqlen_kv, dim, pe_dim = 2, 16, 200, 64, 16
    for kv_heads in (1, 2):
        # small tiles for a quick run: a 16 x 32 score tile is split over 4 warps, not 8
        kernel = flash_mla(
            batch, heads, kv_heads, seqlen_kv, dim, pe_dim, block_N=32, block_H=16, threads=128
        )
        f16 = {"dtype": torch.float16, "device": device}
        q = torch.randn(batch, heads, dim, **f16)
        q_pe = torch.randn(batch, heads, pe_dim, **f16)
        kv = torch.randn(batch, seqlen_kv, kv_heads, dim, **f16)
        k_pe = torch.randn(batch, seqlen_kv, kv_heads, pe_dim, **f16)
        out = kernel(q, q_pe, kv, k_pe)
        print(
            f"flash mla decode b{batch} h{heads} kv_heads{kv_heads} s{seqlen_kv} d{dim}+{pe_dim}"
            f": rel err {rel_err(out, reference(q, q_pe, kv, k_pe)):.2e}"
        )


if __name__ == "__main__":
    main()
