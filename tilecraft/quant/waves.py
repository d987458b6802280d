"""The decode grid in one wave: fewer pipeline stages where shared memory keeps a block off
each SM.

A decode kernel's grid is sized to the SMs (qmm.choose_config): at 57344 x 8192 its 448 blocks
need 4 an SM to run at once. Its shared memory (the stages of the X and W tiles, the K slice's
scales and zeros) decides how many fit: int4 at one token took 57,472 bytes a block, 128 more
than a quarter of the SM's 228 KB leaves after the 1 KB each block reserves, so 3 fitted, and
52 blocks ran in a second wave after the rest: 96 us, where 3 stages (4 blocks an SM, one
wave) took 66 us (benchmarks/NOTES.md, session 21). `one_wave_stages` takes the most stages
that still let every block of the grid be resident at once, where that needs fewer.

It works from bounds of the kernel's shared memory (qmm_kernel's tiles; the arena adds
alignment, and mbarriers with TMA), so it decides without building the kernel: stages are cut
only when even the tiles' bytes cannot fit, and a smaller count is taken only when the tiles
with every alignment rounded up fit (tests/quant/test_waves.py checks both bounds against the
arena of the built kernels). It leaves the stages alone where the registers would keep blocks
off as well: beyond 4 blocks of 128 threads an SM (under REGISTERS registers a thread, which
the decode kernels need), and where the kernel built with fewer stages takes more registers
than b blocks an SM leave (uint2 at 16 tokens, 57344 x 8192: 2 stages, 142 registers, 7%
slower). Pipelines go no shallower than MIN_STAGES (MIN_STAGES_8BIT for 8-bit weights).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecraft.dtypes import resolve
from tilecraft.quant.qmm_kernel import slice_groups

MIN_STAGES = 2  # (uint4 at 16 tokens, 57344 x 8192: 2 stages and one wave 85 us, 4 stages 92;
#                  float6_e3m2 at one token 96 against 134)
MIN_STAGES_8BIT = 3  # 8-bit weights, nearest the memory's bound, need the deeper pipeline: int8
#                      and float8 at one token, 57344 x 8192, one wave on 2 stages were 2-6%
#                      slower than two waves on 4 (uint8 at 16 tokens, 8192 x 28672, on 3
#                      stages: 85 -> 69 us)
REGISTERS = 128  # registers a thread the decode kernels may need (NVRTC 13.0: 82 to 146; the
#                  compiler's one-wave ask takes up to 16 off: codegen/block_cuda/build.py)
RESERVED = 1024  # shared memory the hardware reserves for each block (sm_80 and later)


def tile_bytes(cfg: dict, stages: int, K: int, bits: int, group: int, xtype: Any,
               has_zeros: bool, codes: bool, tma: bool = True) -> list[int]:
    """Bytes of qmm_kernel's shared tiles for configuration `cfg` with `stages` stages: the
    stages of X's and W's tiles, the slice's scales, its zeros (without alignment or
    mbarriers); with `step_scales`, a row of each a stage (`tma`: the loop's copies may be TMA
    loads, the rows then swizzled)."""
    xb = resolve(xtype).bits // 8
    BN = 16 * cfg["warps"] * cfg["rows"]
    x = stages * cfg["BM"] * cfg["BK"] * xb
    w = stages * BN // 16 * (cfg["BK"] // 64) * 128 * bits
    zb = 1 if codes else xb
    if cfg.get("step_scales"):  # (a row a stage)
        tma = tma and cfg.get("tma", True)
        return [x, w, staged_rows(BN, xb, stages, tma),
                staged_rows(BN, zb, stages, tma) if has_zeros else 0]
    GS = slice_groups(K, cfg["split"], group)
    return [x, w, BN * GS * xb, BN * GS * zb if has_zeros else 0]


def staged_rows(n: int, nbytes: int, stages: int, tma: bool) -> int:
    """Bytes of `stages` staged rows of n elements of nbytes each: one after another, or where
    choose_swizzles swizzles them (`_one_row`, for TMA loads) each stage at its swizzle's
    period."""
    from tilecraft.layout import make_swizzled_layout

    row = n * nbytes
    sw = make_swizzled_layout((1, n), 8 * nbytes).swizzle if tma and row % 16 == 0 and \
        row >= 32 else None
    stride = max(row, sw.period * nbytes) if sw is not None else row
    return (stages - 1) * stride + row


def one_wave_stages(cfg: dict, M: int, N: int, K: int, bits: int, group: int, xtype: Any,
                    has_zeros: bool, codes: bool, target: Any,
                    registers: Callable[[int], int] | None = None) -> int:
    """The pipeline stages for `cfg` on `target` (module docstring): cfg's, unless its grid of
    more blocks than SMs cannot be resident at once for shared memory alone and fewer stages
    (at least MIN_STAGES) surely can. `registers(s)`: the registers a thread of the kernel
    built with s stages takes; fewer stages are taken only if they let the blocks reside."""
    threads = 32 * cfg["warps"]
    blocks = N // (16 * cfg["warps"] * cfg["rows"]) * -(-M // cfg["BM"]) * cfg["split"]
    b = -(-blocks // target.sm_count)  # blocks an SM for one wave
    if b < 2 or b > target.max_blocks_per_sm or b * threads > target.max_threads_per_sm or \
            target.registers_per_sm // (b * threads) < REGISTERS:
        return cfg["stages"]
    room = target.shared_memory_per_sm // b - RESERVED  # bytes a block may take
    args = (K, bits, group, xtype, has_zeros, codes, bool(cfg.get("tma")) and target.has_tma)
    mbarriers = 8 * cfg["stages"] if cfg.get("tma") and target.has_tma else 0
    if sum(tile_bytes(cfg, cfg["stages"], *args)) + mbarriers <= room:  # (may fit: as built)
        return cfg["stages"]
    for s in range(cfg["stages"] - 1, (MIN_STAGES_8BIT if bits == 8 else MIN_STAGES) - 1, -1):
        if upper_bound(tile_bytes(cfg, s, *args)) <= room:  # (surely fits)
            if registers is not None and \
                    -(-registers(s) // 8) * 8 * threads * b > target.registers_per_sm:
                break  # (the registers keep a block off: fewer stages would only cost)
            return s
    return cfg["stages"]


def upper_bound(tiles: list[int]) -> int:
    """The most shared memory the arena takes for these tiles: each at a whole KB (the
    largest alignment, a swizzled tile's), and a KB for the mbarriers, counts and staging."""
    return sum(-(-n // 1024) * 1024 for n in tiles) + 1024
