"""Hardware descriptions of the GPUs tilecraft compiles for.

A `Target` holds what the compiler and the cost model need: the arch string NVRTC gets, the limits
a kernel must fit (shared memory per block, registers, threads) and the peak rates a roofline uses.
Peak numbers are NVIDIA's published dense (no sparsity) figures for the SXM parts.

`current_target()` picks, in order: `$TILECRAFT_ARCH` (e.g. "sm_90a", "sm_80"; lets a machine
without a GPU compile for one), the live GPU (through torch), then a fallback (H100 SXM).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tilecraft._frozen import Frozen, _set

KB = 1024
MB = 1024 * 1024


class Target(Frozen):
    """One GPU model. Sizes in bytes, bandwidth in bytes/s, rates in FLOP/s (or OP/s);
    immutable, equal by value (`replace(**changes)` for a variant)."""

    __slots__ = (
        "name", "arch", "compute_capability", "sm_count", "max_shared_memory_per_block",
        "shared_memory_per_sm", "registers_per_sm", "max_registers_per_thread",
        "max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm", "warp_size",
        "l2_cache_bytes", "memory_bytes", "memory_bandwidth", "clock_hz", "peak_tensor_fp16",
        "peak_tensor_tf32", "peak_tensor_fp8", "peak_tensor_int8", "peak_fp32", "has_wgmma",
        "has_tma", "has_clusters", "copy_bandwidth", "l2_bandwidth", "shared_bytes_per_clock",
        "sfu_per_clock"
    )
    name: str
    arch: str  # what NVRTC gets: "sm_90a", "sm_80"
    compute_capability: tuple[int, int]
    sm_count: int
    max_shared_memory_per_block: int  # opt-in maximum (above 48 KB needs the function attribute)
    shared_memory_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp_size: int
    l2_cache_bytes: int
    memory_bytes: int
    memory_bandwidth: float
    clock_hz: float  # boost clock
    peak_tensor_fp16: float  # fp16/bf16 inputs, fp32 accumulate, dense
    peak_tensor_tf32: float
    peak_tensor_fp8: float  # 0 where the chip has no fp8 tensor cores
    peak_tensor_int8: float
    peak_fp32: float  # CUDA cores (FMA = 2 FLOP)
    has_wgmma: bool
    has_tma: bool
    has_clusters: bool
    # the cost model's rates (tilecraft/tune/cost.py): measured where a source says so
    copy_bandwidth: float  # a device-to-device copy, read + write bytes/s (what HBM delivers)
    l2_bandwidth: float  # bytes/s from L2 to the SMs, all of them
    shared_bytes_per_clock: int  # per SM
    sfu_per_clock: int  # transcendental results (MUFU) per SM per clock

    def __init__(
        self,
        name: str,
        arch: str,
        compute_capability: tuple[int, int],
        sm_count: int,
        max_shared_memory_per_block: int,
        shared_memory_per_sm: int,
        registers_per_sm: int,
        max_registers_per_thread: int,
        max_threads_per_block: int,
        max_threads_per_sm: int,
        max_blocks_per_sm: int,
        warp_size: int,
        l2_cache_bytes: int,
        memory_bytes: int,
        memory_bandwidth: float,
        clock_hz: float,
        peak_tensor_fp16: float,
        peak_tensor_tf32: float,
        peak_tensor_fp8: float,
        peak_tensor_int8: float,
        peak_fp32: float,
        has_wgmma: bool,
        has_tma: bool,
        has_clusters: bool,
        copy_bandwidth: float = 0.0,
        l2_bandwidth: float = 0.0,
        shared_bytes_per_clock: int = 128,
        sfu_per_clock: int = 16,
    ) -> None:
        values = (
            name, arch, compute_capability, sm_count, max_shared_memory_per_block,
            shared_memory_per_sm, registers_per_sm, max_registers_per_thread,
            max_threads_per_block, max_threads_per_sm, max_blocks_per_sm, warp_size,
            l2_cache_bytes, memory_bytes, memory_bandwidth, clock_hz, peak_tensor_fp16,
            peak_tensor_tf32, peak_tensor_fp8, peak_tensor_int8, peak_fp32, has_wgmma, has_tma,
            has_clusters, copy_bandwidth or 0.9 * memory_bandwidth,
            l2_bandwidth or 2.5 * memory_bandwidth, shared_bytes_per_clock, sfu_per_clock,
        )
        for field, value in zip(self.__slots__, values, strict=True):
            _set(self, field, value)

    @property
    def sm_version(self) -> int:
        """Compute capability as one number: 90 for 9.0, 80 for 8.0."""
        return self.compute_capability[0] * 10 + self.compute_capability[1]

    def with_arch(self, arch: str) -> Target:
        """The same chip compiled for another arch string (e.g. "sm_90" without Hopper extras)."""
        return self.replace(arch=arch, has_wgmma=self.has_wgmma and arch.endswith("a"))


H100_SXM = Target(
    name="H100 SXM",
    arch="sm_90a",
    compute_capability=(9, 0),
    sm_count=132,
    max_shared_memory_per_block=227 * KB,
    shared_memory_per_sm=228 * KB,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    max_blocks_per_sm=32,
    warp_size=32,
    l2_cache_bytes=50 * MB,
    memory_bytes=80 * 10**9,
    memory_bandwidth=3.35e12,
    clock_hz=1.98e9,
    peak_tensor_fp16=989.4e12,
    peak_tensor_tf32=494.7e12,
    peak_tensor_fp8=1978.9e12,
    peak_tensor_int8=1978.9e12,
    peak_fp32=66.9e12,
    has_wgmma=True,
    has_tma=True,
    has_clusters=True,
    copy_bandwidth=3.02e12,  # ANCHORS.md: a 2 GiB device-to-device copy on the lent H100
    # at least 7.8e12: tilecraft's 8192^3 GEMM (128x256 tiles, no multicast) at 670 TFLOP/s on
    # the H100 moved 12.9 GB through L2 (benchmarks/NOTES.md, session 5)
    l2_bandwidth=10.0e12,
)

H200 = H100_SXM.replace(
    name="H200",
    l2_cache_bytes=60 * MB,  # what torch reported on the lent H200 (device KINDS.md, 2026-10-28)
    memory_bytes=141 * 10**9,
    memory_bandwidth=4.8e12,
    copy_bandwidth=4.21e12,  # a 1 GiB device-to-device copy on the lent H200, 2026-11-29
    l2_bandwidth=10.0e12,
)

A100_SXM = Target(
    name="A100 SXM",
    arch="sm_80",
    compute_capability=(8, 0),
    sm_count=108,
    max_shared_memory_per_block=163 * KB,
    shared_memory_per_sm=164 * KB,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    max_blocks_per_sm=32,
    warp_size=32,
    l2_cache_bytes=40 * MB,
    memory_bytes=80 * 10**9,
    memory_bandwidth=2.039e12,
    clock_hz=1.41e9,
    peak_tensor_fp16=312e12,
    peak_tensor_tf32=156e12,
    peak_tensor_fp8=0.0,
    peak_tensor_int8=624e12,
    peak_fp32=19.5e12,
    has_wgmma=False,
    has_tma=False,
    has_clusters=False,
)

KNOWN_TARGETS: tuple[Target, ...] = (H100_SXM, H200, A100_SXM)
_BY_ARCH: dict[str, Target] = {"sm_90a": H100_SXM, "sm_90": H100_SXM, "sm_80": A100_SXM}


def target_from_arch(arch: str) -> Target:
    """The reference chip for an arch string: sm_90a / sm_90 -> H100 SXM, sm_80 -> A100 SXM."""
    base = _BY_ARCH.get(arch)
    if base is None:
        raise ValueError(f"unknown arch {arch!r}; tilecraft knows {sorted(_BY_ARCH)}")
    return base if base.arch == arch else base.with_arch(arch)


def arch_for_capability(major: int, minor: int) -> str:
    """The arch string tilecraft compiles for on a device of compute capability major.minor."""
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


def _from_torch_device(index: int | None = None) -> Target | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(
        torch.cuda.current_device() if index is None else index
    )
    major, minor = props.major, props.minor
    arch = arch_for_capability(major, minor)
    base = next((t for t in KNOWN_TARGETS if t.name.split()[0] in props.name), None)
    if base is None:
        base = H100_SXM if major >= 9 else A100_SXM
    smem = getattr(props, "shared_memory_per_block_optin", 0) or base.max_shared_memory_per_block
    return base.with_arch(arch).replace(
        name=props.name,
        compute_capability=(major, minor),
        sm_count=props.multi_processor_count,
        max_shared_memory_per_block=smem,
        registers_per_sm=getattr(props, "regs_per_multiprocessor", 0) or base.registers_per_sm,
        l2_cache_bytes=getattr(props, "L2_cache_size", 0) or base.l2_cache_bytes,
        memory_bytes=props.total_memory,
    )


def detect_target(fallback: Target | None = H100_SXM, device: int | None = None) -> Target:
    """The live GPU's target, else `fallback` (LookupError when that is None too)."""
    live = _from_torch_device(device)
    if live is not None:
        return live
    if fallback is None:
        raise LookupError("no CUDA GPU found and $TILECRAFT_ARCH is not set")
    return fallback


def current_target(fallback: Target | None = H100_SXM, device: int | None = None,
                   environ: Mapping[str, str] | None = None) -> Target:
    """The target to compile for now: `$TILECRAFT_ARCH`, else the live GPU, else `fallback`.

    Raises LookupError when nothing applies and `fallback` is None. (The compiler below jit.py
    does not call this: it gets its target in `CompileOptions`.)
    """
    env = (os.environ if environ is None else environ).get("TILECRAFT_ARCH")
    if env:
        return target_from_arch(env)
    return detect_target(fallback, device)
