"""Compile a printed block program with NVRTC and launch it through the runtime."""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.block import BlockProgram
from tilecraft.block.roles import launch_threads
from tilecraft.ir import Const, Var
from tilecraft.ir.visitor import walk

from ..cuda.build import _eval
from .printer import print_cuda


@dataclass(frozen=True)
class GeneratedBlock:
    """A printed block program, ready to compile: the entry `name`, `source` (one block per SM
    in __launch_bounds__), the runtime's `params` and `launch` spec, and `ladder_sources`: the
    same kernel asking ptxas for more resident blocks per SM, tried first, in order
    (`blocks_ladder`, `compile_block`). The one-block source spills when every source does, so
    compiling it checks what runs for spills."""

    name: str
    source: str
    params: tuple
    launch: object
    ladder_sources: tuple[str, ...] = ()


def generate_block(program: BlockProgram, arch: str, prepared=None) -> GeneratedBlock:
    """Print `program` for `arch` with the runtime's view of its parameters and launch
    (`prepared`: its arena, barriers and plans when the pass pipeline made them)."""
    from tilecraft.block.prepare import prepare
    from tilecraft.runtime import LaunchSpec, ScalarParam, TensorMapParam, TensorParam

    from .printer import resolve_target

    _check_scalars(program)
    if prepared is None:
        prepared = prepare(program, resolve_target(arch))
    printed = print_cuda(program, arch, 1, prepared)
    _check_shared_memory(program, printed.smem, arch)
    threads = launch_threads(program)
    one = f"__launch_bounds__({threads}, 1)"  # (the printer's, once)
    ladder = tuple(printed.source.replace(one, f"__launch_bounds__({threads}, {b})", 1)
                   for b in blocks_ladder(program, printed.smem, resolve_target(arch))[:-1])
    params = []
    for p in program.params:
        if isinstance(p, Var):
            params.append(ScalarParam(p.name, p.dtype.name))
        else:
            shape = tuple(d if isinstance(d, int) else d.name for d in p.buffer.shape)
            params.append(TensorParam(p.buffer.name, p.dtype.name, shape,
                                      align=printed.align.get(p.buffer.name, 0)))
    params += [ScalarParam(v.name, "int32", dim=v.name) for v in printed.dims]
    params += [TensorMapParam(m, tensor, box, swizzle, split)
               for m, (tensor, box, swizzle, split) in printed.maps.items()]
    grid = [int(g.value) if isinstance(g, Const) else (lambda d, g=g: int(_eval(g, d)))
            for g in program.grid]
    launch = LaunchSpec(grid=tuple(grid), block=(threads,), smem=printed.smem)
    return GeneratedBlock(printed.name, printed.source, tuple(params), launch, ladder)


def compile_block(gen, arch: str):
    """Compile `gen` (NVRTC): the first of its ladder sources that does not spill, else its
    one-block source. Returns (CompiledCubin, the source it came from)."""
    from tilecraft.runtime import compile_cuda

    for source in (*gen.ladder_sources, gen.source):
        compiled = compile_cuda(source, arch, name=gen.name)
        res = compiled.resources
        if not (res.spill_stores or res.spill_loads):
            break
    b = one_wave_blocks(gen, arch, compiled.resources.registers) \
        if source == gen.source and not gen.ladder_sources else None
    if b is not None:  # a few registers fewer make the grid one wave: ask ptxas for them
        threads = launch_threads_of(gen)
        tight = source.replace(f"__launch_bounds__({threads}, 1)",
                               f"__launch_bounds__({threads}, {b})", 1)
        again = compile_cuda(tight, arch, name=gen.name)
        if not (again.resources.spill_stores or again.resources.spill_loads):
            return again, tight
    return compiled, source


#: the most registers a thread gives up so that the grid runs in one wave (one_wave_blocks)
WAVE_SQUEEZE = 16


def launch_threads_of(gen) -> int:
    n = 1
    for t in gen.launch.block:
        n *= t
    return n


