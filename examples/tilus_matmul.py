"""Tilus Figure 2 with f16 weights, written at the Tilus level (block instructions on register
tensors with explicit layouts): C = A @ B, A f16 [M, K], B f16 [K, N], C f16 [M, N].

Each block of 128 threads (four warps stacked along M) computes a 64 x 8 tile of C; each k step
loads a 64 x 16 tile of A and a 16 x 8 tile of B straight from global memory into the layouts the
mma.m16n8k16 tensor-core instruction wants, and `T.dot` runs on mma.sync (chosen by layout
division). Runs on the block VM (CPU tensors) and on the GPU (CUDA tensors).

    python examples/tilus_matmul.py
"""

import torch

import tilecraft
import tilecraft.language as T
from tilecraft.layout import column_local, column_spatial, local, replicate, spatial

BM, BN, BK = 64, 8, 16
# the mma.m16n8k16 operand layouts, one 16-row block per warp (B shared by the four warps)
ACC = spatial(4, 1) * local(2, 1).spatial(8, 4).local(1, 2)
A_TILE = spatial(4, 1) * column_local(2, 2).spatial(8, 4).local(1, 2)
B_TILE = replicate(4) * local(2, 1).column_spatial(4, 8).local(2, 1)


@tilecraft.jit
def tilus_matmul(M, N, K):
    @T.prim_func
    def matmul(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               C: T.Tensor((M, N), "float16")):
        with T.Kernel(M // BM, N // BN, threads=128) as (bi, bj):
            acc = T.allocate_register("float32", layout=ACC, init=0.0)
            for k in T.serial(K // BK):
                a = T.load_global(A, layout=A_TILE, offset=[bi * BM, k * BK])
                b = T.load_global(B, layout=B_TILE, offset=[k * BK, bj * BN])
                T.dot(a, b, acc, out=acc)
            T.store_global(T.cast(acc, "float16"), C, offset=[bi * BM, bj * BN])

    return matmul


def run(factory, label: str, c_dtype, device: str, M=128, N=16, K=64) -> float:
    """Run `factory(M, N, K)` on random f16 inputs; print and return its relative error."""
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c = torch.empty(M, N, dtype=c_dtype, device=device)
    factory(M, N, K)(a, b, c)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    print(f"{label} {M}x{N}x{K} on {device}: rel err {err:.2e}")
    return err


def main(device: str = "cpu") -> None:
    run(tilus_matmul, "tilus matmul", torch.float16, device)


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
