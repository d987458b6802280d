"""GEMM and GEMM+ReLU: C = A @ B (optionally ReLU'd), fp16 in, fp32 accumulation.

The kernel from the TileLang paper (appendix I.1) and the blog post: A and B tiles are staged
through shared memory by a software-pipelined K loop, C accumulates in registers, and thread
blocks are rasterized in panels (`T.use_swizzle`) for L2 reuse. M, N and K need not be multiples
of the tile sizes: copies of partial tiles read zeros outside the tensors and drop the writes.

Tile sizes, stages and threads that a call leaves out are the recommender's best for its
arguments and the target (`autotune="recommend"`: tilecraft.recommend's cost model, nothing
timed; docs/tuning.md); the signature's defaults are the first values it considers.

    python examples/gemm.py
"""

import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit(out_idx=[-1], autotune="recommend")
def matmul(
    M,
    N,
    K,
    block_M=128,
    block_N=128,
    block_K=32,
    num_stages=3,
    threads=128,
    panel=8,
    relu=False,
    dtype="float16",
    accum_dtype="float32",
):
    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        # grid: (blocks along N, blocks along M); 128 threads = 4 warps per block
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.use_swizzle(panel_size=panel, order="col")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            if relu:  # a Python constant: decided when the kernel is built
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] = T.max(C_local[i, j], 0)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


def reference(a: torch.Tensor, b: torch.Tensor, relu: bool = False) -> torch.Tensor:
    c = a.float() @ b.float()
    return torch.relu(c) if relu else c


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    for (M, N, K, bm, bn, bk), relu in [
        ((256, 256, 128, 128, 128, 32), False),
        ((256, 256, 128, 128, 128, 32), True),
        ((200, 136, 72, 64, 64, 32), False),
    ]:
        kernel = matmul(M, N, K, bm, bn, bk, relu=relu)
        a = torch.randn(M, K, dtype=torch.float16, device=device)
        b = torch.randn(K, N, dtype=torch.float16, device=device)
        c = kernel(a, b)
        print(
            f"gemm{'+relu' if relu else ''} {M}x{N}x{K} (tiles {bm}x{bn}x{bk}): "
            f"rel err {rel_err(c, reference(a, b, relu)):.2e}"
        )


if __name__ == "__main__":
    main()
