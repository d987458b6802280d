"""Fused RMSNorm + SiLU, the drop-in from the blog post (any C that is a multiple of 32):

    Y = silu(x * rsqrt(mean(x^2) + eps) * gamma),   X [M, C], gamma [C], Y [M, C]

A block owns BLOCK_M rows and makes two passes over C in BLOCK_C-wide chunks: the first
accumulates the sum of squares in FP32 (no FP16 overflow), the second re-reads X and writes the
result. M need not be a multiple of BLOCK_M. The default tile (`pick_config`) takes whole rows
when C is a multiple of 256 up to 16384 (each pass runs once, the second pass's copy finds the
tile still in shared memory and is skipped by the compiler: X is read once), else chunks of
128, 64 or 32 channels (the largest that divides C).

    python examples/rmsnorm_silu.py
"""

import torch

import tilecraft
import tilecraft.language as T


def pick_block_c(C: int) -> int:
    """The widest chunk of 128 / 64 / 32 channels that tiles C exactly."""
    for block_c in (128, 64, 32):
        if C % block_c == 0:
            return block_c
    raise ValueError(f"C = {C} is not a multiple of 32")


def pick_config(M: int, C: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_C, threads): whole rows when C is a multiple of 256 up to 16384, 4096 / C
    rows on C / 16 threads (128 to 256: 16384-wide rows ran at 89.6% of copy speed on 256
    threads, 84.7% on 1024, in benchmarks/memory_bound.py --sweep on the H200), else 16 rows of
    pick_block_c(C) channels on 128 threads."""
    if C % 256 == 0 and C <= 16384:
        return max(1, min(M, 4096 // C)), C, max(128, min(256, C // 16))
    return 16, pick_block_c(C), 128


@tilecraft.jit(out_idx=[-1])
def rmsnorm_silu(M, C, BLOCK_M=None, eps=1e-5, num_stages=2, BLOCK_C=None, threads=None,
                 dtype="float16", accum_dtype="float32", split=1):
    """`split` > 1 (sm_90): each row is shared by `split` blocks of a thread-block cluster, each
    summing the squares of its C / split channels; the sums meet through the cluster's
    shared memory (T.remote) and every block scales its own channels."""
    auto = pick_config(M, C // split) if BLOCK_M is None and BLOCK_C is None \
        else (16, pick_block_c(C // split), 128)
    BLOCK_M = auto[0] if BLOCK_M is None else BLOCK_M
    BLOCK_C = auto[1] if BLOCK_C is None else BLOCK_C
    threads = auto[2] if threads is None else threads
    if C % (split * BLOCK_C):  # the passes step over whole chunks: a partial one would be left out
        raise ValueError(f"{split} x BLOCK_C = {BLOCK_C} does not divide C = {C}")
    n_chunks = C // (split * BLOCK_C)
    CS = C // split  # the channels of one block

    @T.prim_func
    def rms_silu(
        X: T.Tensor((M, C), dtype),  # M = B*T*H*W rows of a BTHWC tensor
        gamma: T.Tensor((C,), dtype),
        Y: T.Tensor((M, C), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BLOCK_M), split, threads=threads,
                      cluster_dims=(1, split) if split > 1 else None) as (bm, bs):
            X_chunk = T.alloc_shared((BLOCK_M, BLOCK_C), dtype)
            g_chunk = T.alloc_shared((BLOCK_C,), dtype)
            sq = T.alloc_fragment((BLOCK_M, BLOCK_C), accum_dtype)
            Y_chunk = T.alloc_fragment((BLOCK_M, BLOCK_C), dtype)
            ss = T.alloc_fragment((BLOCK_M,), accum_dtype)  # FP32 sum of squares, then 1/rms

            # pass 1: sum of squares over C
            T.clear(ss)
            for c in T.Pipelined(n_chunks, num_stages=num_stages):
                T.copy(X[bm * BLOCK_M, bs * CS + c * BLOCK_C], X_chunk)
                for i, j in T.Parallel(BLOCK_M, BLOCK_C):
                    x = T.cast(X_chunk[i, j], accum_dtype)
                    sq[i, j] = x * x
                T.reduce_sum(sq, ss, dim=1, clear=False)
            if split > 1:  # the row's blocks add their sums, each in the same order
                mine = T.alloc_shared((BLOCK_M,), accum_dtype)
                for i in T.Parallel(BLOCK_M):
                    mine[i] = ss[i]
                T.cluster_sync()
                T.clear(ss)
                for p in T.serial(split):
                    for i in T.Parallel(BLOCK_M):
                        ss[i] += T.remote(mine, p)[i]
            for i in T.Parallel(BLOCK_M):
                ss[i] = T.rsqrt(ss[i] / C + eps)

            # pass 2: y = silu(x * rinv * gamma)
            for c in T.Pipelined(n_chunks, num_stages=num_stages):
                T.copy(X[bm * BLOCK_M, bs * CS + c * BLOCK_C], X_chunk)
                T.copy(gamma[bs * CS + c * BLOCK_C], g_chunk)
                for i, j in T.Parallel(BLOCK_M, BLOCK_C):
                    v = T.cast(X_chunk[i, j], accum_dtype) * ss[i] * T.cast(g_chunk[j], accum_dtype)
                    Y_chunk[i, j] = v * T.sigmoid(v)
                T.copy(Y_chunk, Y[bm * BLOCK_M, bs * CS + c * BLOCK_C])
            if split > 1:
                T.cluster_sync()  # (no block leaves while another reads its sums)

    return rms_silu


def reference(x: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x, gamma = x.float(), gamma.float()
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gamma
    return torch.nn.functional.silu(y)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    for M, C in [(100, 160), (64, 320), (37, 96)]:
        kernel = rmsnorm_silu(M, C)
        x = torch.randn(M, C, dtype=torch.float16, device=device)
        gamma = (1 + 0.1 * torch.randn(C, device=device)).half()
        y = kernel(x, gamma)
        print(
            f"rmsnorm+silu M={M} C={C} (BLOCK_C {pick_config(M, C)[1]}): "
            f"rel err {rel_err(y, reference(x, gamma)):.2e}"
        )


if __name__ == "__main__":
    main()