def one_wave_blocks(gen, arch: str, registers: int | None) -> int | None:
    """Blocks per SM at which a static grid of more blocks than SMs runs in one wave, when
    ptxas's `registers` per thread leave room for fewer and at most WAVE_SQUEEZE more than that
    count allows: a tensor-core kernel (which keeps the registers its tiles need, no ladder)
    then asks for them in __launch_bounds__ (the decode quantized matmul at 8192 x 8192, 16
    tokens: 129 registers, 3 of its 3.9 blocks an SM resident, 1.3 waves; benchmarks/NOTES.md,
    session 20). None otherwise."""
    from .printer import resolve_target

    target = resolve_target(arch)
    launch = getattr(gen, "launch", None)
    if target is None or registers is None or launch is None or \
            not all(isinstance(g, int) for g in launch.grid):
        return None
    n = launch_threads_of(gen)
    blocks = 1
    for g in gen.launch.grid:
        blocks *= g
    b = -(-blocks // target.sm_count)
    fit = min(target.max_blocks_per_sm, target.shared_memory_per_sm // (gen.launch.smem + 1024),
              2048 // n)
    if not 2 <= b <= fit:
        return None
    budget = min(target.registers_per_sm // (b * n) // 8 * 8, target.max_registers_per_thread)
    return b if budget < registers <= budget + WAVE_SQUEEZE else None


class BlockKernel:
    """A compiled block program: `.source`, `.resources`, and `kernel(*tensors, *scalars)` in
    the program's parameter order (torch CUDA tensors; they are written in place)."""

    def __init__(self, program: BlockProgram, arch: str, prepared=None):
        from tilecraft.runtime import ArgChecker, RuntimeKernel

        self.program = program
        self.generated = gen = generate_block(program, arch, prepared)
        compiled, self.source = compile_block(gen, arch)
        checker = ArgChecker(gen.params, kernel=gen.name)
        self.runtime = RuntimeKernel(compiled, gen.params, gen.launch, self.source,
                                     checker=checker)

    @property
    def resources(self):
        return self.runtime.resources

    def __call__(self, *args) -> None:
        self.runtime(*args)


def _check_scalars(program: BlockProgram) -> None:
    """A scalar parameter of a dtype no kernel argument has is TC311 (as on every path)."""
    from tilecraft.diagnostics import TilecraftError
    from tilecraft.runtime.params import SCALAR_KINDS

    for p in program.params:
        if isinstance(p, Var) and p.dtype.name not in SCALAR_KINDS:
            raise TilecraftError("TC311", span=p.span, param=p.name, dtype=p.dtype.name,
                                 kinds=", ".join(SCALAR_KINDS))


def _check_shared_memory(program: BlockProgram, need: int, arch: str) -> None:
    """TC503 at the kernel when its arena (after reuse) and scratch exceed the target's limit;
    a note names the largest shared tensors."""
    from tilecraft.block import AllocateShared
    from tilecraft.diagnostics import TilecraftError
    from tilecraft.targets import target_from_arch

    target = target_from_arch(arch)
    limit = target.max_shared_memory_per_block
    if need > limit:
        tiles = sorted(((s.out.layout.cosize * s.out.dtype.bits // 8, s.out.name)
                        for s in walk(program.body) if isinstance(s, AllocateShared)),
                       key=lambda t: -t[0])
        note = (f"that is after reusing the bytes of tensors whose lifetimes do not overlap "
                f"({sum(n for n, _ in tiles)} bytes without reuse); the largest: "
                + ", ".join(f"{name} {n} B" for n, name in tiles[:4]))
        raise TilecraftError("TC503", span=program.span, need=need, target=target.name,
                             limit=limit, notes=((None, note),))


#: the threads per SM a kernel without tensor-core work asks room for, in order
RESIDENT_THREADS = (2048, 1024)


def blocks_ladder(program: BlockProgram, smem: int, target) -> tuple[int, ...]:
    """The resident blocks per SM to ask ptxas for (`__launch_bounds__`), each tried when the
    one before spills; the last is 1. A kernel without tensor-core work asks for room for 2048,
    then 1024 threads per SM (at most 32, then 64 registers per thread), as many blocks as its
    shared memory (`smem` bytes, plus the 1 KB the driver reserves per block) lets reside, so
    some blocks' loads overlap the others' math: a 1024-thread softmax over 16384-wide rows ran
    at 51% of copy speed with one block per SM, 84% with two; RMSNorm+SiLU over 4096-wide rows
    on 256 threads 78% with what ptxas chose (56 registers), 92% with eight blocks
    (benchmarks/NOTES.md, session 14). Tensor-core kernels keep the registers their tiles
    need. A rung whose register budget is no more than the largest register tensor's 32-bit
    words per thread would spill: it is left out (no compile)."""
    from tilecraft.block import AllocateRegister, Dot, DotShared

    body = list(walk(program.body))
    if any(isinstance(s, (Dot, DotShared)) for s in body):
        return (1,)
    n = program.num_threads
    words = max([-(-s.out.layout.local_size * s.out.dtype.bits // 32)
                 for s in body if isinstance(s, AllocateRegister)], default=0)
    fit = min(target.max_blocks_per_sm, target.shared_memory_per_sm // (smem + 1024))
    ladder = {b for b in (min(fit, t // n) for t in RESIDENT_THREADS)
              if b > 1 and target.registers_per_sm // (b * n) > words}
    return (*sorted(ladder, reverse=True), 1)


def build_block_kernel(program: BlockProgram, arch: str = "sm_90a",
                       prepared=None) -> BlockKernel:
    """Print, compile and wrap `program` for `arch` (`prepared`: see generate_block)."""
    return BlockKernel(program, arch, prepared)
