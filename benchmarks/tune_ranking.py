"""How well the cost model ranks configurations: every configuration recommend() keeps, timed.

For each workload, every configuration the recommender ranks (its whole space, minus those it
drops as not fitting) is built, compiled (threads) and timed on the GPU (the profiler's
do_bench, L2 flushed, one set of inputs); then per workload:
  - top-1: the measured time of the predicted best over the measured best (<= 1.10 wanted);
  - top-5%: the best measured time among the predicted top 5% (at least one configuration)
    over the measured best (<= 1.02 wanted);
  - Spearman's rank correlation of predicted and measured times (>= 0.7 wanted).
Then the autotuner: `@tilecraft.autotune(topk=10)` on examples/gemm.py's matmul at 4096^3 in
a cold cache (wall time of the tuning call), and a new process that finds the winner in the
table (time of the call, over the same call with the jit cache warm and no autotune).

Usage: PYTHONPATH=$PWD python3 benchmarks/tune_ranking.py [--quick] [--only gemm,attention,mla]
       [--json rows.json]   (every configuration's prediction and measured time)
       [--no-dropped]       (time only the ranked configurations)
  --only kinds: autotune, gemm, attention, mla; attention8k and gemm_h (s8192 attention and the
  two 28672 GEMMs of appendix H) run only when named
The configurations recommend() drops are built and timed too where they run ("best dropped").
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


def workloads(quick: bool):
    from flash_attention import flash_attention
    from flash_mla import flash_mla
    from gemm import matmul

    gemm = [(4096, 4096, 4096)] + ([] if quick else [(8192, 8192, 8192)])
    out = [(f"gemm {m}x{n}x{k}", "gemm", matmul, (m, n, k), {}) for m, n, k in gemm]
    for causal in (False, True):
        out.append((f"attention s4096 d128 {'causal' if causal else 'full'}", "attention",
                    flash_attention, (8, 64, 4096, 128, causal), {}))
    out.append(("mla decode b64 h128 s4096", "mla", flash_mla, (64, 128, 1, 4096, 512, 64), {}))
    for m, n, k in [(2048, 2048, 2048), (8192, 1024, 8192)]:
        out.append((f"gemm {m}x{n}x{k}", "gemm", matmul, (m, n, k), {}))
    # the rest of the list, selected by kind (--only attention8k,gemm_h)
    for causal in (False, True):
        out.append((f"attention s8192 d128 {'causal' if causal else 'full'}", "attention8k",
                    flash_attention, (8, 64, 8192, 128, causal), {}))
    for m, n, k in [(8192, 8192, 28672), (8192, 28672, 8192)]:
        out.append((f"gemm {m}x{n}x{k}", "gemm_h", matmul, (m, n, k), {}))
    return out


def spearman(a, b) -> float:
    import numpy as np

    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 2 else float("nan")


def rank_one(label, factory, args, fixed, warmup, rep, rows_out):
    import tilecraft

    t0 = time.perf_counter()
    ranked = tilecraft.recommend(factory, *args, topk=10_000, **fixed)
    t_rec = time.perf_counter() - t0
    # the dropped ones too, where they build: is the best configuration among them?
    dropped = [] if "--no-dropped" in sys.argv else \
        [c for c, why in ranked.rejected if "same kernel" not in why]
    configs = [c.config for c in ranked] + dropped

    def build(config):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                k = factory(*args, **fixed, **config)
                k._cuda_kernel()
            return k
        except Exception as err:  # noqa: BLE001
            return err

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        kernels = list(pool.map(build, configs))
    t_build = time.perf_counter() - t0
    inputs, rows = None, []
    for i, (config, k) in enumerate(zip(configs, kernels)):
        pred = ranked[i].predicted_time if i < len(ranked) else None
        row = {"workload": label, "config": config, "predicted_s": pred, "ms": None,
               "spill": 0, "error": ""}
        if isinstance(k, Exception):
            row["error"] = f"{type(k).__name__}: {str(k).splitlines()[0][:100]}"
        else:
            try:
                prof = k.get_profiler()
                inputs = inputs or prof.make_inputs()
                row["ms"] = float(prof.do_bench(warmup=warmup, rep=rep, input_tensors=inputs))
                row["spill"] = k.resources.spill_stores
            except Exception as err:  # noqa: BLE001
                row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"
        rows.append(row)
    rows_out += rows
    timed = [(ranked[i], r["ms"]) for i, r in enumerate(rows[:len(ranked)]) if r["ms"]]
    best = min(ms for _, ms in timed)
    top1 = timed[0][1] / best
    n5 = max(1, -(-len(timed) // 20))  # 5%, rounded up
    top5 = min(ms for _, ms in timed[:n5]) / best
    rho = spearman([c.predicted_time for c, _ in timed], [ms for _, ms in timed])
    dropped_ms = [r["ms"] for r in rows[len(ranked):] if r["ms"]]
    print(f"\n{label}: {len(ranked)} ranked of {ranked.considered} ({len(ranked.rejected)} "
          f"dropped, {len(dropped_ms)} of those ran), {len(timed)} timed; recommend "
          f"{t_rec:.1f} s, build {t_build:.1f} s")
    print("  pred#  config                                                  pred us   meas us")
    order = sorted(range(len(timed)), key=lambda i: timed[i][1])
    for i in list(range(min(5, len(timed)))) + order[:3]:
        c, ms = timed[i]
        print(f"  {i + 1:5d}  {c.config!s:55s} {c.predicted_time * 1e6:8.1f} "
              f"{ms * 1e3:9.1f}")
    if dropped_ms:
        r = min((r for r in rows[len(ranked):] if r["ms"]), key=lambda r: r["ms"])
        print(f"  best dropped: {r['config']} {r['ms'] * 1e3:.1f} us (spill {r['spill']}), "
              f"{r['ms'] / best:.3f}x the best ranked")
    for r in rows[:len(ranked)]:
        if r["error"]:
            print(f"  failed {r['config']}: {r['error']}")
    spills = sum(1 for r in rows[:len(ranked)] if r["spill"])
    print(f"  RESULT {label}: top-1 {top1:.3f}x best, top-5% ({n5}) {top5:.3f}x best, "
          f"spearman {rho:.2f}, {spills} ranked ones spilled", flush=True)
    return label, top1, top5, rho, len(timed)


def autotune_child(mode: str) -> None:
    import torch
    from gemm import matmul

    import tilecraft

    tuned = tilecraft.autotune(topk=10, progress=False)(matmul)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel = tuned(4096, 4096, 4096)
    t1 = time.perf_counter()
    res = tuned.last_result
    print(f"  {mode}: {(t1 - t0) * 1e3:.1f} ms, winner {res.config} {res.ms} ms, from table "
          f"{res.from_table}")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    err = ((kernel(a, b).double() - a.double() @ b.double()).norm() /
           (a.double() @ b.double()).norm()).item()
    print(f"  {mode}: rel err {err:.2e}")
    if mode == "plain":
        t0 = time.perf_counter()
        matmul(4096, 4096, 4096, **res.config)
        print(f"  jit-cache hit of the winner without autotune: "
              f"{(time.perf_counter() - t0) * 1e3:.1f} ms")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        autotune_child(sys.argv[2])
        return
    quick = "--quick" in sys.argv
    only = None
    if "--only" in sys.argv:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
    warmup, rep = (5, 20) if quick else (10, 50)
    if not only or "autotune" in only:
        env = dict(os.environ, TILECRAFT_CACHE_DIR=tempfile.mkdtemp())
        print("\nautotune, gemm 4096^3, topk=10:")
        for mode in ("cold", "table", "plain"):
            out = subprocess.run([sys.executable, __file__, "--child", mode], env=env,
                                 capture_output=True, text=True, check=False)
            print(out.stdout.rstrip() or out.stderr[-2000:], flush=True)
    results, rows = [], []
    for label, kind, factory, args, fixed in workloads(quick):
        if (only and kind not in only) or (not only and kind in ("attention8k", "gemm_h")):
            continue
        results.append(rank_one(label, factory, args, fixed, warmup, rep, rows))
        if "--json" in sys.argv:  # every configuration's prediction and time, for calibration
            Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(rows, indent=0))
    print("\nworkload | timed | top-1 / best | best of top-5% / best | spearman")
    for label, top1, top5, rho, n in results:
        print(f"{label} | {n} | {top1:.3f} | {top5:.3f} | {rho:.2f}")


if __name__ == "__main__":
    main()
