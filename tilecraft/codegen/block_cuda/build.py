"""Compile a printed block program with NVRTC and launch it through the runtime."""

from __future__ import annotations

from tilecraft.block import BlockProgram
from tilecraft.ir import Const, Var

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
            compile_cuda,
        )

        self.program = program
        printed = print_cuda(program, arch)
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
        compiled = compile_cuda(self.source, arch, name=name)
        checker = ArgChecker(tuple(params), kernel=name)
        self.runtime = RuntimeKernel(compiled, tuple(params), launch, self.source, checker=checker)

    @property
    def resources(self):
        return self.runtime.resources

    def __call__(self, *args) -> None:
        self.runtime(*args)


def build_block_kernel(program: BlockProgram, arch: str = "sm_90a") -> BlockKernel:
    """Print, compile and wrap `program` for `arch`."""
    return BlockKernel(program, arch)
