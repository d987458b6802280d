"""Compile a printed block program with NVRTC and launch it through the runtime."""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.block import BlockProgram
from tilecraft.ir import Const, Var
from tilecraft.ir.visitor import walk

from ..cuda.build import _eval
from .printer import print_cuda


@dataclass(frozen=True)
class GeneratedBlock:
    """A printed block program, ready to compile: the entry `name`, `source`, the runtime's
    `params` and `launch` spec, and `fallback_source` (one block per SM in __launch_bounds__)
    when `source` asks for more."""

    name: str
    source: str
    params: tuple
    launch: object
    fallback_source: str | None = None


def generate_block(program: BlockProgram, arch: str, prepared=None) -> GeneratedBlock:
    """Print `program` for `arch` with the runtime's view of its parameters and launch
    (`prepared`: its arena, barriers and plans when the pass pipeline made them)."""
    from tilecraft.block.prepare import prepare
    from tilecraft.runtime import LaunchSpec, ScalarParam, TensorMapParam, TensorParam

    from .printer import resolve_target

    _check_scalars(program)
    blocks = min_blocks_per_sm(program)
    if prepared is None:
        prepared = prepare(program, resolve_target(arch))
    printed = print_cuda(program, arch, blocks, prepared)
    _check_shared_memory(program, printed.smem, arch)
    params = []
    for p in program.params:
        if isinstance(p, Var):
            params.append(ScalarParam(p.name, p.dtype.name))
        else:
            shape = tuple(d if isinstance(d, int) else d.name for d in p.buffer.shape)
            params.append(TensorParam(p.buffer.name, p.dtype.name, shape,
                                      align=printed.align.get(p.buffer.name, 0)))
    params += [ScalarParam(v.name, "int32", dim=v.name) for v in printed.dims]
    params += [TensorMapParam(m, tensor, box, swizzle)
               for m, (tensor, box, swizzle) in printed.maps.items()]
    grid = [int(g.value) if isinstance(g, Const) else (lambda d, g=g: int(_eval(g, d)))
            for g in program.grid]
    launch = LaunchSpec(grid=tuple(grid), block=(program.num_threads,), smem=printed.smem)
    fallback = print_cuda(program, arch, 1, prepared).source if blocks > 1 else None
    return GeneratedBlock(printed.name, printed.source, tuple(params), launch, fallback)


def compile_block(gen, arch: str):
    """Compile `gen` (NVRTC); when asking for two blocks per SM makes it spill, compile the
    one-block source instead. Returns (CompiledCubin, the source it came from)."""
    from tilecraft.runtime import compile_cuda

    compiled = compile_cuda(gen.source, arch, name=gen.name)
    res = compiled.resources
    if gen.fallback_source is not None and (res.spill_stores or res.spill_loads):
        return compile_cuda(gen.fallback_source, arch, name=gen.name), gen.fallback_source
    return compiled, gen.source


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


def min_blocks_per_sm(program: BlockProgram) -> int:
    """Blocks of 512+ threads without tensor-core work ask ptxas for two resident blocks per SM
    (at most 64 / 32 registers per thread), so one block's loads overlap the other's math (a
    1024-thread softmax over 16384-wide rows: 51% of copy speed with one block per SM, 84% with
    two). Tensor-core kernels keep the registers their tiles need."""
    from tilecraft.block import Dot, DotShared

    if program.num_threads < 512 or any(isinstance(s, (Dot, DotShared))
                                        for s in walk(program.body)):
        return 1
    return 2


def build_block_kernel(program: BlockProgram, arch: str = "sm_90a",
                       prepared=None) -> BlockKernel:
    """Print, compile and wrap `program` for `arch` (`prepared`: see generate_block)."""
    return BlockKernel(program, arch, prepared)
