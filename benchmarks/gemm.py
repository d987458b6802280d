"""GEMM fp16 (fp32 accumulate): tilecraft vs cuBLAS (torch) on TileLang appendix H / ANCHORS shapes.

Each shape's configuration is autotuned (`tilecraft.autotune`: the recommender's TOPK best,
timed; the winner is kept in the tune table, so a second run reads it back).

Triton runs beside them, one process, same inputs: the autotuned kernel in benchmarks/triton_peers.py
(tc/triton = tilecraft / Triton TFLOP/s). Without triton installed its columns read n/a.
Usage: PYTHONPATH=$PWD python3 benchmarks/gemm.py
"""

import statistics
import sys
import time
from pathlib import Path

import torch
from peers import do_bench, triton_peers

import tilecraft

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from gemm import matmul

SHAPES = [(8192, 1024, 8192), (8192, 8192, 8192), (8192, 28672, 8192), (8192, 8192, 28672)]
ROUNDS = 5
TOPK = 10  # the recommender's best ten configurations of each shape are timed; the fastest runs


def run_triton(a, b, ref, name):
    """(TFLOP/s, rel err) of the autotuned Triton GEMM, or (None, None) without Triton."""
    if triton_peers is None:
        return None, None
    try:
        c = triton_peers.matmul(a, b)  # the first call autotunes
        err = ((c.float() - ref).norm() / ref.norm()).item()
        ms = do_bench(lambda: triton_peers.matmul(a, b), return_mode="median")
    except Exception as e:
        print(f"  {name} triton: {type(e).__name__}: {str(e)[:200]}")
        return None, None
    (M, K), N = a.shape, b.shape[1]
    tf = 2 * M * N * K / ms / 1e9
    config = triton_peers.describe(triton_peers.gemm_autotuned.best_config)
    print(f"  {name} triton {tf:.1f} TFLOP/s err {err:.1e} config {config}", flush=True)
    return tf, err


def cell(x, spec, width):
    """x formatted to width, or n/a where there is no x."""
    return f"{'n/a':>{width}s}" if x is None else f"{x:{width}{spec}}"


def main() -> None:
    rows = []
    for M, N, K in SHAPES:
        a = torch.randn(M, K, dtype=torch.float16, device="cuda")
        b = torch.randn(K, N, dtype=torch.float16, device="cuda")
        ref = (a.float() @ b.float())
        tuned = tilecraft.autotune(topk=TOPK)(matmul)
        start = time.perf_counter()
        fastest = tuned(M, N, K)
        took, result = time.perf_counter() - start, tuned.last_result
        c = fastest(a, b)
        err = ((c.float() - ref).norm() / ref.norm()).item()
        how = "from the table" if result.from_table else f"tuned in {took:.1f} s"
        print(f"  {M}x{N}x{K}: {result.config} ({how})", flush=True)
        # the best config and cuBLAS timed in alternation, median of the rounds: the card's
        # clocks drift over a run, and cuBLAS's number moved 650-775 TFLOP/s between runs
        tc_ms, cb_ms = [], []
        for _ in range(ROUNDS):
            tc_ms.append(do_bench(lambda: fastest(a, b), return_mode="median"))
            cb_ms.append(do_bench(lambda: a @ b, return_mode="median"))
        best = 2 * M * N * K / statistics.median(tc_ms) / 1e9
        ms = statistics.median(cb_ms)
        spread = (max(cb_ms) - min(cb_ms)) / ms
        print(f"  {M}x{N}x{K}: {ROUNDS} alternating rounds, cuBLAS spread {spread:.1%}", flush=True)
        tri, tri_err = run_triton(a, b, ref, f"{M}x{N}x{K}")
        rows.append((f"{M}x{N}x{K}", best, err, 2 * M * N * K / ms / 1e9, tri, tri_err))
        del a, b, ref, c
    print("\nGEMM fp16, TFLOP/s (median)")
    print(f"{'shape':20s} {'tilecraft':>10s} {'rel err':>9s} {'cuBLAS':>8s} {'ratio':>6s}"
          f" {'triton':>8s} {'tri err':>9s} {'tc/triton':>9s}")
    for name, tc, err, cb, tri, tri_err in rows:
        print(f"{name:20s} {tc:10.1f} {err:9.1e} {cb:8.1f} {tc / cb:6.2f}"
              f" {cell(tri, '.1f', 8)} {cell(tri_err, '.1e', 9)}"
              f" {cell(None if tri is None else tc / tri, '.2f', 9)}")


if __name__ == "__main__":
    main()
