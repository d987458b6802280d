"""Compile a printed block program with NVRTC and launch it through the runtime."""

from __future__ import annotations

from tilecraft.block import BlockProgram
from tilecraft.ir import Const, Var
from tilecraft.ir.visitor import walk

from ..cuda.build import _eval
from .printer import print_cuda


class BlockKernel:
    """A compiled block program: `.source`, `.resources`, and `kernel(*tensors, *scalars)` in
    the program's parameter order (torch CUDA tensors; they are written in place)."""

    def __init__(self, program: BlockProgram, arch: str):
        from tilecraft.runtime import (
            ArgChecker,
            LaunchSpec,
            RuntimeKernel,
            ScalarParam,
            TensorMapParam,
            TensorParam,
        )

        self.program = program
        _check_scalars(program)
        printed, compiled = _compiled(program, arch)
        self.source, name, smem = printed.source, printed.name, printed.smem
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
        launch = LaunchSpec(grid=tuple(grid), block=(program.num_threads,), smem=smem)
        checker = ArgChecker(tuple(params), kernel=name)
        self.runtime = RuntimeKernel(compiled, tuple(params), launch, self.source, checker=checker)

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


def _compiled(program: BlockProgram, arch: str):
    """(PrintedKernel, CompiledCubin): with `min_blocks_per_sm`, or with one block per SM when
    asking for two makes ptxas spill."""
    from tilecraft.runtime import compile_cuda

    blocks = min_blocks_per_sm(program)
    printed = print_cuda(program, arch, blocks)
    compiled = compile_cuda(printed.source, arch, name=printed.name)
    res = compiled.resources
    if blocks > 1 and (res.spill_stores or res.spill_loads):
        printed = print_cuda(program, arch, 1)
        compiled = compile_cuda(printed.source, arch, name=printed.name)
    return printed, compiled


def build_block_kernel(program: BlockProgram, arch: str = "sm_90a") -> BlockKernel:
    """Print, compile and wrap `program` for `arch`."""
    return BlockKernel(program, arch)
