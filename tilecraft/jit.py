"""The user-facing entry points: `tilecraft.jit`, `tilecraft.compile` and JITKernel.

    @tilecraft.jit(out_idx=[-1])
    def matmul(M, N, K, ...):          # a factory returning a T.prim_func
        ...
    kernel = matmul(1024, 1024, 1024)  # prepared once per argument set, then cached
    c = kernel(a, b)                   # torch tensors: CUDA -> GPU, CPU -> interpreter

Targets: "auto" picks per call from where the tensors live; "interp" always runs the CPU
interpreter; "cuda" always the GPU. `TILECRAFT_INTERPRET=1` forces the interpreter.

A call on CUDA tensors is one pass of the runtime's argument checker (which also allocates the
outputs; errors point at the kernel's parameters) and one launch. A factory call in a new process
finds its CUDA kernel in the jit cache (jit_cache.py) without running the front end; the IR is
then built only if something needs it (the interpreter, `.func`, `.script()`). This module imports
neither the IR nor the compiler until they are needed.

Also here: `jit`/`compile` and their keywords (checked in jit_options.py). Factories are
JITFactory (jit_factory.py); kernel functions with shapeless `T.Tensor` parameters are
JITPolymorphic (jit_poly.py).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tilecraft import jit_cache
from tilecraft.diagnostics import TilecraftError, warn_at
from tilecraft.diagnostics.errors import entry_point
from tilecraft.jit_options import (
    TARGETS,
    call_span,
    check_out_idx,
    check_target,
    refuse_unknown,
)

if TYPE_CHECKING:
    from tilecraft.ir import PrimFunc
    from tilecraft.profiler import Profiler, TensorSupplyType
    from tilecraft.runtime import RuntimeKernel

__all__ = ["TARGETS", "JITKernel", "compile", "jit"]


_ENVIRON = getattr(os.environ, "_data", None)  # CPython's dict behind os.environ
_INTERPRET_KEY = os.environ.encodekey("TILECRAFT_INTERPRET") if _ENVIRON is not None else None


def _interpret_forced() -> bool:
    # a kernel call asks this every time: os.environ.get of an unset name costs 0.5 us (a
    # KeyError inside), a look into the dict behind it 20 ns
    if _ENVIRON is not None and _INTERPRET_KEY not in _ENVIRON:
        return False
    return os.environ.get("TILECRAFT_INTERPRET", "") not in ("", "0", "false", "False")


def _debug_nans_forced() -> bool:
    return os.environ.get("TILECRAFT_DEBUG_NANS", "") not in ("", "0", "false", "False")


class JITKernel:
    """A prepared kernel: call it with tensors; inspect its IR, CUDA source and resources."""

    def __init__(
        self,
        func: PrimFunc,
        out_idx: int | list[int] | None = None,
        target: str = "auto",
        arch: str | None = None,
        debug_nans: bool = False,
        debug_root_path: str | None = None,
    ):
        self._setup(target, arch, debug_nans, debug_root_path)
        self._func = func
        self.out_idx = _legal_out_idx(func, out_idx)
        self._dump_program()

    @classmethod
    def from_cache(
        cls,
        cached: jit_cache.CachedKernel,
        make_func: Callable[[], PrimFunc],
        debug_nans: bool = False,
        debug_root_path: str | None = None,
    ) -> JITKernel:
        """A kernel rebuilt from a jit-cache entry; `make_func` makes its IR if it is needed."""
        kernel = cls.__new__(cls)
        kernel._setup(cached.target, cached.arch, debug_nans, debug_root_path)
        kernel._make_func = make_func
        kernel._cached = cached
        kernel.out_idx = list(cached.out_idx)
        kernel._dump_program()
        return kernel

    def _setup(
        self, target: str, arch: str | None, debug_nans: bool, debug_root_path: str | None
    ) -> None:
        check_target("JITKernel", target)
        self.target = target
        self.arch = arch
        #: Stop the interpreter at the first NaN/inf made from finite values (read by the
        #: interpreter call in `_interpret`; `TILECRAFT_DEBUG_NANS=1` turns it on everywhere).
        self.debug_nans = bool(debug_nans)
        #: A directory to write the kernel's Tile IR script and CUDA source into (TileLang's
        #: `debug_root_path`), or None.
        self.debug_root_path = debug_root_path
        self._func: PrimFunc | None = None
        self._make_func: Callable[[], PrimFunc] | None = None
        self._cached: jit_cache.CachedKernel | None = None  # not yet turned into a RuntimeKernel
        self._save_as: str | None = None  # the jit-cache key the CUDA build is saved under
        self._cuda: RuntimeKernel | None = None
        self._fast: Any = None  # the RuntimeKernel's FastCall (made by its first launch)

    def _dump_program(self) -> None:
        if self.debug_root_path is not None:
            name = self.func.name
            _write_debug(self.debug_root_path, f"tilecraft_jit_program_{name}.py", self.script())

    # ---- inspection --------------------------------------------------------------------
    @property
    def func(self) -> PrimFunc:
        """The kernel's Tile IR (made on first use when the kernel came from the jit cache)."""
        if self._func is None:
            self._func = self._make_func()  # type: ignore[misc]
        return self._func

    @property
    def params(self):
        return self.func.params

    def script(self) -> str:
        """The kernel's Tile IR as readable script."""
        return self.func.script()

    def _cuda_kernel(self) -> RuntimeKernel:
        if self._cuda is None:
            if self._cached is not None:
                self._cuda = self._cached.record.runtime_kernel()
            else:
                self._cuda = self._build_cuda()
            _warn_spills(self._cuda)
            if self.debug_root_path is not None:
                name = f"tilecraft_jit_kernel_{self._cuda.name}.cu"
                _write_debug(self.debug_root_path, name, self._cuda.source)
        return self._cuda

    def _build_cuda(self) -> RuntimeKernel:
        """Lower the kernel to a block program (or take the one written at the Tilus level),
        print it with codegen/block_cuda, compile and wrap it."""
        from tilecraft.args import written_params
        from tilecraft.codegen.block_cuda import build_block_kernel
        from tilecraft.options import CompileOptions
        from tilecraft.passes import lower
        from tilecraft.passes.lower_tile_ops import lowered_program
        from tilecraft.runtime import ArgChecker, RuntimeKernel

        func = self.func
        options = CompileOptions.from_env(self.arch)
        program, prepared = self._block_program(), None
        if program is None:  # Tile IR: the pass pipeline lowers it to block instructions
            state = lower(func, options)
            program, prepared = lowered_program(state), state.prepared
        cuda = build_block_kernel(program, options.target.arch, prepared)
        built = cuda.runtime
        checker = ArgChecker(
            built.params,
            kernel=func.name,
            outputs=self._out_names(),
            writes=written_params(func),
            spans={p.name: p.span for p in func.params if p.span is not None},
            span=func.span,
        )
        kernel = RuntimeKernel(
            built.compiled, built.params, built.launch_spec, built.source, checker=checker
        )
        grid = _lowered_grid(cuda)
        if self._save_as is not None and grid is not None:
            entry = jit_cache.describe(
                kernel, grid, out_idx=self.out_idx, target=self.target, arch=self.arch
            )
            if entry is not None:
                jit_cache.save(self._save_as, entry)
        return kernel

    @entry_point
    def get_kernel_source(self) -> str:
        """The generated CUDA C++."""
        return self._cuda_kernel().source

    @property
    def resources(self):
        """Registers, spills and shared memory from the compiler's report."""
        return self._cuda_kernel().resources

    @entry_point
    def get_profiler(
        self,
        tensor_supply_type: TensorSupplyType | None = None,
        dynamic_sizes: Mapping[str, int] | None = None,
        scalars: Mapping[str, int | float] | None = None,
        device: Any = None,
    ) -> Profiler:
        """A Profiler that makes this kernel's inputs from its signature (TileLang's profiler):
        `tensor_supply_type` (default `TensorSupplyType.Normal`), `dynamic_sizes` for the
        T.dynamic dims, `scalars` for scalar parameters; outputs in out_idx are allocated by the
        kernel. See tilecraft/profiler/profiler.py."""
        from tilecraft.profiler import Profiler, TensorSupplyType

        return Profiler(
            self,
            tensor_supply_type=TensorSupplyType.Normal
            if tensor_supply_type is None else tensor_supply_type,
            dynamic_sizes=dynamic_sizes,
            scalars=scalars,
            device=device,
        )

    # ---- calling -----------------------------------------------------------------------
    @entry_point
    def __call__(self, *args):
        fast = self._fast
        if fast is not None and not _interpret_forced():
            out = fast.call(args, None)  # arguments of a signature accepted before
            if out is not NotImplemented:  # runtime/fast_call.py's MISS
                return out
        if self._on_interpreter(args):
            return self._interpret(list(args))
        kernel = self._cuda_kernel()
        out = kernel(*args)
        if fast is None:  # a hit means CUDA tensors, so "auto" picks the GPU as "cuda" does
            self._fast = kernel._fast  # its `call` changes once the compiled launcher is built
        return out

    def _block_program(self):
        """The kernel as a block program when it is written at the Tilus level, else None."""
        from tilecraft.block.from_kernel import block_program_of

        return block_program_of(self.func)

    def _vm_program(self):
        """The block program the block VM runs on the CPU: the Tilus-level kernel's own, the
        lowered program of a kernel that mixes both levels, else None (the interpreter runs
        the Tile IR)."""
        from tilecraft.block.from_kernel import is_mixed

        program = self._block_program()
        if program is None and is_mixed(self.func):
            from tilecraft.options import CompileOptions
            from tilecraft.passes import lower
            from tilecraft.passes.lower_tile_ops import lowered_program

            program = lowered_program(lower(self.func, CompileOptions.from_env(self.arch)))
        return program

    def _on_interpreter(self, args: tuple) -> bool:
        if self.target == "interp" or _interpret_forced():
            return True
        if self.target == "cuda":
            return False
        return not any(getattr(a, "is_cuda", False) for a in args)

    def _interpret(self, inputs: list[Any]):
        from tilecraft import interp

        func = self.func
        full = self._with_outputs(inputs) if self.out_idx else inputs
        debug_nans = self.debug_nans or _debug_nans_forced()
        program = self._vm_program()
        if program is not None:  # block instructions (the Tilus level): the block VM
            from tilecraft.args import bind_arguments
            from tilecraft.block.from_kernel import run_on_vm

            bind_arguments(func, full)  # the interpreter's argument checks
            run_on_vm(program, full)
        else:
            interp.run(func, full, debug_nans=debug_nans)  # checks the arguments first
        if not self.out_idx:
            return None
        outs = [full[i] for i in self.out_idx]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _out_names(self) -> list[str]:
        return [self.func.params[i].name for i in self.out_idx]

    def _with_outputs(self, inputs: list[Any]) -> list[Any]:
        """`inputs` checked by the GPU path's argument checker (tilecraft/args.py), with the
        out_idx tensors it allocates put in their places."""
        from tilecraft.args import arg_checker

        bound = arg_checker(self.func, self._out_names()).bind(inputs, require_cuda=False)
        full = list(inputs)
        for i, out in zip(self.out_idx, bound.outputs):  # ascending: each lands at its index
            full.insert(i, out)
        return full


