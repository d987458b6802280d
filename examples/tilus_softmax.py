"""Row softmax written at the Tilus level: load a tile into registers with an explicit layout,
reduce and broadcast in registers, store. Y[i, :] = softmax(X[i, :]) for X f16 [M, N].

Each block of 128 threads owns ROWS = 4 rows: one warp per row, each lane holding 8 consecutive
values (`spatial(4, 32) * local(1, 8)`); the row maximum and sum (`keepdim=True`) come out
replicated on the row's 32 lanes, which is what broadcasting them back needs.

    python examples/tilus_softmax.py
"""

import torch

import tilecraft
import tilecraft.language as T
from tilecraft.layout import local, spatial

ROWS = 4


@tilecraft.jit
def tilus_softmax(M, N):
    tile = spatial(ROWS, 32) * local(1, N // 32)

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M // ROWS, threads=128) as bi:
            x = T.cast(T.load_global(X, layout=tile, offset=[bi * ROWS, 0]), "float32")
            e = T.exp(x - T.amax(x, dim=1, keepdim=True))
            y = e / T.sum(e, dim=1, keepdim=True)
            T.store_global(T.cast(y, "float16"), Y, offset=[bi * ROWS, 0])

    return softmax


def main(device: str = "cpu") -> None:
    M, N = 64, 256
    x = 3 * torch.randn(M, N, dtype=torch.float16, device=device)
    y = torch.empty_like(x)
    tilus_softmax(M, N)(x, y)
    ref = torch.softmax(x.double(), dim=-1)
    err = ((y.double() - ref).norm() / ref.norm()).item()
    print(f"tilus softmax {M}x{N} on {device}: rel err {err:.2e}")


if __name__ == "__main__":
    main("cuda" if torch.cuda.is_available() else "cpu")
