"""Shared memory of every example: the planned arena (block/smem_plan.py), the bytes the printed
kernel asks for (the arena and the scratch that did not fit in it) and the barriers inserted,
for the configs tests/codegen compiles, production FlashMLA decode and the benchmarks' tiles.
CPU only (no compile):  python benchmarks/arena_sizes.py
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "codegen"))
sys.path.insert(0, str(ROOT))

from example_configs import CONFIGS, make  # noqa: E402

from tilecraft.codegen.block_cuda.build import generate_block  # noqa: E402
from tilecraft.ir.visitor import walk  # noqa: E402
from tilecraft.passes import lower  # noqa: E402
from tilecraft.targets import H100_SXM  # noqa: E402

EXTRA = [
    ("flash_mla_prod", "flash_mla", "flash_mla", (4, 128, 1, 8192, 512, 64),
     {"block_N": 64, "block_H": 64, "threads": 256}),
    ("gemm_bench", "gemm", "matmul", (8192, 8192, 8192, 128, 256, 64),
     {"num_stages": 4, "threads": 256}),
    ("attention_d128", "flash_attention", "flash_attention", (8, 64, 4096, 128, True),
     {"block_M": 128, "block_N": 128, "threads": 256}),
]


def sizes(cfg) -> tuple[int, int, int, int]:
    """(bytes of all shared tensors, arena size, dynamic shared memory, barriers)."""
    st = lower(make(cfg).func, H100_SXM)
    tensors = sum(-(-t.layout.cosize * t.dtype.bits // 8 // 16) * 16
                  for t in (s.out for s in walk(st.block_program.body)
                            if type(s).__name__ == "AllocateShared"))
    gen = generate_block(st.prepared.program, "sm_90a", st.prepared)
    bars = sum(type(s).__name__ == "Synchronize" for s in walk(st.prepared.program.body))
    return tensors, st.arena.size, gen.launch.smem, bars


def main() -> None:
    print(f"{'config':24s} {'tensors':>8s} {'arena':>8s} {'smem':>8s} {'barriers':>8s}")
    for cfg in CONFIGS + EXTRA:
        t, a, s, b = sizes(cfg)
        print(f"{cfg[0]:24s} {t:8d} {a:8d} {s:8d} {b:8d}")


if __name__ == "__main__":
    main()