def _warn_spills(kernel: RuntimeKernel) -> None:
    """A PerformanceWarning at the kernel's line when ptxas spilled registers to local memory."""
    res = kernel.resources
    if not res.has_spills:
        return
    amount = (f"{res.spill_stores} bytes of spill stores, {res.spill_loads} bytes of spill loads"
              if res.spill_bytes is not None else f"{res.spill_instructions} spill instructions")
    warn_at(
        f"kernel `{kernel.name}` spills registers to local memory on {kernel.arch} ({amount}; "
        f"{res.registers} registers per thread) and will run slowly: give each thread fewer "
        "live values (more threads, a smaller tile, fewer pipeline stages)",
        kernel.checker.span,
    )


def _legal_out_idx(func: PrimFunc, out_idx: int | list[int] | None) -> list[int]:
    """`out_idx` as sorted non-negative indices of tensor parameters (TC108 otherwise)."""
    from tilecraft.ir import Buffer

    n = len(func.params)
    wanted = [] if out_idx is None else [out_idx] if isinstance(out_idx, int) else list(out_idx)
    for i in wanted:
        if not (isinstance(i, int) and -n <= i < n):
            raise TilecraftError(
                "TC108", span=func.span, detail=f"out_idx {i!r}: kernel `{func.name}` has {n} "
                f"parameter(s)", hint=f"an index from {-n} to {n - 1} (-1 is the last parameter)")
        if not isinstance(func.params[i], Buffer):
            p = func.params[i]
            raise TilecraftError(
                "TC108", span=p.span or func.span, detail=f"out_idx {i} names scalar parameter "
                f"`{p.name}`", hint="outputs are tensor parameters")
    return sorted({i % n for i in wanted})


