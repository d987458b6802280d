"""FlashAttention forward (TileLang paper, appendix I.3): O = softmax(Q K^T / sqrt(d)) V.

Layout [batch, seq_len, heads, dim]. One thread block owns `block_M` query rows of one head and
streams K/V in `block_N` tiles with an online softmax: a running row max and row sum, the output
accumulator rescaled whenever the max grows. Exponentials are base 2, with log2(e) folded into
the scale. With `is_causal`, the loop stops at the diagonal and the diagonal tiles are masked;
the running max only ever grows, so a tile whose rows are all masked (block_M > block_N) adds
exp2(-inf) = 0 instead of NaN. seq_len must be a multiple of block_M and block_N.

Tile sizes, stages and threads that a call leaves out are the recommender's best for its
arguments and the target (`autotune="recommend"`: tilecraft.recommend's cost model, nothing
timed; docs/tuning.md); the signature's defaults are the first values it considers.

    python examples/flash_attention.py
"""

import math

import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.language as T


@tilecraft.jit(out_idx=[3], autotune="recommend")
def flash_attention(
    batch,
    heads,
    seq_len,
    dim,
    is_causal,
    block_M=128,
    block_N=64,
    num_stages=2,
    threads=128,
    dtype="float16",
    accum_dtype="float32",
):
    assert seq_len % block_M == 0 and seq_len % block_N == 0, "seq_len must be a tile multiple"
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(d) * log2(e): softmax with exp2
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def flash_attn(
        Q: T.Tensor(shape, dtype),
        K: T.Tensor(shape, dtype),
        V: T.Tensor(shape, dtype),
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
                T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype)
                        )
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                # online softmax: the running max never decreases
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

    return flash_attn


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d)) V in float32, on [batch, seq, heads, dim] tensors."""
    q, k, v = (x.float().transpose(1, 2) for x in (q, k, v))  # -> [batch, heads, seq, dim]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return (F.softmax(s, dim=-1) @ v).transpose(1, 2)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    batch, heads, seq_len, dim = 1, 2, 256, 64
    for is_causal in (False, True):
        kernel = flash_attention(batch, heads, seq_len, dim, is_causal, block_M=128, block_N=64)
        q, k, v = (
            torch.randn(batch, seq_len, heads, dim, dtype=torch.float16, device=device)
            for _ in range(3)
        )
        out = kernel(q, k, v)
        print(
            f"flash attention {'causal' if is_causal else 'full'} b{batch} h{heads} "
            f"s{seq_len} d{dim}: rel err {rel_err(out, reference(q, k, v, is_causal)):.2e}, "
            f"NaN: {bool(out.isnan().any())}"
        )


if __name__ == "__main__":
    main()
