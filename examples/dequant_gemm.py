"""Dequantizing GEMM at the TileLang level (W_INT4 A_FP16): C = A @ (dequant(W) * scale).

A [M, K] is f16; the weight W [K, N] holds 4-bit codes (uint4 or int4, packed two per byte:
`tilecraft.pack`) with one f16 scale per column. Each k step copies the A tile and the packed
W tile through shared memory, loads the W tile into a fragment whose layout gives every thread
8 consecutive codes (one 32-bit word), dequantizes it element by element in a T.Parallel loop,
stores the f16 tile to shared memory and multiplies with T.gemm. The compiler turns the
`T.cast` of the whole code fragment into the register fast cast (LOP3 / PRMT, about 2
instructions per element: docs/dtypes.md "Fast casts"), hoisted out of the loop.

    python examples/dequant_gemm.py
"""

import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit(out_idx=[-1])
def dequant_matmul(M, N, K, wtype="uint4", block_M=64, block_N=64, block_K=64, num_stages=2,
                   threads=128):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), W: T.Tensor((K, N), wtype),
             S: T.Tensor((N,), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            W_shared = T.alloc_shared((block_K, block_N), wtype)
            W_local = T.alloc_fragment((block_K, block_N), wtype)
            B_local = T.alloc_fragment((block_K, block_N), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")

            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(W[ko * block_K, bx * block_N], W_shared)
                T.copy(W_shared, W_local)
                for i, j in T.Parallel(block_K, block_N):
                    B_local[i, j] = T.cast(W_local[i, j], "float16") * S[bx * block_N + j]
                T.copy(B_local, B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


def reference(a: torch.Tensor, codes: torch.Tensor, wtype: str, s: torch.Tensor) -> torch.Tensor:
    """A @ (dequantize(codes) * s), in float64."""
    w = tilecraft.dequantize(codes, wtype).double() * s.double()
    return a.double() @ w


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def run(M: int, N: int, K: int, wtype: str, device: str, **config) -> float:
    """The relative error of the kernel against the float64 reference on random inputs."""
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    codes = torch.randint(0, 16, (K, N), dtype=torch.uint8, device=device)
    s = (torch.rand(N, device=device) * 0.1 + 0.01).to(torch.float16)
    c = dequant_matmul(M, N, K, wtype, **config)(a, tilecraft.pack(codes, wtype), s)
    return rel_err(c, reference(a, codes, wtype, s))


def main(device: str = "cpu") -> None:
    shapes = [(128, 128, 128)] if device == "cpu" else [(128, 128, 128), (1024, 1024, 2048)]
    for M, N, K in shapes:
        for wtype in ("uint4", "int4"):
            err = run(M, N, K, wtype, device)
            print(f"dequant gemm {wtype} {M}x{N}x{K}: rel err {err:.2e}")


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
