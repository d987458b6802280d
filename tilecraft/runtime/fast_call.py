"""The per-call fast path of a RuntimeKernel: calls whose argument signature was accepted before.

The argument checker (args.py) decides a call from, per tensor argument, its type, dtype, shape,
strides and device (contiguity and the dynamic dims follow from shape and strides; where the
parameter must be contiguous, `is_contiguous()` is all the checker asks of the strides, and the
cheaper call stands for them in the signature), plus two things that change with the data: each
tensor's address (its alignment; its overlap with the others) and the scalars' values. Once the
checker has accepted a call and its launch went out through ctypes (launch.py),
`FastCall.remember` keeps that signature with what followed from it: the device, the function
and context to launch in, the grid (already checked against CUDA's limits), the outputs' shapes,
the dim-bound scalars' values, the tensor maps' shapes and the tensors' byte spans. A later call
with a known signature reads each tensor's data pointer (alignment: one modulo), converts its
scalars, allocates its outputs, asks torch for its current stream, writes the parameter block's
slots and calls cuLaunchKernel once. Where the kernel writes a tensor, two comparisons per pair
of tensors with the signature's byte spans refuse overlapping arguments (TC317):

    fast = FastCall(checker, launcher, smem)
    out = fast.call(args, stream)     # MISS, or what the kernel returns (outputs or None)
    fast.remember(args, bound, grid)  # after the checker accepted `args` and the launch went out
    print(fast.source)                # the call, written for this kernel (fast_source.py)

Anything unusual is a miss (`MISS`), never an error: an unknown signature, something that is
not a tensor, a misaligned pointer, tensors that overlap where one is written, a scalar the
checker would refuse, a tensor map that does not encode. The caller then runs the full
checker, which raises its usual error at the user's line (or accepts, launches and remembers).
So the fast path refuses exactly what the checker refuses; data pointers, scalars and the
current stream are read at every call, never remembered.

Where the compiled launcher is built (native_launch.py), `call` is its `call`: the same checks
against the signature last launched, made in C, and the Python call above as the fallback on
a miss (which launches, then primes the launcher with its own signature: `_prime`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from . import native_launch
from .arg_plan import CallPlan, byte_range
from .arg_values import BadScalar, scalar_value
from .args import ArgChecker, BoundArgs
from .driver import ensure_context
from .fast_source import call_source, output_sizes
from .launch import Launcher, raw_stream_function
from .tensor_map import TensorMapError

#: "not known here: run the checker", as Python's binary operators say "ask the other operand"
MISS: Any = NotImplemented
_MAX_SIGNATURES = 256  # remembered per kernel (each new shape of a dynamic dim is one)


def signature(args: Sequence[Any], plan: CallPlan) -> tuple:
    """Per caller-passed tensor of `plan`: type, dtype, shape, strides (`is_contiguous()` where
    the parameter must be contiguous), device (flat). The generated call builds the same tuple.
    Raises (AttributeError, TypeError, torch's RuntimeError) for what is not a dense tensor."""
    sig: list[Any] = []
    for t in plan.tensors:
        x = args[t.arg]
        sig += (type(x), x.dtype, x.shape, x.is_contiguous() if t.contiguous else x.stride(),
                x.device)
    return tuple(sig)


class _Accepted:
    """What a remembered signature implies: where and how to launch, and the per-signature
    values (dim-bound scalars, output shapes, tensor-map shapes, byte spans)."""

    __slots__ = ("device", "ends", "fixed", "function", "grid", "key", "maps", "primary",
                 "shapes", "where")

    def __init__(self, key: tuple, device: int, function: Any, primary: int | None,
                 grid: tuple[int, int, int] | None, fixed: tuple, where: Any, shapes: tuple,
                 maps: tuple, ends: tuple):
        self.key = key  # the signature (what the compiled launcher compares a call with)
        self.device = device
        self.function = function  # a ctypes handle; None: an empty grid, nothing to launch
        self.primary = primary  # the device's primary context (the one to launch in)
        self.grid = grid
        self.fixed = fixed  # values of the dim-bound scalars, in plan order
        self.where = where  # the outputs' torch device
        self.shapes = shapes  # per output: its shape
        self.maps = maps  # ((map parameter index, pointer index, shape, encoder), ...)
        self.ends = ends  # per tensor: the bytes past its data pointer its elements span


class FastCall:
    """The remembered signatures of one kernel and the call that uses them."""

    def __init__(self, checker: ArgChecker, launcher: Launcher, smem: int):
        self._checker = checker
        self._plan = plan = checker.plan
        self._launcher = launcher
        self._smem = smem
        n = len(plan.tensors)
        #: parameter slot -> index among the call's pointers (tensors, then outputs)
        self._pointer_of = {t.slot: k for k, t in enumerate(plan.tensors)}
        self._pointer_of.update({o.slot: n + k for k, o in enumerate(plan.outputs)})
        self._entries: dict[tuple, _Accepted] = {}
        self.source = ""
        self._native: Any = None  # the compiled launcher (native_launch.py), once there is one
        self._nstate: list[Any] = [None]  # what it is primed with
        #: call(args, stream): what the kernel returns, or MISS
        self.call = self._make_call()
        if self._native is None and self.source and _native_fits(plan):
            native_launch.when_ready(self)  # the build is under way: switch when it is done

    def remember(self, args: Sequence[Any], bound: BoundArgs,
                 grid: tuple[int, int, int] | None) -> None:
        """Keep the signature of `args`, which the checker accepted as `bound` and which
        launched with `grid` (None: empty) on the smem this FastCall was made for."""
        plan = self._plan
        if bound.device is None or not plan.tensors:
            return  # no tensor says where the call runs
        function = primary = None
        if grid is not None:
            found = self._launcher.function_on(bound.device, self._smem)
            if found is None:
                return
            function, primary = ctypes.c_void_p(found[0]), found[1]
        try:
            key = signature(args, plan)
        except Exception:  # noqa: BLE001 - what the call would miss on: nothing to remember
            return
        fixed = tuple(bound.values[s.slot] for s in plan.scalars if s.arg is None)
        where = self._checker.output_device(bound.device, args)
        shapes = tuple(tuple(out.shape) for out in bound.outputs)
        maps = tuple((m.slot, self._pointer_of[m.tensor_slot],
                      tuple(d if isinstance(d, int) else bound.dims[d] for d in m.tensor.shape),
                      m.encoder)
                     for m in plan.maps)
        ends = ()
        if plan.pairs:  # the spans follow from shape, strides and dtype: the signature's
            ranges = [byte_range(args[t.arg].shape, args[t.arg].stride(),
                                 args[t.arg].element_size()) for t in plan.tensors]
            if any(start for start, _ in ranges):
                return  # an element below the data pointer (torch has none): the checker's
            ends = tuple(end for _, end in ranges)
        if len(self._entries) >= _MAX_SIGNATURES:
            self._entries.clear()
        self._entries[key] = _Accepted(key, bound.device, function, primary, grid, fixed, where,
                                       shapes, maps, ends)

    def _make_call(self) -> Callable[[Sequence[Any], int | None], Any]:
        """The call as straight-line Python written for this parameter list (`self.source`):
        a loop over the parameters would cost a third more than the work itself. Where the
        compiled launcher is built (native_launch.py) and fits the plan, the call is the
        launcher's, with the Python call as its fallback."""
        self._direct = direct = self._launcher.direct()
        mod = None
        if not self._plan.tensors or direct is None:  # nothing says where the call runs
            self.source = "def call(args, stream):\n    return MISS\n"
            env: dict[str, Any] = {"MISS": MISS}
        else:
            mod = native_launch.module() if _native_fits(self._plan) else None
            self.source, env = call_source(self._plan, direct, self._launcher.block,
                                           self._smem, self._pointer_of, native=mod is not None)
            env.update(MISS=MISS, entries=self._entries, empty=self._checker.empty,
                       raw_stream=raw_stream_function(), scalar_value=scalar_value,
                       BadScalar=BadScalar, maps_held=_maps_held, maps_encode=_maps_encode,
                       ensure_context=ensure_context, nstate=self._nstate, prime=self._prime)
        kernel = self._checker.kernel
        exec(compile(self.source, f"<tilecraft fast call of {kernel}>", "exec"), env)
        if mod is None or direct is None:
            return env["call"]
        launch, get_ctx, self._keep = native_launch.entry_points(self._launcher._lib)
        self._nstate[0] = None  # a new launcher: nothing primed
        self._native = mod.Launcher(launch, get_ctx, raw_stream_function(), direct.failed, MISS,
                                    env["call"])
        return self._native.call  # the Python call runs where the launcher misses

    def _upgrade(self) -> None:
        """The compiled launcher is built (native_launch.when_ready): remake the call with it."""
        self.call = self._make_call()

    def _prime(self, entry: _Accepted, pointers: tuple[int, ...], nkey: Any) -> None:
        """Give the compiled launcher the signature the Python call just launched (`entry`,
        whose tensor maps are those of `pointers`); the caller holds the block's lock, so the
        block's slots are this launch's. `nkey`: what `self._nstate` records for it."""
        plan, key = self._plan, entry.key
        tensors = tuple((t.arg, t.slot, *key[5 * k:5 * k + 3],
                         None if t.contiguous else key[5 * k + 3], key[5 * k + 4], t.align or 0)
                        for k, t in enumerate(plan.tensors))
        scalars = tuple((s.arg, s.slot, _NATIVE_KINDS[s.param.kind])
                        for s in plan.scalars if s.arg is not None)
        outputs = tuple((o.slot, output_sizes(o, entry.shapes[k]), o.dtype, entry.where)
                        for k, o in enumerate(plan.outputs))
        pairs = tuple((i, j, entry.ends[i], entry.ends[j]) for i, j in plan.pairs)
        pinned = tuple((src, pointers[src]) for _, src, _, _ in entry.maps)
        block = self._launcher.params
        spans = tuple((ctypes.addressof(s), ctypes.sizeof(s))
                      for s in (block.slot(i) for i in range(len(block.kinds))))
        try:
            self._native.prime((len(plan.caller_params), tensors, scalars, outputs, pairs,
                                pinned, self._checker.empty, entry.device,
                                entry.function.value, entry.primary, entry.grid,
                                self._launcher.block, self._smem, spans))
        except ValueError:  # a block the launcher does not take (over 4 KB): the Python path
            pass
        self._nstate[0] = nkey


#: the passed scalars' kinds the compiled launcher converts (launch_native.c's K_*)
_NATIVE_KINDS = {k: i for i, k in enumerate(("int8", "int16", "int32", "int64", "uint8",
                                             "uint16", "uint32", "uint64", "float32",
                                             "float64"))}


def _native_fits(plan: CallPlan) -> bool:
    """Whether the compiled launcher can take calls of `plan` (fewer than 64 pointers and
    scalars; passed scalars of the kinds it converts) and is switched on."""
    passed = [s for s in plan.scalars if s.arg is not None]
    return (native_launch.enabled() and len(plan.tensors) + len(plan.outputs) <= 64
            and len(passed) <= 64 and all(s.param.kind in _NATIVE_KINDS for s in passed))


def _maps_held(entry: _Accepted, pointers: tuple[int, ...], block: Any) -> bool:
    """Put the tensor maps of `pointers` into the parameter block (the caller holds its lock);
    only those the block does not hold already are looked up and copied. False: one does not
    encode."""
    held = block.map_held
    for slot, src, shape, encoder in entry.maps:
        want = (pointers[src], shape)
        if held.get(slot) != want:
            try:
                blob = encoder(*want)  # cached per address and shape
            except TensorMapError:
                return False
            block.set_map(slot, blob, want)
    return True


def _maps_encode(entry: _Accepted, pointers: tuple[int, ...]) -> bool:
    """Whether the tensor maps of `pointers` encode (an empty grid launches nothing, but the
    checker refuses a tensor that cannot get a map all the same)."""
    try:
        for _, src, shape, encoder in entry.maps:
            encoder(pointers[src], shape)
    except TensorMapError:
        return False
    return True
