"""Split-K GEMM: C += A @ B with the K dimension split over `split_k` thread blocks.

When M x N gives too few output tiles to fill the GPU, a third grid dimension splits the K loop:
block (bx, by, bz) multiplies the bz-th slice of K and adds its partial tile into C with
`T.atomic_add`. C is an FP32 accumulator that the caller initializes (zeros for a plain
product); A and B are FP16. K need not divide evenly: the tiles past K read zeros.

    python examples/splitk_gemm.py
"""

import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit
def splitk_gemm(
    M,
    N,
    K,
    block_M=64,
    block_N=64,
    block_K=32,
    split_k=4,
    num_stages=2,
    dtype="float16",
    accum_dtype="float32",
    out_dtype="float32",
):
    k_tiles = (K + block_K - 1) // block_K
    tiles_per_split = (k_tiles + split_k - 1) // split_k

    @T.prim_func
    def gemm_splitk(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (
            bx,
            by,
            bz,
        ):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(tiles_per_split, num_stages=num_stages):
                k = bz * tiles_per_split + ko
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return gemm_splitk


def reference(a: torch.Tensor, b: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
    return c0.double() + a.double() @ b.double()


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    for M, N, K, split_k in [(128, 128, 512, 4), (100, 72, 200, 3)]:
        kernel = splitk_gemm(M, N, K, split_k=split_k)
        a = torch.randn(M, K, dtype=torch.float16, device=device)
        b = torch.randn(K, N, dtype=torch.float16, device=device)
        c = torch.zeros(M, N, dtype=torch.float32, device=device)
        kernel(a, b, c)
        print(
            f"split-K gemm {M}x{N}x{K}, split {split_k}: "
            f"rel err {rel_err(c, reference(a, b, torch.zeros_like(c))):.2e}"
        )


if __name__ == "__main__":
    main()
