"""Tilus Figure 2 through shared memory: each k step copies the A and B tiles global -> shared
with `T.copy_async` (cp.async, 16-byte chunks; A's tile swizzled), waits for the group, loads
them into the mma operand layouts with `T.load_shared` and runs `T.dot` (mma.sync). C is f32.

    python examples/tilus_matmul_shared.py
"""

import torch

import tilecraft
import tilecraft.language as T
from tilecraft.layout import make_swizzled_layout
from tilus_matmul import A_TILE, ACC, B_TILE, BK, BM, BN, run


@tilecraft.jit
def tilus_matmul_shared(M, N, K):
    @T.prim_func
    def matmul(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // BM, N // BN, threads=128) as (bi, bj):
            sa = T.allocate_shared("float16", [BM, BK], layout=make_swizzled_layout((BM, BK), 16))
            sb = T.allocate_shared("float16", [BK, BN])
            acc = T.allocate_register("float32", layout=ACC, init=0.0)
            for k in T.serial(K // BK):
                T.copy_async(sa, A, offset=[bi * BM, k * BK])
                T.copy_async(sb, B, offset=[k * BK, bj * BN])
                T.copy_async_commit_group()
                T.copy_async_wait_group(0)
                T.synchronize()
                a = T.load_shared(sa, layout=A_TILE)
                b = T.load_shared(sb, layout=B_TILE)
                T.dot(a, b, acc, out=acc)
                T.synchronize()
            T.store_global(acc, C, offset=[bi * BM, bj * BN])

    return matmul


def main(device: str = "cpu") -> None:
    run(tilus_matmul_shared, "tilus matmul through shared memory", torch.float32, device)


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
