"""Tile recommendation and tuning (TileLang section 4.2, appendices F-G).

    ranked = tilecraft.recommend(matmul, 4096, 4096, 4096)   # no GPU needed
    print(ranked)                                            # a table, best first
    kernel = matmul(4096, 4096, 4096, **ranked[0].config)

    @tilecraft.autotune(topk=10)        # compiles and times the top candidates on the GPU
    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, ...): ...

cost.py predicts a configuration's time from its lowered block program (a roofline over bytes
per memory level and operations per unit, with waves and occupancy); space.py says which
keyword arguments are tunable and their candidate values; ranking.py ranks them;
autotuned.py is the decorator (`@tilecraft.autotune`, `jit(autotune=...)`); tuner.py times the
best on the GPU and keeps the winner in a table beside the kernel cache.
See docs/tuning.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Candidate", "Estimate", "Recommendation", "autotune", "estimate", "recommend"]


def __getattr__(name: str) -> Any:
    import importlib

    module = {"recommend": "ranking", "Candidate": "ranking", "Recommendation": "ranking",
              "estimate": "cost", "Estimate": "cost", "autotune": "autotuned"}.get(name)
    if module is not None:
        return getattr(importlib.import_module(f"tilecraft.tune.{module}"), name)
    raise AttributeError(f"module 'tilecraft.tune' has no attribute {name!r}")