def _write_debug(root: str, name: str, text: str) -> None:
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, name), "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _lowered_grid(cuda: Any) -> tuple | None:
    """The IR of the grid the block program launches."""
    return cuda.program.grid


_JIT_KEYWORDS = ("out_idx", "target", "arch", "cache", "debug_nans", "debug_root_path",
                 "autotune")


@entry_point
def jit(
    func=None,
    *,
    out_idx: int | list[int] | None = None,
    target: str = "auto",
    arch: str | None = None,
    cache: bool = True,
    debug_nans: bool = False,
    debug_root_path: str | None = None,
    autotune: bool | str | dict = False,
    **tilelang_options,
):
    """Decorate a kernel factory, a kernel function or a `T.prim_func` to get callable kernels.

    - On a factory (a function returning a `T.prim_func`): calling it returns a JITKernel, made
      once per argument set and cached.
    - On a kernel function whose parameters are annotated with `T.Tensor` (listing I.1 of the
      TileLang paper): calling it with tensors specializes it on their shapes and dtypes (one
      kernel per shapes/dtypes, cached) and runs it; see tilecraft/jit_poly.py.
    - On a `T.prim_func`: the JITKernel itself.

    `out_idx`: the parameters the kernel allocates and returns (`[-1]`: the last). `target`:
    "auto" (follow the tensors), "cuda" or "interp". `arch`: build for this GPU ("sm_90a",
    "sm_80") now, GPU or not. `cache=False` keeps the kernels out of the disk jit cache (as
    does `TILECRAFT_JIT_CACHE=0`). `debug_nans=True`: the interpreter stops at the first
    NaN/inf made from finite values. `debug_root_path`: a directory to write each kernel's IR
    script and CUDA source into. `autotune=True` (or a dict of `tilecraft.autotune`'s keywords,
    `{"topk": 5}`) on a factory: its first call per argument set times the recommended
    configurations on the GPU and returns the fastest (tilecraft/tune/tuner.py);
    `autotune="recommend"`: the tile keywords a call leaves out take the recommender's best
    for its arguments and target, nothing timed. TileLang's
    other keywords (`execution_backend`, `target_host`,
    `verbose`, `pass_configs`, `compile_flags`) are accepted only with their no-op values (TC113);
    any other keyword is TC111.
    """
    refuse_unknown("tilecraft.jit", tilelang_options, _JIT_KEYWORDS)
    check_target("tilecraft.jit", target)
    check_out_idx("tilecraft.jit", out_idx)
    options = {"out_idx": out_idx, "target": target, "arch": arch, "debug_nans": debug_nans,
               "debug_root_path": debug_root_path}
    tune = _tune_options(autotune)
    if func is None:
        return lambda f: _autotuned(_decorate(f, cache, options), tune)
    return _autotuned(_decorate(func, cache, options), tune)


