"""The two CUDA paths side by side on the H100, one process: a kernel printed by the CUDA
emitters from the Tile IR (today's path) and the same kernel lowered to block instructions and
printed by codegen/block_cuda (the middle-IR path that will replace it). Correctness first (max
relative difference), then median times.

Usage: PYTHONPATH=$PWD python3 benchmarks/lowered_vs_emitted.py
"""

import sys
import warnings
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from flash_attention import flash_attention  # noqa: E402
from gemm import matmul  # noqa: E402
from rmsnorm_silu import rmsnorm_silu  # noqa: E402
from softmax import softmax  # noqa: E402

from tilecraft.codegen.block_cuda import build_block_kernel  # noqa: E402
from tilecraft.codegen.cuda.build import build_cuda_kernel  # noqa: E402
from tilecraft.passes import lower  # noqa: E402
from tilecraft.passes.lower_tile_ops import lowered_program  # noqa: E402
from tilecraft.targets import H100_SXM  # noqa: E402

CASES = [("gemm 4096^3 (128x256x64, 3 stages)",
          lambda: matmul(4096, 4096, 4096, 128, 256, 64, num_stages=3, threads=256)),
         ("gemm 4096^3 (128x128x32, 3 stages)", lambda: matmul(4096, 4096, 4096)),
         ("attention b8 h32 s4096 d128", lambda: flash_attention(8, 32, 4096, 128, False)),
         ("softmax 16384x4096", lambda: softmax(16384, 4096)),
         ("rmsnorm+silu 16384x4096", lambda: rmsnorm_silu(16384, 4096))]


def main() -> None:
    warnings.simplefilter("ignore")
    for label, make in CASES:
        func = make().func
        args = []
        for p in func.params:
            shape = [int(d) for d in p.shape]
            args.append(torch.randn(shape, device="cuda").to(getattr(torch, p.dtype.name)))
        emitted = build_cuda_kernel(func, "sm_90a")
        lowered = build_block_kernel(lowered_program(lower(func, H100_SXM)))
        out_e = [a.clone() for a in args]
        out_l = [a.clone() for a in args]
        emitted(*out_e)
        lowered(*out_l)
        diff = max(((a.double() - b.double()).abs().max() / (a.double().abs().max() + 1e-30)).item()
                   for a, b in zip(out_e, out_l))
        te = do_bench(lambda: emitted(*out_e), return_mode="median")
        tl = do_bench(lambda: lowered(*out_l), return_mode="median")
        print(f"{label:38s} emitted {te * 1e3:9.1f} us | lowered {tl * 1e3:9.1f} us "
              f"({te / tl:.3f}x) | max rel diff {diff:.1e} | lowered regs "
              f"{lowered.resources.registers} spill {lowered.resources.spill_stores}")


if __name__ == "__main__":
    main()
