"""The per-call fast path of a RuntimeKernel: calls whose argument signature was accepted before.

The argument checker (args.py) decides a call from, per tensor argument, its type, dtype, shape,
strides and device (contiguity and the dynamic dims follow from shape and strides), plus two
things that change with the data: each tensor's address (its alignment) and the scalars' values.
Once the checker has accepted a call and its launch went out through ctypes (launch.py),
`FastCall.remember` keeps that signature with what followed from it: the device, the grid
(already checked against CUDA's limits), the outputs' shapes, the dim-bound scalars' values and
the tensor maps' shapes. A later call with a known signature reads each tensor's data pointer
(alignment: one modulo), converts its scalars, allocates its outputs, writes the parameter
block's slots and calls cuLaunchKernel once:

    fast = FastCall(checker, launcher, smem)
    out = fast(args, stream)          # MISS, or what the kernel returns (outputs or None)
    fast.remember(args, bound, grid)  # after the checker accepted `args` and the launch went out

Anything unusual is a miss (`MISS`), never an error: an unknown signature, something that is
not a tensor, a misaligned pointer, a scalar the checker would refuse, a tensor map that does
not encode. The caller then runs the full checker, which raises its usual error at the user's
line (or accepts, launches and remembers). So the fast path refuses exactly what the checker
refuses; data pointers are read at every call, never remembered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .arg_values import BadScalar, scalar_value
from .args import ArgChecker, BoundArgs
from .launch import DirectLaunch, Launcher, current_stream
from .tensor_map import TensorMapError

MISS: Any = object()  # the fast path does not know this call: run the checker
_MAX_SIGNATURES = 256  # remembered per kernel (each new shape of a dynamic dim is one)


def signature(args: Sequence[Any], positions: tuple[int, ...]) -> tuple:
    """Per tensor argument at `positions`: type, dtype, shape, strides, device (flat).
    Raises AttributeError or TypeError for something that is not a tensor."""
    sig: list[Any] = []
    for i in positions:
        x = args[i]
        sig += (type(x), x.dtype, x.shape, x.stride(), x.device)
    return tuple(sig)


class _Accepted:
    """What a remembered signature implies: where to launch, how, and the per-signature
    values (dim-bound scalars, output shapes, tensor-map shapes)."""

    __slots__ = ("fixed", "grid", "launch", "maps", "outputs", "pointer_slots")

    def __init__(self, launch: DirectLaunch | None, grid: tuple[int, int, int] | None,
                 pointer_slots: tuple, fixed: tuple, outputs: tuple, maps: tuple):
        self.launch = launch  # None: an empty grid, nothing to launch
        self.grid = grid
        self.pointer_slots = pointer_slots  # the caller's tensors', then the outputs' slots
        self.fixed = fixed  # ((slot, value), ...) of the dim-bound scalars
        self.outputs = outputs  # ((shape, dtype, torch device), ...)
        self.maps = maps  # ((map parameter index, pointer index, shape, encoder), ...)


class FastCall:
    """The remembered signatures of one kernel and the call that uses them."""

    MISS = MISS

    def __init__(self, checker: ArgChecker, launcher: Launcher, smem: int):
        self._checker = checker
        self._launcher = launcher
        self._smem = smem
        self._nargs = len(checker.caller_params)
        plans = checker._tensors
        self._positions = tuple(t.arg for t in plans)
        block = launcher.params
        # (argument position, required alignment or 0) per caller tensor
        self._tensors = tuple((t.arg, t.align) for t in plans)
        self._tensor_slots = tuple(block.slot(t.slot) for t in plans)
        self._scalars = tuple((arg, block.slot(s), p.kind) for s, p, arg in checker._scalars
                              if arg is not None)
        self._slot_of = {t.slot: k for k, t in enumerate(plans)}
        n = len(plans)
        self._slot_of.update({s: n + k for k, (s, _, _) in enumerate(checker._outputs)})
        self._entries: dict[tuple, _Accepted] = {}
        self._empty = checker._empty

    def remember(self, args: Sequence[Any], bound: BoundArgs,
                 grid: tuple[int, int, int] | None) -> None:
        """Keep the signature of `args`, which the checker accepted as `bound` and which
        launched with `grid` (None: empty) on the smem this FastCall was made for."""
        if bound.device is None or not self._positions:
            return  # no tensor says where the call runs
        launch = None
        if grid is not None:
            launch = self._launcher.direct(bound.device, self._smem)
            if launch is None:
                return
        try:
            key = signature(args, self._positions)
        except (AttributeError, TypeError):
            return
        checker = self._checker
        block = self._launcher.params
        fixed = tuple((block.slot(s), bound.values[s]) for s, p, arg in checker._scalars
                      if arg is None)
        where = checker._device(bound.device, args)
        outputs = tuple((tuple(out.shape), dtype, where)
                        for (_, _, dtype), out in zip(checker._outputs, bound.outputs))
        pointer_slots = self._tensor_slots + tuple(block.slot(s) for s, _, _ in checker._outputs)
        maps = tuple((slot, self._slot_of[tensor_slot],
                      tuple(d if isinstance(d, int) else bound.dims[d] for d in tensor.shape),
                      encoder)
                     for slot, tensor_slot, tensor, encoder in checker._maps)
        if len(self._entries) >= _MAX_SIGNATURES:
            self._entries.clear()
        self._entries[key] = _Accepted(launch, grid, pointer_slots, fixed, outputs, maps)

    def __call__(self, args: Sequence[Any], stream: int | None) -> Any:
        """Launch `args` if their signature is known (`stream`: a raw handle, None for torch's
        current stream); else MISS, having launched nothing and returned nothing."""
        if len(args) != self._nargs:
            return MISS
        try:
            entry = self._entries.get(signature(args, self._positions))
        except (AttributeError, TypeError):
            return MISS
        if entry is None:
            return MISS
        pointers = []
        for arg, align in self._tensors:
            p = args[arg].data_ptr()
            if align and p % align:
                return MISS
            pointers.append(p)
        scalars = []
        for arg, slot, kind in self._scalars:
            try:
                scalars.append((slot, scalar_value(kind, args[arg])))
            except BadScalar:
                return MISS
        outputs = []
        if entry.outputs:
            empty = self._empty
            for shape, dtype, where in entry.outputs:
                out = empty(shape, dtype=dtype, device=where)
                outputs.append(out)
                pointers.append(out.data_ptr())
        launch = entry.launch
        if launch is not None:
            if stream is None:
                stream = current_stream(launch.device)
            with launch.lock:
                for slot, p in zip(entry.pointer_slots, pointers):
                    slot.value = p
                for slot, v in scalars:
                    slot.value = v
                for slot, v in entry.fixed:
                    slot.value = v
                if entry.maps and not _maps_held(entry, pointers, launch.block):
                    return MISS
                launch(entry.grid, stream)
        elif entry.maps and not _maps_encode(entry, pointers):
            return MISS
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _maps_held(entry: _Accepted, pointers: list[int], block: Any) -> bool:
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


def _maps_encode(entry: _Accepted, pointers: list[int]) -> bool:
    """Whether the tensor maps of `pointers` encode (an empty grid launches nothing, but the
    checker refuses a tensor that cannot get a map all the same)."""
    try:
        for _, src, shape, encoder in entry.maps:
            encoder(pointers[src], shape)
    except TensorMapError:
        return False
    return True