def _tune_options(autotune: Any) -> dict | None:
    """autotune= as tilecraft.autotune's keywords (None: no tuning); checked now."""
    if autotune is False or autotune is None:
        return None
    if autotune is True:
        return {}
    if autotune == "recommend":
        return {"topk": 1}
    if isinstance(autotune, dict):
        from tilecraft.tune.autotuned import TuneOptions

        known = ("configs", "space", "topk", "warmup", "rep", "progress")
        refuse_unknown("tilecraft.jit(autotune={...})",
                       {k: v for k, v in autotune.items() if k not in known}, known)
        TuneOptions.create(**autotune)  # bad values: TC108 here
        return autotune
    raise TilecraftError("TC108", span=call_span(), detail="autotune= takes True, False, "
                         '"recommend" or a dict of tilecraft.autotune\'s keywords, not '
                         f"{autotune!r}"[:120], hint='autotune=True, autotune="recommend" or '
                         'autotune={"topk": 5}')


def _autotuned(kernel: Any, tune: dict | None) -> Any:
    if tune is None:
        return kernel
    from tilecraft.jit_factory import JITFactory
    from tilecraft.tune.autotuned import autotune

    if not isinstance(kernel, JITFactory):
        raise TilecraftError("TC108", span=call_span(), detail="tilecraft.jit(autotune=...) "
                             f"on a {type(kernel).__name__}: only a kernel factory has "
                             "configurations to tune", hint="decorate a factory whose keyword "
                             "parameters are its tile sizes (def matmul(M, N, K, block_M=128))")
    return autotune(**tune)(kernel)


