"""Row softmax: Y[i, :] = softmax(X[i, :]) for X [M, N].

A block owns BLOCK_M rows and streams them in BLOCK_N-wide chunks twice: the first pass keeps
an online running max and running sum of exp (rescaling the sum when the max grows), the second
writes exp(x - max) / sum. Exponentials are base 2 with log2(e) folded in. N need not be a
multiple of BLOCK_N: columns past the end are masked to -inf.

The default tile (`pick_config`) takes whole rows when they fit: each pass then runs once, the
second pass's copy finds the tile still in shared memory (the compiler skips it) and X is read
from global memory once; every thread holds 16-byte vectors of the row.

    python examples/softmax.py
"""

import torch

import tilecraft
import tilecraft.language as T


def pick_config(M: int, N: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, threads): rows of a multiple of 256 up to 16384 as whole rows, 32-64
    values of a row per thread (4096 / N rows on 128 threads, one row on N / 32 threads, at most
    256: 16384-wide rows ran at 86% of copy speed on 256 threads, 83% on 512 or 1024);
    other rows in 16 x 128 chunks on 128 threads."""
    if N % 256 == 0 and N <= 16384:
        return max(1, min(M, 4096 // N)), N, max(128, min(256, N // 32))
    return 16, 128, 128


@tilecraft.jit(out_idx=[-1])
def softmax(M, N, BLOCK_M=None, BLOCK_N=None, num_stages=2, threads=None, dtype="float16",
            accum_dtype="float32", split=1):
    """`split` > 1 (sm_90; N a multiple of 256 x split): each row is shared by `split` blocks
    of a thread-block cluster, each with its N / split columns; their maxima and sums meet
    through the cluster's shared memory (T.remote)."""
    if split > 1 and N % (256 * split):
        raise ValueError(f"split = {split} needs N a multiple of {256 * split}, got {N}")
    NS = N // split  # the columns of one block
    auto = pick_config(M, NS) if BLOCK_M is None and BLOCK_N is None else (16, 128, 128)
    BLOCK_M = auto[0] if BLOCK_M is None else BLOCK_M
    BLOCK_N = auto[1] if BLOCK_N is None else BLOCK_N
    threads = auto[2] if threads is None else threads
    BLOCK_M, BLOCK_N = min(BLOCK_M, M), min(BLOCK_N, NS)  # a tile may not outgrow the tensor
    log2e = 1.44269504
    n_chunks = (NS + BLOCK_N - 1) // BLOCK_N

    @T.prim_func
    def row_softmax(
        X: T.Tensor((M, N), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BLOCK_M), split, threads=threads,
                      cluster_dims=(1, split) if split > 1 else None) as (bm, bs):
            X_shared = T.alloc_shared((BLOCK_M, BLOCK_N), dtype)
            s = T.alloc_fragment((BLOCK_M, BLOCK_N), accum_dtype)
            Y_local = T.alloc_fragment((BLOCK_M, BLOCK_N), dtype)
            row_max = T.alloc_fragment((BLOCK_M,), accum_dtype)
            row_max_prev = T.alloc_fragment((BLOCK_M,), accum_dtype)
            row_sum = T.alloc_fragment((BLOCK_M,), accum_dtype)
            chunk_sum = T.alloc_fragment((BLOCK_M,), accum_dtype)

            T.fill(row_max, -T.infinity(accum_dtype))
            T.fill(row_sum, 0)
            # pass 1: online max and sum of exp2((x - max) * log2e)
            for c in T.Pipelined(n_chunks, num_stages=num_stages):
                T.copy(X[bm * BLOCK_M, bs * NS + c * BLOCK_N], X_shared)
                for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                    x = T.cast(X_shared[i, j], accum_dtype) * log2e
                    s[i, j] = T.if_then_else(c * BLOCK_N + j < NS, x, -T.infinity(accum_dtype))
                T.copy(row_max, row_max_prev)
                T.reduce_max(s, row_max, dim=1, clear=False)
                for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                    s[i, j] = T.exp2(s[i, j] - row_max[i])
                T.reduce_sum(s, chunk_sum, dim=1)
                for i in T.Parallel(BLOCK_M):
                    row_sum[i] = row_sum[i] * T.exp2(row_max_prev[i] - row_max[i]) + chunk_sum[i]

            # pass 2: normalize (one division a row: `/` is IEEE-exact, a reciprocal and three
            # FMAs on the SFU's pipe, which an element-wise division kept 84% busy on the H200)
            if split > 1:  # the row's maxima and sums, added in the same order by every block
                mine = T.alloc_shared((2, BLOCK_M), accum_dtype)
                for i in T.Parallel(BLOCK_M):
                    mine[0, i] = row_max[i]
                    mine[1, i] = row_sum[i]
                T.cluster_sync()
                for p in T.serial(split):
                    for i in T.Parallel(BLOCK_M):
                        row_max[i] = T.max(row_max[i], T.remote(mine, p)[0, i])
                T.clear(row_sum)
                for p in T.serial(split):
                    for i in T.Parallel(BLOCK_M):
                        row_sum[i] += T.remote(mine, p)[1, i] * \
                            T.exp2(T.remote(mine, p)[0, i] - row_max[i])
            for i in T.Parallel(BLOCK_M):
                row_sum[i] = 1.0 / row_sum[i]
            for c in T.Pipelined(n_chunks, num_stages=num_stages):
                T.copy(X[bm * BLOCK_M, bs * NS + c * BLOCK_N], X_shared)
                for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                    x = T.cast(X_shared[i, j], accum_dtype) * log2e
                    Y_local[i, j] = T.exp2(x - row_max[i]) * row_sum[i]
                T.copy(Y_local, Y[bm * BLOCK_M, bs * NS + c * BLOCK_N])
            if split > 1:
                T.cluster_sync()  # (no block leaves while another reads its maxima)

    return row_softmax


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    for M, N in [(64, 512), (50, 300)]:
        kernel = softmax(M, N)
        x = 3 * torch.randn(M, N, dtype=torch.float16, device=device)
        y = kernel(x)
        print(f"softmax {M}x{N}: rel err {rel_err(y, reference(x)):.2e}")


if __name__ == "__main__":
    main()
