"""build_cuda_kernel: Tile IR -> passes -> block program -> CUDA C++ (codegen/block_cuda) ->
NVRTC cubin -> a callable kernel.

    k = build_cuda_kernel(prim_func, arch="sm_90a")
    print(k.source); k.resources.registers; k(a, b, c)   # torch CUDA tensors

`generate_cuda(func, arch)` stops at the source (plus parameter list and launch spec), which is
what the CPU tests compile through NVRTC. This package also holds what the block printer prints
with: C expressions (cexpr.py), layout index text (indexing.py) and the device headers
(include/tilecraft/*.cuh), whose #include lines `include_lines` picks.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import BinOp, Cast, Const, PrimFunc, Var
from tilecraft.options import CompileOptions
from tilecraft.passes import lower

HEADERS = ("common", "fp8", "lowbit", "mma", "ldmatrix", "cp_async", "reduce", "math", "atomic",
           "codegen", "scan", "debug", "sync", "wgmma", "tma", "fast_cast")
#: headers every kernel includes: types, casts, vectors (common), wrapping integer arithmetic and
#: math (math), packing and block rasterization (codegen)
ALWAYS = ("common", "math", "codegen")
#: the others, each included when the kernel names what it defines (NVRTC parses every header
#: included, 1-5 ms each; cuda_fp8.h, which common.cuh includes unless TC_NO_FP8 is defined,
#: about 15 ms: a GEMM's compile spends a quarter of its time in headers it does not use)
USED_WHEN = {
    "fp8": re.compile(r"__nv_fp8"),
    "lowbit": re.compile(r"\btc::(?:Sub(?:Int|Float)\b|bits_|from_code\b|decode_|encode_)"),
    "fast_cast": re.compile(r"\btc::fast_cast_"),
    "mma": re.compile(r"\btc::mma_"),
    "ldmatrix": re.compile(r"\btc::(?:ld|st)matrix_"),
    "cp_async": re.compile(r"\btc::cp_async_"),
    "reduce": re.compile(r"\btc::(?:warp_reduce|block_all_reduce|SumOp|MaxOp|MinOp)"),
    "atomic": re.compile(r"\btc::(?:atomic_|red_add)"),
    "scan": re.compile(r"\btc::warp_inclusive_scan"),
    "debug": re.compile(r"\btc::dbg\b"),
    "sync": re.compile(r"\btc::(?:sync_|fence_|named_barrier_|cluster_)"),
    "wgmma": re.compile(r"\btc::wgmma_"),
    "tma": re.compile(
        r"\btc::(?:tma_|mbarrier_|fence_mbarrier_init|prefetch_tensor_map|TensorMap)"
    ),
}


#: a kernel that names no bf16 type or function defines TC_NO_BF16: common.cuh then leaves out
#: cuda_bf16.h (4-7 ms of NVRTC) and the library its bf16 overloads (cuda_fp8.h includes it anyway)
USES_BF16 = re.compile(r"bfloat|\bbf16")


def include_lines(code: str) -> str:
    """The #include lines of a kernel whose helpers, signature and body are `code`: the headers
    it uses (see USED_WHEN), in HEADERS order, after `#define TC_NO_FP8` when it uses no fp8 and
    `#define TC_NO_BF16` when it uses no bf16."""
    used = [h for h in HEADERS if h in ALWAYS or (h in USED_WHEN and USED_WHEN[h].search(code))]
    lines = [f'#include "tilecraft/{h}.cuh"' for h in used]
    if "fp8" not in used:
        lines.insert(0, "#define TC_NO_FP8  // cuda_fp8.h is not parsed")
        if not USES_BF16.search(code):
            lines.insert(1, "#define TC_NO_BF16  // cuda_bf16.h is not parsed")
    return "\n".join(lines)


@dataclass
class GeneratedKernel:
    name: str
    source: str
    params: tuple
    launch: object
    state: object
    # sources asking for more blocks per SM in __launch_bounds__ than `source` (one), tried
    # first, in order (block_cuda.build.GeneratedBlock)
    ladder_sources: tuple[str, ...] = ()


def compile_generated(gen: GeneratedKernel, arch: str):
    """Compile `gen` (NVRTC) as block_cuda.build.compile_block does: the first of its ladder
    sources that does not spill, else its one-block source. Returns (CompiledCubin, source)."""
    from tilecraft.codegen.block_cuda.build import compile_block

    return compile_block(gen, arch)


def _eval(e, dims: dict[str, int]):
    """Evaluate a grid expression on the bound dynamic dims (host side)."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return dims[e.name]
    if isinstance(e, Cast):
        return _eval(e.value, dims)
    if isinstance(e, BinOp):
        a, b = _eval(e.a, dims), _eval(e.b, dims)
        ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
               "%": operator.mod, "min": min, "max": max,
               "/": lambda x, y: int(x / y)}
        return ops[e.op](a, b)
    raise TilecraftError("TC502", detail=f"grid size `{e}`", hint="")


def _options(arch: str | None, options: CompileOptions | None) -> CompileOptions:
    """`options`, else the defaults for `arch` (the environment is read in jit.py, not here)."""
    if options is None:
        return CompileOptions.for_arch(arch)
    if arch is not None and arch != options.target.arch:
        raise ValueError(f"arch {arch!r} differs from the options' {options.target.arch!r}")
    return options


def generate_cuda(func: PrimFunc, arch: str | None = None,
                  options: CompileOptions | None = None) -> GeneratedKernel:
    """The CUDA source of `func` for `arch` (else the live GPU's, else sm_90a) or `options`:
    the pass pipeline, then the block printer on the lowered program (codegen/block_cuda)."""
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.passes.lower_tile_ops import lowered_program

    opts = _options(arch, options)
    state = lower(func, opts)
    gen = generate_block(lowered_program(state), opts.target.arch, state.prepared)
    return GeneratedKernel(gen.name, gen.source, gen.params, gen.launch, state,
                           gen.ladder_sources)


class CudaKernel:
    """A compiled kernel: `.source`, `.resources`, and `kernel(*tensors)` launches it."""

    def __init__(self, gen: GeneratedKernel, arch: str, writes: tuple[str, ...] | None = None):
        from tilecraft.runtime import ArgChecker, RuntimeKernel

        self.generated = gen
        compiled, self.source = compile_generated(gen, arch)
        # `writes`: the parameters the kernel stores to (only they may not overlap others)
        checker = ArgChecker(gen.params, kernel=gen.name, writes=writes)
        self.runtime = RuntimeKernel(compiled, gen.params, gen.launch, self.source,
                                     checker=checker)

    @property
    def resources(self):
        return self.runtime.resources

    def __call__(self, *tensors):
        self.runtime(*tensors)


def build_cuda_kernel(func: PrimFunc, arch: str | None = None,
                      options: CompileOptions | None = None) -> CudaKernel:
    from tilecraft.args import written_params

    options = _options(arch, options)
    gen = generate_cuda(func, options=options)
    return CudaKernel(gen, options.target.arch, written_params(func))