def _decorate(func, cache: bool, options: dict):
    from tilecraft import jit_poly
    from tilecraft.jit_factory import JITFactory

    if not isinstance(func, types.FunctionType):
        from tilecraft.ir import PrimFunc

        if isinstance(func, PrimFunc):
            return JITKernel(func, **options)
    if not callable(func):
        raise TilecraftError(
            "TC108", span=call_span(), detail=f"@tilecraft.jit on a {type(func).__name__}",
            hint="decorate a kernel factory, a kernel function or a T.prim_func")
    if isinstance(func, types.FunctionType) and jit_poly.is_kernel_function(func):
        return jit_poly.JITPolymorphic(func, cache=cache, **options)
    return JITFactory(func, cache=cache, **options)


@entry_point
def compile(
    func: PrimFunc,
    out_idx: int | list[int] | None = None,
    target: str = "auto",
    arch: str | None = None,
    *,
    debug_nans: bool = False,
    debug_root_path: str | None = None,
    **tilelang_options,
) -> JITKernel:
    """Prepare a `T.prim_func` for calling (the options are those of `tilecraft.jit` but
    `cache`)."""
    refuse_unknown("tilecraft.compile", tilelang_options, _JIT_KEYWORDS[:3] + _JIT_KEYWORDS[4:6])
    check_target("tilecraft.compile", target)
    check_out_idx("tilecraft.compile", out_idx)
    from tilecraft.ir import PrimFunc

    if not isinstance(func, PrimFunc):
        raise TilecraftError(
            "TC108", span=call_span(), detail=f"tilecraft.compile of a {type(func).__name__}",
            hint="compile a T.prim_func; decorate factories and kernel functions with "
            "@tilecraft.jit")
    return JITKernel(func, out_idx=out_idx, target=target, arch=arch, debug_nans=debug_nans,
                     debug_root_path=debug_root_path)
