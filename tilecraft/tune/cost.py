"""The roofline cost model: a kernel configuration's predicted time, from its lowered program.

Requires a kernel (a PrimFunc; the pass pipeline lowers it, nothing is compiled) and a Target
with its rates (targets.py). Guarantees an `Estimate`, or a TilecraftError when the
configuration does not fit (the passes' own diagnostics: shared memory, layouts, ...; TC330
when no block fits on an SM, by registers or shared memory).

    est = estimate(matmul.factory(4096, 4096, 4096, block_M=128), target=H100_SXM)
    est.time, est.tflops, est.bound          # 1.9e-4 s, 720, "tensor cores"

The blocks run in waves of `sm_count x occupancy` (occupancy: blocks per SM by registers,
shared memory, threads). Each wave takes, as in TileLang's equation (1), the longest of
- its compute: per SM, the busiest SM's blocks times the largest of tensor-core flops,
  CUDA-core ops, SFU ops and shared-memory bytes over that unit's rate per SM;
- its memory: the HBM bytes (the distinct tiles the wave's blocks read, counts.py's sites:
  tiles two blocks share come from L2, so a swizzled GEMM's wave reads each A and B panel once;
  plus every write) over the copy bandwidth, and all global bytes over the L2 bandwidth;
plus a latency term: one memory round trip to fill the pipeline, a fixed cost per main-loop
iteration (its waits and barriers), and per iteration the part of a round trip that the loads
in flight do not hide ((num_stages - 1) iterations of every resident block's work). A launch
adds its own few microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.targets import Target

from .counts import BlockCounts, count_block

LAUNCH_SECONDS = 2.0e-6  # a kernel's launch and teardown on the GPU
FILL_SECONDS = 1.0e-6  # a global load's round trip, once per wave (the pipeline's fill)
ITERATION_CYCLES = 64  # a main-loop iteration's waits and barriers, not overlapped
#: the fraction of the tensor cores' dense peak a kernel's instruction reaches (measured on the
#: H100: tilecraft's wgmma GEMM at 0.68-0.72 of 989 TFLOP/s; mma.sync peaks near 0.62 there)
TENSOR_EFFICIENCY = {"wgmma": 0.74, "mma_sm90": 0.6, "mma": 0.8}
#: the register estimate's error: blocks estimated within this of the limit spilled on the H200
#: (attention: every configuration estimated at 216+ spilled, at 246+ by 800+ bytes and 2-4x
#: slower; none at 215 or less; benchmarks/NOTES.md, session 12)
SPILL_MARGIN = 20


@dataclass(frozen=True)
class Estimate:
    """A configuration's predicted time (seconds) and what it is made of (totals over the
    grid). `bound` names the term that dominates: "tensor cores", "CUDA cores", "SFU",
    "shared memory", "HBM", "L2" or "latency"; `utilization` is that unit's busy fraction."""

    time: float
    bound: str
    utilization: float
    blocks: int
    threads: int
    waves: int
    occupancy: int  # blocks per SM
    registers: int  # estimated per thread
    shared_memory: int  # bytes per block
    hbm_bytes: float
    l2_bytes: float
    shared_bytes: float
    tensor_flops: float
    alu_ops: float
    sfu_ops: float
    dynamic: bool = False  # some extent was unknown (a T.dynamic size) and counted as 1

    @property
    def tflops(self) -> float:
        """Tensor-core TFLOP/s at the predicted time (0 without dots)."""
        return self.tensor_flops / self.time / 1e12

    @property
    def gbps(self) -> float:
        """HBM GB/s at the predicted time."""
        return self.hbm_bytes / self.time / 1e9

    @property
    def intensity(self) -> float:
        """Operations (tensor-core flops, else CUDA-core ops) per HBM byte."""
        ops = self.tensor_flops or self.alu_ops
        return ops / max(self.hbm_bytes, 1.0)


