"""Element-wise add, C = A + B, over a run-time length `m` (`T.dynamic`): one prepared kernel
serves every size without being rebuilt. Each block adds one tile of `block` elements; the last
tile may be partial. The default, 1024 elements on 512 threads (two a thread), ran at 0.96x
torch's add on the H200 where 256 threads ran at 0.81x (benchmarks/NOTES.md, session 13).

    python examples/elementwise_add.py
"""

import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit(out_idx=[-1])
def elementwise_add(block=1024, threads=512, dtype="float32"):
    m = T.dynamic("m")

    @T.prim_func
    def add(
        A: T.Tensor((m,), dtype),
        B: T.Tensor((m,), dtype),
        C: T.Tensor((m,), dtype),
    ):
        with T.Kernel(T.ceildiv(m, block), threads=threads) as bx:
            A_local = T.alloc_fragment((block,), dtype)
            B_local = T.alloc_fragment((block,), dtype)
            C_local = T.alloc_fragment((block,), dtype)
            T.copy(A[bx * block], A_local)
            T.copy(B[bx * block], B_local)
            for i in T.Parallel(block):
                C_local[i] = A_local[i] + B_local[i]
            T.copy(C_local, C[bx * block])

    return add


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.double() + b.double()


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return ((out - ref).norm() / ref.norm()).item()


def main(device: str = "cpu") -> None:
    kernel = elementwise_add()  # prepared once
    for m in (1000, 4096, 5555):
        a = torch.randn(m, device=device)
        b = torch.randn(m, device=device)
        c = kernel(a, b)
        print(f"elementwise add m={m}: rel err {rel_err(c, reference(a, b)):.2e}")


if __name__ == "__main__":
    main()
