"""FlashMLA decode (TileLang seed kernel, examples/flash_mla.py) at the ANCHORS shape: b=64,
h=128, one KV head, dim 512 + 64, against torch (matmul + softmax), one process.

Usage: PYTHONPATH=$PWD python3 benchmarks/mla.py
"""

import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from flash_mla import flash_mla  # noqa: E402

import tilecraft  # noqa: E402


def torch_mla(q, q_pe, kv, k_pe):
    scale = (1.0 / (q.shape[-1] + q_pe.shape[-1])) ** 0.5
    s = (q @ kv[:, :, 0].transpose(1, 2) + q_pe @ k_pe[:, :, 0].transpose(1, 2)) * scale
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ kv[:, :, 0]


def main() -> None:
    batch, heads, dim, pe = 64, 128, 512, 64
    print(f"MLA decode b{batch} h{heads} d{dim}+{pe} fp16 (TFLOP/s, GB/s of KV cache read)")
    for seq in (1024, 4096, 8192):
        q = torch.randn(batch, heads, dim, dtype=torch.float16, device="cuda")
        q_pe = torch.randn(batch, heads, pe, dtype=torch.float16, device="cuda")
        kv = torch.randn(batch, seq, 1, dim, dtype=torch.float16, device="cuda")
        k_pe = torch.randn(batch, seq, 1, pe, dtype=torch.float16, device="cuda")
        ref = torch_mla(q.float(), q_pe.float(), kv.float(), k_pe.float())
        flop = 2 * batch * heads * seq * (dim + pe + dim)
        gbytes = batch * seq * (dim + pe) * 2 / 1e9
        tuned = tilecraft.autotune(topk=10)(flash_mla)  # the recommender's best ten, timed
        kern = tuned(batch, heads, 1, seq, dim, pe)
        print(f"  seq {seq}: {tuned.last_result.config}", flush=True)
        out = kern(q, q_pe, kv, k_pe)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ms = do_bench(lambda: kern(q, q_pe, kv, k_pe), return_mode="median")
        ms_t = do_bench(lambda: torch_mla(q, q_pe, kv, k_pe), return_mode="median")
        print(f"  seq {seq}: tilecraft {flop / ms / 1e9:6.1f} TFLOP/s {gbytes / ms * 1e3:7.1f} GB/s "
              f"err {err:.1e} regs {kern.resources.registers} spill {kern.resources.spill_stores}"
              f" | torch {flop / ms_t / 1e9:6.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
