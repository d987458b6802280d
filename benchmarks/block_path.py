"""The two CUDA paths of the jit side by side on one GPU, one process: each kernel built by the
CUDA emitters (the default) and through the middle IR (TILECRAFT_BLOCK_PRINTER=1: lowered to
block instructions, pipelined, printed by codegen/block_cuda). Correctness first (relative error
against a float64/float32 torch reference, both paths), then medians of interleaved do_bench
rounds; GEMM also against cuBLAS.

Usage: PYTHONPATH=$PWD python3 benchmarks/block_path.py [gemm|attention|mla|memory]...
"""

import os
import statistics
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from flash_attention import flash_attention  # noqa: E402
from flash_mla import flash_mla  # noqa: E402
from flash_mla import reference as mla_ref  # noqa: E402
from gemm import matmul  # noqa: E402
from layernorm import layernorm  # noqa: E402
from layernorm import reference as layernorm_ref  # noqa: E402
from rmsnorm_silu import reference as rmsnorm_ref  # noqa: E402
from rmsnorm_silu import rmsnorm_silu  # noqa: E402
from softmax import reference as softmax_ref  # noqa: E402
from softmax import softmax  # noqa: E402

ROUNDS = 5


def build(factory, block: bool):
    """The jit kernel of `factory()` on the emitters' path or the block printer's."""
    if block:
        os.environ["TILECRAFT_BLOCK_PRINTER"] = "1"
    else:
        os.environ.pop("TILECRAFT_BLOCK_PRINTER", None)
    try:
        kern = factory()
        kern.get_kernel_source()  # compiled under this switch
        return kern
    finally:
        os.environ.pop("TILECRAFT_BLOCK_PRINTER", None)


def rel(out, ref) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def timed(fns) -> list[float]:
    """Median ms of each fn over interleaved rounds (the clocks drift over a run)."""
    ms = [[] for _ in fns]
    for _ in range(ROUNDS):
        for i, fn in enumerate(fns):
            ms[i].append(do_bench(fn, return_mode="median"))
    return [statistics.median(m) for m in ms]


def row(label, unit, work, emitted, block, args, ref, peer=None):
    outs = [k(*args) for k in (emitted, block)]
    errs = [rel(o[: len(ref)], ref) for o in outs]  # (a reference may cover the first batches)
    fns = [lambda: emitted(*args), lambda: block(*args)] + ([peer] if peer else [])
    ms = timed(fns)
    rate = [work / m / 1e9 for m in ms]
    peer_txt = f" | peer {rate[2]:7.1f} | block/peer {rate[1] / rate[2]:.3f}" if peer else ""
    print(f"{label:34s} emitted {rate[0]:7.1f} | block {rate[1]:7.1f} {unit} | block/emitted "
          f"{ms[0] / ms[1]:.3f}{peer_txt} | err {errs[0]:.1e} / {errs[1]:.1e} | regs "
          f"{emitted.resources.registers} / {block.resources.registers} spill "
          f"{block.resources.spill_stores}", flush=True)


def gemm() -> None:
    for (m, n, k), cfg in (((8192, 8192, 8192), (128, 256, 64, 3, 256)),
                           ((8192, 1024, 8192), (128, 256, 64, 3, 256)),
                           ((8192, 28672, 8192), (128, 256, 64, 3, 256)),
                           ((4096, 4096, 4096), (128, 128, 32, 3, 128))):
        a = torch.randn(m, k, dtype=torch.float16, device="cuda")
        b = torch.randn(k, n, dtype=torch.float16, device="cuda")
        bm, bn, bk, st, th = cfg
        kerns = [build(lambda: matmul(m, n, k, bm, bn, bk, num_stages=st, threads=th), blk)
                 for blk in (False, True)]
        row(f"gemm {m}x{n}x{k} {bm}x{bn}x{bk}", "TFLOP/s", 2 * m * n * k, *kerns, (a, b),
            a.float() @ b.float(), peer=lambda: a @ b)


def attention(modes=(False, True)) -> None:
    b, h, d = 8, 64, 128
    for seq in (4096, 8192):
        for causal in modes:
            q, k, v = (torch.randn(b, seq, h, d, dtype=torch.float16, device="cuda")
                       for _ in range(3))
            ref = F.scaled_dot_product_attention(*(x.transpose(1, 2).float() for x in (q, k, v)),
                                                 is_causal=causal).transpose(1, 2)
            kerns = [build(lambda: flash_attention(b, h, seq, d, causal, block_M=128,
                                                   block_N=128, threads=256), blk)
                     for blk in (False, True)]
            flop = 4 * b * h * seq * seq * d // (2 if causal else 1)
            row(f"attention s{seq} {'causal' if causal else 'full'} 128x128", "TFLOP/s", flop,
                *kerns, (q, k, v), ref)


def mla() -> None:
    batch, heads, dim, pe = 64, 128, 512, 64
    for seq in (1024, 4096, 8192):
        q = torch.randn(batch, heads, dim, dtype=torch.float16, device="cuda")
        q_pe = torch.randn(batch, heads, pe, dtype=torch.float16, device="cuda")
        kv = torch.randn(batch, seq, 1, dim, dtype=torch.float16, device="cuda")
        k_pe = torch.randn(batch, seq, 1, pe, dtype=torch.float16, device="cuda")
        ref = mla_ref(q[:2], q_pe[:2], kv[:2], k_pe[:2])  # (the whole one: 64 GB at 8192)
        kerns = [build(lambda: flash_mla(batch, heads, 1, seq, dim, pe), blk)
                 for blk in (False, True)]
        row(f"mla decode seq {seq}", "TFLOP/s", 2 * batch * heads * seq * (2 * dim + pe),
            *kerns, (q, q_pe, kv, k_pe), ref)


def memory() -> None:
    for rows, cols in ((16384, 4096), (4096, 16384), (65536, 1024)):
        x = torch.randn(rows, cols, dtype=torch.float16, device="cuda")
        w = torch.randn(cols, dtype=torch.float16, device="cuda")
        bias = torch.randn(cols, dtype=torch.float16, device="cuda")
        nbytes = 2 * rows * cols * 2
        cases = [("softmax", lambda: softmax(rows, cols), (x,), softmax_ref(x)),
                 ("rmsnorm+silu", lambda: rmsnorm_silu(rows, cols), (x, w), rmsnorm_ref(x, w)),
                 ("layernorm", lambda: layernorm(rows, cols), (x, w, bias),
                  layernorm_ref(x, w, bias))]
        for name, factory, args, ref in cases:
            kerns = [build(factory, blk) for blk in (False, True)]
            row(f"{name} {rows}x{cols}", "TB/s", nbytes, *kerns, args, ref)


def main() -> None:
    warnings.simplefilter("ignore")
    which = sys.argv[1:] or ["gemm", "attention", "mla", "memory"]
    for name in which:
        if name == "causal":
            attention(modes=(True,))
        else:
            globals()[name]()


if __name__ == "__main__":
    main()