def estimate(func: Any, target: Target | None = None, options: Any = None) -> Estimate:
    """The Estimate of a kernel (PrimFunc) for `target` (default: the current one)."""
    from tilecraft.targets import current_target

    target = target or current_target()
    counts, smem, wgmma = block_counts(func, target, options)
    return model(counts, smem, target, _mma_kind(target, wgmma), span=func.span)


def block_counts(func: Any, target: Target, options: Any = None) -> tuple[BlockCounts, int, bool]:
    """(counts.py's per-block counts, shared bytes per block, whether a dot runs on wgmma) of a
    kernel lowered for `target`: the passes up to the arena plan (instruction selection decides
    nothing the model reads); a kernel written at the Tilus level as it is."""
    from tilecraft.block.from_kernel import block_program_of
    from tilecraft.ir import For
    from tilecraft.ir.visitor import walk
    from tilecraft.options import CompileOptions
    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.passes.pipeline import PASSES

    program = block_program_of(func)
    if program is not None:  # its shared tensors as declared
        return count_block(program), _declared_shared(program), False
    if options is None or options.target.arch != target.arch:
        options = CompileOptions.from_env(target.arch)
    upto = next(i for i, p in enumerate(PASSES) if p.name == "plan_arena") + 1
    state = lower(func, options, passes=PASSES[:upto])
    counts = count_block(lowered_program(state))
    counts.stages = max([1] + [x.pipeline.num_stages for x in walk(func.body)
                               if isinstance(x, For) and x.pipeline is not None])
    smem = state.arena.size if state.arena is not None else 0
    return counts, smem, len(state.gemm_wgmma) > 0


def _mma_kind(target: Target, wgmma: bool) -> str:
    return "wgmma" if wgmma else "mma_sm90" if target.sm_version >= 90 else "mma"


