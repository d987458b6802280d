"""LayerNorm with weight and bias: Y = (x - mean) / sqrt(var + eps) * weight + bias over the
last dimension of X [M, N].

A block owns BLOCK_M whole rows: it loads them once into registers (in FP32), reduces the mean,
then the variance of the centred values (two-pass, no cancellation), and writes the result.
M need not be a multiple of BLOCK_M. The default tile (`pick_config`): 4096 / N rows (at least
4) on 128 threads up to 2048 channels, two rows on 256 threads up to 4096, one row on 256 threads
past that.

    python examples/layernorm.py
"""

import torch

import tilecraft
import tilecraft.language as T


def pick_config(M: int, N: int) -> tuple[int, int]:
    """(BLOCK_M, threads): rows of up to 2048 as 4096 / N rows (at least 4, at most the largest
    power of two <= M) on 128 threads; rows of up to 4096 two at a time on 256 threads (32
    values a thread: 90.2-90.6% of copy at 16384 x 4096 on the H200, against 89.0-89.2% for 4
    rows on 128 threads); wider rows one at a time on 256 threads (fastest in
    benchmarks/memory_bound.py --sweep on the H100 and the H200)."""
    if N > 4096:
        return 1, 256
    if N > 2048:
        return min(2, 1 << (max(M, 1).bit_length() - 1)), 256
    rows = max(4, 4096 // N)
    return max(1, min(rows, 1 << (max(M, 1).bit_length() - 1))), 128


@tilecraft.jit(out_idx=[-1])
def layernorm(M, N, BLOCK_M=None, eps=1e-5, threads=None, dtype="float16", accum_dtype="float32",
              split=1):
    """`split` > 1 (sm_90): each row is shared by `split` blocks of a thread-block cluster, each
    with N / split columns; the row's sum, then its centred sum of squares, meet through the
    cluster's shared memory (T.remote)."""
    if N % split:
        raise ValueError(f"split = {split} does not divide N = {N}")
    NS = N // split  # the columns of one block
    auto = pick_config(M, NS) if BLOCK_M is None else (BLOCK_M, 128)
    BLOCK_M = auto[0]
    threads = auto[1] if threads is None else threads

    @T.prim_func
    def layer_norm(
        X: T.Tensor((M, N), dtype),
        weight: T.Tensor((N,), dtype),
        bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BLOCK_M), split, threads=threads,
                      cluster_dims=(1, split) if split > 1 else None) as (bm, bs):
            X_shared = T.alloc_shared((BLOCK_M, NS), dtype)
            w_shared = T.alloc_shared((NS,), dtype)
            b_shared = T.alloc_shared((NS,), dtype)
            x = T.alloc_fragment((BLOCK_M, NS), accum_dtype)
            sq = T.alloc_fragment((BLOCK_M, NS), accum_dtype)
            Y_local = T.alloc_fragment((BLOCK_M, NS), dtype)
            mean = T.alloc_fragment((BLOCK_M,), accum_dtype)
            rstd = T.alloc_fragment((BLOCK_M,), accum_dtype)

            T.copy(X[bm * BLOCK_M, bs * NS], X_shared)
            T.copy(weight[bs * NS], w_shared)
            T.copy(bias[bs * NS], b_shared)
            T.copy(X_shared, x)

            T.reduce_sum(x, mean, dim=1)
            if split > 1:  # the row's blocks add their sums, each in the same order
                sums = T.alloc_shared((2, BLOCK_M), accum_dtype)
                for i in T.Parallel(BLOCK_M):
                    sums[0, i] = mean[i]
                T.cluster_sync()
                T.clear(mean)
                for p in T.serial(split):
                    for i in T.Parallel(BLOCK_M):
                        mean[i] += T.remote(sums, p)[0, i]
            for i in T.Parallel(BLOCK_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(BLOCK_M, NS):
                x[i, j] = x[i, j] - mean[i]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            if split > 1:  # (sums[1], which no block reads yet)
                for i in T.Parallel(BLOCK_M):
                    sums[1, i] = rstd[i]
                T.cluster_sync()
                T.clear(rstd)
                for p in T.serial(split):
                    for i in T.Parallel(BLOCK_M):
                        rstd[i] += T.remote(sums, p)[1, i]
            for i in T.Parallel(BLOCK_M):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
            for i, j in T.Parallel(BLOCK_M, NS):
                Y_local[i, j] = x[i, j] * rstd[i] * w_shared[j] + b_shared[j]
            T.copy(Y_local, Y[bm * BLOCK_M, bs * NS])
            if split > 1:
                T.cluster_sync()  # (no block leaves while another reads its sums)

    return layer_norm


def reference(x, weight, bias, eps: float = 1e-5) -> torch.Tensor:
    return torch.nn.functional.layer_norm(
        x.float(), (x.shape[-1],), weight.float(), bias.float(), eps
    )


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    for M, N in [(64, 256), (30, 96)]:
        kernel = layernorm(M, N)
        x = (1 + torch.randn(M, N, device=device)).half()
        weight = (1 + 0.1 * torch.randn(N, device=device)).half()
        bias = (0.1 * torch.randn(N, device=device)).half()
        y = kernel(x, weight, bias)
        print(f"layernorm {M}x{N}: rel err {rel_err(y, reference(x, weight, bias)):.2e}")


if __name__ == "__main__":
    main()
