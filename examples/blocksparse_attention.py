"""Block-sparse FlashAttention forward (TileLang paper, appendix I.5).

FlashAttention over [batch, seq_len, heads, dim] tensors where a boolean BlockMask
[batch, heads, seq_len // block_M, seq_len // block_N] says which (query tile, key tile) pairs
take part: the kernel skips the others with a device-side `if BlockMask[bz, by, bx, k]:`,
loading nothing for them. Every query tile must keep at least one key tile (the diagonal, say);
a row with no keys at all has no softmax.

    python examples/blocksparse_attention.py
"""

import math

import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.language as T


@tilecraft.jit(out_idx=[4])
def blocksparse_attention(
    batch,
    heads,
    seq_len,
    dim,
    is_causal,
    block_M=64,
    block_N=64,
    num_stages=2,
    threads=128,
    dtype="float16",
    accum_dtype="float32",
    mask_dtype="bool",
):
    assert seq_len % block_M == 0 and seq_len % block_N == 0, "seq_len must be a tile multiple"
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(d) * log2(e): softmax with exp2
    shape = (batch, seq_len, heads, dim)
    mask_shape = (batch, heads, seq_len // block_M, seq_len // block_N)

    @T.prim_func
    def blocksparse_attn(
        Q: T.Tensor(shape, dtype),
        K: T.Tensor(shape, dtype),
        V: T.Tensor(shape, dtype),
        BlockMask: T.Tensor(mask_shape, mask_dtype),
        Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal
                else T.ceildiv(seq_len, block_N)
            )

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                if BlockMask[bz, by, bx, k]:
                    T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                    if is_causal:
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(
                                bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype)
                            )
                    else:
                        T.clear(acc_s)
                    T.gemm(
                        Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow
                    )

                    T.copy(scores_max, scores_max_prev)
                    T.fill(scores_max, -T.infinity(accum_dtype))
                    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                    for i in T.Parallel(block_M):
                        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                    T.reduce_sum(acc_s, scores_sum, dim=1)
                    for i in T.Parallel(block_M):
                        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                    T.copy(acc_s, acc_s_cast)

                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] *= scores_scale[i]
                    T.copy(V[bz, k * block_N : (k + 1) * block_N, by, :], V_shared)
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M : (bx + 1) * block_M, by, :])

    return blocksparse_attn


def random_block_mask(batch, heads, n_m, n_n, density=0.5, device="cpu") -> torch.Tensor:
    """A random [batch, heads, n_m, n_n] bool mask that keeps every diagonal tile."""
    mask = torch.rand(batch, heads, n_m, n_n, device=device) < density
    diag = torch.arange(min(n_m, n_n), device=device)
    mask[:, :, diag, diag] = True
    return mask


def reference(q, k, v, block_mask, is_causal: bool) -> torch.Tensor:
    """Attention in float32 where each masked-off (query tile, key tile) pair is -inf."""
    q, k, v = (x.float().transpose(1, 2) for x in (q, k, v))  # -> [batch, heads, seq, dim]
    seq_len = q.shape[2]
    bm, bn = seq_len // block_mask.shape[2], seq_len // block_mask.shape[3]
    keep = block_mask.bool().repeat_interleave(bm, dim=2).repeat_interleave(bn, dim=3)
    if is_causal:
        keep = keep & torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).tril()
    s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~keep, float("-inf"))
    return (F.softmax(s, dim=-1) @ v).transpose(1, 2)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    batch, heads, seq_len, dim, block = 1, 2, 256, 64, 64
    for is_causal in (False, True):
        kernel = blocksparse_attention(batch, heads, seq_len, dim, is_causal, block, block)
        q, k, v = (
            torch.randn(batch, seq_len, heads, dim, dtype=torch.float16, device=device)
            for _ in range(3)
        )
        mask = random_block_mask(batch, heads, seq_len // block, seq_len // block, device=device)
        out = kernel(q, k, v, mask)
        print(
            f"block-sparse attention {'causal' if is_causal else 'full'} "
            f"(density {mask.float().mean().item():.2f}): "
            f"rel err {rel_err(out, reference(q, k, v, mask, is_causal)):.2e}"
        )


if __name__ == "__main__":
    main()
