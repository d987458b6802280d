"""FlashAttention forward, d=128: tilecraft vs torch SDPA (flash and cuDNN backends), one process.

Layout [batch, seq, heads, dim] for tilecraft; SDPA gets the same data as [batch, heads, seq, dim],
and so does Triton (the autotuned kernel in benchmarks/triton_peers.py; tc/triton = tilecraft /
Triton TFLOP/s). Without triton installed its columns read n/a. tilecraft's configuration is
autotuned per case (`tilecraft.autotune`; the winner is kept in the tune table).
Usage: PYTHONPATH=$PWD python3 benchmarks/attention.py [--quick]
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from peers import do_bench, triton_peers
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from flash_attention import flash_attention

import tilecraft

TOPK = 10  # the recommender's best ten configurations of each case are timed; the fastest runs


def flops(b, h, s, d, causal):
    f = 4 * b * h * s * s * d
    return f / 2 if causal else f


def run_triton(qt, kt, vt, causal, ref, name):
    """(TFLOP/s, rel err) of the autotuned Triton kernel on [b, h, s, d] inputs, or (None, None)."""
    if triton_peers is None:
        return None, None
    try:
        out = triton_peers.attention(qt, kt, vt, causal)  # the first call autotunes
        err = ((out.transpose(1, 2).float() - ref).norm() / ref.norm()).item()
        ms = do_bench(lambda: triton_peers.attention(qt, kt, vt, causal), return_mode="median")
    except Exception as e:
        print(f"  {name} triton: {type(e).__name__}: {str(e)[:200]}")
        return None, None
    tf = flops(*qt.shape, causal) / ms / 1e9
    config = triton_peers.describe(triton_peers.attention_autotuned.best_config)
    print(f"  {name} triton: {tf:.1f} TFLOP/s err {err:.1e} config {config}", flush=True)
    return tf, err


def cell(x, spec, width):
    """x formatted to width, or n/a where there is no x."""
    return f"{'n/a':>{width}s}" if x is None else f"{x:{width}{spec}}"


def main(quick: bool) -> None:
    batch, heads, dim = (2, 16, 128) if quick else (8, 64, 128)
    rows = []
    for seq in (4096, 8192):
        for causal in (False, True):
            q, k, v = (torch.randn(batch, seq, heads, dim, dtype=torch.float16, device="cuda")
                       for _ in range(3))
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # fp32-accumulating reference
                ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            ref = ref.transpose(1, 2).float()
            row = [f"s{seq} {'causal' if causal else 'full'}"]
            tuned = tilecraft.autotune(topk=TOPK)(flash_attention)
            kern = tuned(batch, heads, seq, dim, causal)
            out = kern(q, k, v)
            err = ((out.float() - ref).norm() / ref.norm()).item()
            ms = do_bench(lambda: kern(q, k, v), return_mode="median")
            tf = flops(batch, heads, seq, dim, causal) / ms / 1e9
            print(f"  s{seq} causal={causal} {tuned.last_result.config}: {tf:.1f} TFLOP/s err "
                  f"{err:.1e} regs {kern.resources.registers}", flush=True)
            row += [tf, err]
            for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
                with sdpa_kernel(backend):
                    ms = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                                  return_mode="median")
                row.append(flops(batch, heads, seq, dim, causal) / ms / 1e9)
            row += run_triton(qt, kt, vt, causal, ref, row[0])
            rows.append(row)
            del q, k, v, qt, kt, vt, ref
    print(f"\nattention fwd b{batch} h{heads} d{dim} fp16, TFLOP/s (median)")
    print(f"{'case':16s} {'tilecraft':>10s} {'rel err':>10s} {'SDPA flash':>11s} {'cuDNN':>8s} {'vs flash':>9s}"
          f" {'triton':>8s} {'tri err':>9s} {'tc/triton':>9s}")
    for name, tc, err, fa, cu, tri, tri_err in rows:
        e = f"{err:.1e}" if isinstance(err, float) else err
        print(f"{name:16s} {tc:10.1f} {e:>10s} {fa:11.1f} {cu:8.1f} {tc / fa:9.2f}"
              f" {cell(tri, '.1f', 8)} {cell(tri_err, '.1e', 9)}"
              f" {cell(None if tri is None else tc / tri, '.2f', 9)}")


if __name__ == "__main__":
    main("--quick" in sys.argv)