def _declared_shared(program: Any) -> int:
    from tilecraft.block.instructions import AllocateShared
    from tilecraft.ir.visitor import walk

    return sum(-(-t.out.layout.cosize * t.out.dtype.bits // 8 // 16) * 16
               for t in walk(program.body) if isinstance(t, AllocateShared))


def occupancy(counts: BlockCounts, smem: int, target: Target) -> int:
    """Blocks per SM, by registers (allocated per warp in 256s), shared memory (1 KB reserved
    per block) and threads."""
    warps = -(-counts.threads // target.warp_size)
    regs_per_warp = -(-counts.registers * target.warp_size // 256) * 256
    by_regs = target.registers_per_sm // max(regs_per_warp * warps, 1)
    by_smem = target.shared_memory_per_sm // (smem + 1024) if smem else target.max_blocks_per_sm
    by_threads = target.max_threads_per_sm // max(counts.threads, 1)
    return min(by_regs, by_smem, by_threads, target.max_blocks_per_sm)


def model(counts: BlockCounts, smem: int, target: Target, kind: str = "wgmma",
          span: Any = None) -> Estimate:
    """The Estimate of a block's counts (counts.py) on `target`; `kind` is the tensor-core
    instruction ("wgmma", "mma_sm90" or "mma")."""
    occ = occupancy(counts, smem, target)
    if counts.registers > target.max_registers_per_thread - SPILL_MARGIN:
        raise TilecraftError("TC330", span, detail=f"about {counts.registers} registers per "
                             f"thread on {counts.threads} threads: the block would spill",
                             hint="use more threads or smaller tiles")
    if occ < 1:
        raise TilecraftError("TC330", span, detail=f"no block fits on an SM: {counts.threads} "
                             f"threads x about {counts.registers} registers, {smem} bytes of "
                             "shared memory", hint="use fewer threads, smaller tiles or fewer "
                             "pipeline stages")
    sms, clock = target.sm_count, target.clock_hz
    per_sm = {
        "tensor cores": (counts.tensor_flops, _tensor_peak(target, counts.tensor_dtype)
                         * TENSOR_EFFICIENCY[kind] / sms),
        "CUDA cores": (counts.alu_ops, target.peak_fp32 / 2 / sms),
        "SFU": (counts.sfu_ops, target.sfu_per_clock * clock),
        "shared memory": (counts.shared_bytes, target.shared_bytes_per_clock * clock),
    }
    times = {u: w / r for u, (w, r) in per_sm.items() if r > 0}
    block_unit = max(times, key=times.get)
    block_time = times[block_unit]
    concurrent = sms * occ
    waves = -(-counts.blocks // concurrent)
    iteration = counts.iterations * ITERATION_CYCLES / clock
    if counts.iterations >= 1:  # loads in flight: (stages - 1) iterations of all resident blocks
        t_iter = max(block_time, (counts.global_read + counts.global_write) * sms
                     / target.copy_bandwidth) / counts.iterations
        hidden = (counts.stages - 1) * t_iter * occ
        iteration += counts.iterations * max(0.0, FILL_SECONDS - hidden)
    site_bytes = _sites_per_wave(counts, concurrent, waves)
    total, terms = LAUNCH_SECONDS, {u: 0.0 for u in (*per_sm, "HBM", "L2", "latency")}
    hbm_total = 0.0
    for w in range(waves):
        lo, hi = w * concurrent, min(counts.blocks, (w + 1) * concurrent)
        load = -(-(hi - lo) // sms)  # blocks on the busiest SM
        hbm = (hi - lo) * counts.global_write + float(site_bytes[w])
        hbm_total += hbm
        parts = {block_unit: load * block_time,
                 "HBM": hbm / target.copy_bandwidth,
                 "L2": (hi - lo) * (counts.global_read + counts.global_write)
                 / target.l2_bandwidth}
        unit = max(parts, key=parts.get)
        latency = FILL_SECONDS + iteration * -(-load // occ)
        total += parts[unit] + latency
        terms[unit] += parts[unit]
        terms["latency"] += latency
    bound = max(terms, key=terms.get)
    n = counts.blocks
    return Estimate(
        time=total, bound=bound, utilization=min(1.0, terms[bound] / total), blocks=n,
        threads=counts.threads, waves=waves, occupancy=occ, registers=counts.registers,
        shared_memory=smem, hbm_bytes=hbm_total, l2_bytes=n * (counts.global_read +
                                                               counts.global_write),
        shared_bytes=n * counts.shared_bytes, tensor_flops=n * counts.tensor_flops,
        alu_ops=n * counts.alu_ops, sfu_ops=n * counts.sfu_ops, dynamic=counts.dynamic)


def _tensor_peak(target: Target, dtype: str) -> float:
    if dtype.startswith("float8"):
        return target.peak_tensor_fp8 or target.peak_tensor_fp16
    if dtype in ("int8", "uint8"):
        return target.peak_tensor_int8
    if dtype == "float32":
        return target.peak_tensor_tf32
    return target.peak_tensor_fp16


def _sites_per_wave(counts: BlockCounts, concurrent: int, waves: int) -> np.ndarray:
    """Per wave (blocks w*concurrent .. in launch order), the bytes its sites read from HBM:
    each site's distinct tiles times its bytes per tile."""
    out = np.zeros(waves)
    wave_of = np.arange(counts.blocks) // concurrent
    per_wave = np.bincount(wave_of, minlength=waves)
    for site in counts.sites:
        if not site.key:  # unknown: every block reads its own
            out += per_wave * site.bytes
            continue
        # one code per distinct offset (coordinates joined one at a time, kept compact), then
        # one per (wave, code) pair
        code = np.zeros(counts.blocks, dtype=np.int64)
        for coordinate in site.key:
            _, values = np.unique(coordinate, return_inverse=True)
            _, code = np.unique(code * (int(values.max()) + 1) + values, return_inverse=True)
        radix = int(code.max()) + 1
        pairs = np.unique(wave_of * radix + code)
        out += np.bincount(pairs // radix, minlength=waves) * site.bytes
    return out
