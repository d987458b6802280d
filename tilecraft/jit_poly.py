"""Shape-polymorphic jit: `@tilecraft.jit` on a kernel function, specialized per call.

The TileLang paper's listing I.1 writes a kernel without a factory; its tensors have no shape:

    @tilecraft.jit
    def matmul(A: T.Tensor, B: T.Tensor, C: T.Tensor):        # M, N, K, block_* from the closure
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            ...
    matmul(a, b, c)            # builds (once per shapes and dtypes) and runs the kernel

A parameter annotated with bare `T.Tensor` takes its shape and dtype from the call; the body can
read them as `A.shape` / `A.dtype`. `T.Tensor(("M", "K"), dtype)` names the call's dimensions:
`M` and `K` are bound as compile-time ints in the body, must agree between the tensors that use
them and with a closure or global value of the same name (TC316); the dtype is as written and
checked by the argument checker. Parameters with a full shape (ints, `T.dynamic`) and scalar
parameters take part as in a `T.prim_func`. One kernel is made per key (the bare tensors' shapes
and dtypes, the named dims' sizes), kept in memory and, like a factory call, in the disk jit cache.
`.compile(*tensors)` returns that kernel (a JITKernel) without running it.

Requires the call's tensors; guarantees the kernel it runs was parsed with exactly those shapes.
Outputs cannot be allocated (there is no shape to allocate from): `out_idx` is refused.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from typing import Any

from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.diagnostics.errors import entry_point
from tilecraft.jit import JITKernel
from tilecraft.jit_factory import JITFactory
from tilecraft.jit_options import call_span

_TENSOR_WORD = re.compile(r"\bTensor\b")


def _frames_module() -> Any:
    return sys.modules.get("tilecraft.frontend.frames")


def _is_bare_tensor(ann: Any) -> bool:
    """`A: T.Tensor` (also `T.Buffer`): the function itself, not called."""
    return (getattr(ann, "__module__", None) == "tilecraft.language.kernel"
            and getattr(ann, "__name__", None) == "Tensor")


def _is_spec(ann: Any) -> bool:
    frames = _frames_module()
    return frames is not None and isinstance(ann, frames.TensorSpec)


def is_kernel_function(fn: types.FunctionType) -> bool:
    """True when a parameter of `fn` is annotated with `T.Tensor` (bare or called)."""
    for name, ann in getattr(fn, "__annotations__", {}).items():
        if name == "return":
            continue
        if _is_bare_tensor(ann) or _is_spec(ann):
            return True
        if isinstance(ann, str) and _TENSOR_WORD.search(ann):
            return True
    return False


def _closure(fn: types.FunctionType) -> dict[str, Any]:
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell: assigned after the def
            pass
    return out


class JITPolymorphic(JITFactory):
    """`@tilecraft.jit` on a kernel function: call it with tensors to build (cached) and run."""

    def __init__(self, fn: types.FunctionType, *, cache: bool = True, **options: Any):
        if options.get("out_idx") is not None:
            raise TilecraftError(
                "TC108", span=call_span("out_idx"), detail=f"out_idx on kernel function "
                f"`{fn.__name__}`, whose tensors take their shapes from the call",
                hint="pass the output tensors to the call, or write a factory returning a "
                "T.prim_func whose outputs have shapes")
        super().__init__(fn, cache=cache, **options)
        self._signature = inspect.signature(fn)
        self._annotations: dict[str, Any] | None = None

    @entry_point
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Specialize on the tensors' shapes and dtypes (once per key) and run the kernel."""
        kernel, ordered = self._kernel_for(args, kwargs)
        return kernel(*ordered)

    @entry_point
    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """The kernel specialized for these arguments, without running it."""
        return self._kernel_for(args, kwargs)[0]

    # ---- specialization ----------------------------------------------------------------
    def _kernel_for(self, args: tuple, kwargs: dict) -> tuple[JITKernel, list[Any]]:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TilecraftError("TC316", span=call_span(), kernel=self.factory.__name__,
                                 detail=str(e), hint=f"call it as {self.factory.__name__}"
                                 f"{self._signature}") from None
        ordered = list(bound.args)
        key = self._key(ordered)
        return JITFactory.__call__(self, *key), ordered

    def _annotation_map(self) -> dict[str, Any]:
        """Each parameter's annotation, strings (`from __future__ import annotations`)
        evaluated in the function's closure and globals."""
        if self._annotations is None:
            fn = self.factory
            scope = {**fn.__globals__, **_closure(fn)}
            anns = {}
            for name in self._signature.parameters:
                ann = fn.__annotations__.get(name)
                if isinstance(ann, str):
                    try:
                        ann = eval(ann, scope)  # noqa: S307 - the user's own annotation
                    except Exception:  # noqa: BLE001 - the parser reports it at the line
                        ann = None
                anns[name] = ann
            self._annotations = anns
        return self._annotations

    def _key(self, args: list[Any]) -> tuple:
        """Per parameter: ("tensor", shape, dtype) for a bare T.Tensor, ("named", sizes) for
        a T.Tensor with named dims, None otherwise. Checks the named dims agree."""
        from tilecraft.args import arg_dtype, is_torch
        from tilecraft.runtime.params import packed_dtype

        anns = self._annotation_map()
        key: list[Any] = []
        names: dict[str, tuple[int, str]] = {}
        packed: dict[int, tuple[str, Any]] = {}  # key index -> (name, annotation)
        for (name, ann), arg in zip(anns.items(), args):
            bare, spec = _is_bare_tensor(ann), _is_spec(ann)
            named = spec and any(isinstance(d, str) for d in ann.shape)
            if not (bare or named):
                key.append(None)
                continue
            if named and packed_dtype(_dtype_name(ann.dtype)) is not None:
                packed[len(key)] = (name, ann)  # its bytes have no shape: bound by the others
                key.append(None)
                continue
            if not (is_torch(arg) or type(arg).__module__ == "numpy" and hasattr(arg, "shape")):
                self._refuse(name, f"`{name}` is annotated T.Tensor, but the call passes a "
                             f"{type(arg).__name__}", "pass a torch tensor (or a numpy array "
                             "on the interpreter)")
            shape = tuple(int(d) for d in arg.shape)
            if bare:
                dtype = arg_dtype(arg)
                if dtype is None:
                    self._refuse(name, f"`{name}` has dtype {arg.dtype}, which tilecraft does not "
                                 "know", "convert it to one of tilecraft's dtypes")
                key.append(("tensor", shape, dtype.name))
                continue
            if len(shape) != len(ann.shape):
                dims = ", ".join(str(d) for d in ann.shape)
                self._refuse(name, f"`{name}` is annotated with {len(ann.shape)} dimension(s) "
                             f"({dims}), but the call passes a {len(shape)}-D tensor",
                             f"pass a {len(ann.shape)}-D tensor")
            sizes = []
            for d, n in zip(ann.shape, shape):
                if not isinstance(d, str):
                    continue
                if d in names and names[d][0] != n:
                    self._refuse(name, f"dimension `{d}` is {names[d][0]} in `{names[d][1]}` and "
                                 f"{n} in `{name}`", f"all tensors using `{d}` must agree on it")
                names.setdefault(d, (n, name))
                sizes.append(n)
            key.append(("named", tuple(sizes)))
        for k, (name, ann) in packed.items():
            free = [d for d in ann.shape if isinstance(d, str) and d not in names]
            if free:
                self._refuse(name, f"`{name}` has dtype {_dtype_name(ann.dtype)}, whose tensors "
                             f"travel as packed bytes without a shape, and no other tensor "
                             f"names its dimension(s) {', '.join(free)}",
                             "name those dimensions in another tensor parameter too")
            key[k] = ("named", tuple(names[d][0] for d in ann.shape if isinstance(d, str)))
        self._check_python_values(names)
        return tuple(key)

    def _check_python_values(self, names: dict[str, tuple[int, str]]) -> None:
        fn = self.factory
        closure = _closure(fn)
        for d, (n, param) in names.items():
            where = "closure" if d in closure else "globals" if d in fn.__globals__ else None
            if where is None:
                continue
            value = closure[d] if where == "closure" else fn.__globals__[d]
            if isinstance(value, bool) or not isinstance(value, int) or value != n:
                self._refuse(param, f"`{d}` is {value!r} in the kernel's {where}, but the call's "
                             f"`{param}` gives {d} = {n}", f"name the dimension differently, or "
                             f"drop the Python value `{d}`")

    def _refuse(self, param: str, detail: str, hint: str) -> None:
        note = _param_span(self.factory, param)
        raise TilecraftError("TC316", span=call_span(), kernel=self.factory.__name__,
                             detail=detail, hint=hint,
                             notes=((note, f"parameter `{param}`"),) if note else ())

    def _build(self, args: tuple, kwargs: dict) -> JITKernel:
        """The kernel for key `args` (see `_key`): the function parsed with concrete shapes."""
        from tilecraft import dtypes as dt
        from tilecraft.frontend.frames import TensorSpec
        from tilecraft.frontend.parser import parse_prim_func

        fn = self.factory
        specs: dict[str, Any] = {}
        names: dict[str, int] = {}
        for (name, ann), part in zip(self._annotation_map().items(), args):
            if part is None:
                continue
            if part[0] == "tensor":
                specs[name] = TensorSpec(part[1], dt.resolve(part[2]))
                continue
            sizes = iter(part[1])
            shape = []
            for d in ann.shape:
                if isinstance(d, str):
                    names[d] = next(sizes)
                    shape.append(names[d])
                else:
                    shape.append(d)
            specs[name] = TensorSpec(tuple(shape), ann.dtype)
        scope = dict(fn.__globals__)
        scope.update(names)
        special = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__,
                                     fn.__closure__)
        special.__kwdefaults__ = fn.__kwdefaults__
        special.__qualname__ = fn.__qualname__
        special.__module__ = fn.__module__
        special.__annotations__ = {**fn.__annotations__, **specs}
        return JITKernel(parse_prim_func(special), **self.options)


def _param_span(fn: types.FunctionType, param: str) -> Span | None:
    from tilecraft.frontend.source import parse_function_source

    try:
        src = parse_function_source(fn)
    except RuntimeError:
        return None
    for arg in src.tree.args.args:
        if arg.arg == param:
            return src.span(arg)
    return None


def _dtype_name(dtype: Any) -> str:
    return getattr(dtype, "name", None) or str(dtype)
