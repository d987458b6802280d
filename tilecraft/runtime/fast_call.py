"""The per-call fast path of a RuntimeKernel: calls whose argument signature was accepted before.

The argument checker (args.py) decides a call from, per tensor argument, its type, dtype, shape,
strides and device (contiguity and the dynamic dims follow from shape and strides; where the
parameter must be contiguous, `is_contiguous()` is all the checker asks of the strides, and the
cheaper call stands for them in the signature), plus two
things that change with the data: each tensor's address (its alignment; its overlap with the
others) and the scalars' values. Once the checker has accepted a call and its launch went out
through ctypes (launch.py), `FastCall.remember` keeps that signature with what followed from
it: the device, the grid (already checked against CUDA's limits), the outputs' shapes, the
dim-bound scalars' values, the tensor maps' shapes and the tensors' byte spans. A later call with a known signature reads each tensor's data pointer
(alignment: one modulo), converts its scalars, allocates its outputs, writes the parameter
block's slots and calls cuLaunchKernel once. Where the kernel writes a tensor, two comparisons
per pair of tensors with the signature's byte spans refuse overlapping arguments (TC317):

    fast = FastCall(checker, launcher, smem)
    out = fast.call(args, stream)     # MISS, or what the kernel returns (outputs or None)
    fast.remember(args, bound, grid)  # after the checker accepted `args` and the launch went out
    print(fast.source)                # the call, written for this kernel's parameters

Anything unusual is a miss (`MISS`), never an error: an unknown signature, something that is
not a tensor, a misaligned pointer, tensors that overlap where one is written, a scalar the
checker would refuse, a tensor map that does not encode. The caller then runs the full checker, which raises its usual error at the user's
line (or accepts, launches and remembers). So the fast path refuses exactly what the checker
refuses; data pointers are read at every call, never remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .arg_values import BadScalar, scalar_value
from .args import ArgChecker, BoundArgs, byte_range
from .launch import DirectLaunch, Launcher, current_stream
from .tensor_map import TensorMapError

#: "not known here: run the checker", as Python's binary operators say "ask the other operand"
MISS: Any = NotImplemented
_MAX_SIGNATURES = 256  # remembered per kernel (each new shape of a dynamic dim is one)


def signature(args: Sequence[Any], positions: tuple[int, ...],
              contiguous: tuple[bool, ...]) -> tuple:
    """Per tensor argument at `positions`: type, dtype, shape, strides (`is_contiguous()` where
    `contiguous` says the parameter must be), device (flat). The generated call builds the same
    tuple. Raises (AttributeError, TypeError, torch's RuntimeError) for what is not a dense
    tensor."""
    sig: list[Any] = []
    for i, c in zip(positions, contiguous):
        x = args[i]
        sig += (type(x), x.dtype, x.shape, x.is_contiguous() if c else x.stride(), x.device)
    return tuple(sig)


class _Accepted:
    """What a remembered signature implies: where to launch, how, and the per-signature
    values (dim-bound scalars, output shapes, tensor-map shapes)."""

    __slots__ = ("ends", "fixed", "grid", "launch", "maps", "outputs")

    def __init__(self, launch: DirectLaunch | None, grid: tuple[int, int, int] | None,
                 fixed: tuple, outputs: tuple, maps: tuple, ends: tuple):
        self.launch = launch  # None: an empty grid, nothing to launch
        self.grid = grid
        self.fixed = fixed  # ((slot, value), ...) of the dim-bound scalars
        self.outputs = outputs  # ((shape, dtype, torch device), ...)
        self.maps = maps  # ((map parameter index, pointer index, shape, encoder), ...)
        self.ends = ends  # per tensor: the bytes past its data pointer its elements span


class FastCall:
    """The remembered signatures of one kernel and the call that uses them."""

    def __init__(self, checker: ArgChecker, launcher: Launcher, smem: int):
        self._checker = checker
        self._launcher = launcher
        self._smem = smem
        self._nargs = len(checker.caller_params)
        plans = checker._tensors
        self._positions = tuple(t.arg for t in plans)
        self._contiguous = tuple(t.strides is None for t in plans)
        block = launcher.params
        # (index among the caller's tensors, required alignment) where one is required
        self._aligned = tuple((k, t.align) for k, t in enumerate(plans) if t.align)
        self._scalars = tuple((arg, block.slot(s), p.kind) for s, p, arg in checker._scalars
                              if arg is not None)
        self._slot_of = {t.slot: k for k, t in enumerate(plans)}  # parameter -> pointer index
        n = len(plans)
        self._slot_of.update({s: n + k for k, (s, _, _) in enumerate(checker._outputs)})
        self._entries: dict[tuple, _Accepted] = {}
        self.source = ""
        #: call(args, stream): what the kernel returns, or MISS
        self.call = self._make_call()

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
            key = signature(args, self._positions, self._contiguous)
        except Exception:  # noqa: BLE001 - what the call would miss on: nothing to remember
            return
        checker = self._checker
        block = self._launcher.params
        fixed = tuple((block.slot(s), bound.values[s]) for s, p, arg in checker._scalars
                      if arg is None)
        where = checker._device(bound.device, args)
        outputs = tuple((tuple(out.shape), dtype, where)
                        for (_, _, dtype), out in zip(checker._outputs, bound.outputs))
        maps = tuple((slot, self._slot_of[tensor_slot],
                      tuple(d if isinstance(d, int) else bound.dims[d] for d in tensor.shape),
                      encoder)
                     for slot, tensor_slot, tensor, encoder in checker._maps)
        ends = ()
        if checker._pairs:  # the spans follow from shape, strides and dtype: the signature's
            ranges = [byte_range(args[i].shape, args[i].stride(), args[i].element_size())
                      for i in self._positions]
            if any(start for start, _ in ranges):
                return  # an element below the data pointer (torch has none): the checker's
            ends = tuple(end for _, end in ranges)
        if len(self._entries) >= _MAX_SIGNATURES:
            self._entries.clear()
        self._entries[key] = _Accepted(launch, grid, fixed, outputs, maps, ends)

    def _make_call(self) -> Callable[[Sequence[Any], int | None], Any]:
        """The call as straight-line Python written for this parameter list (`self.source`):
        a loop over the parameters would cost a third more than the work itself."""
        checker = self._checker
        block = self._launcher.params
        n = len(self._positions)
        tensors = [f"t{k}" for k in range(n)]
        outs = [f"o{k}" for k in range(len(checker._outputs))]
        pointers = [f"p{k}" for k in range(n + len(outs))]
        env: dict[str, Any] = {"MISS": MISS, "entries": self._entries, "empty": checker._empty,
                               "current_stream": current_stream, "scalar_value": scalar_value,
                               "BadScalar": BadScalar, "maps_held": _maps_held,
                               "maps_encode": _maps_encode}
        if not tensors:  # no tensor says where the call runs: always the checker
            self.source = "def call(args, stream):\n    return MISS\n"
            exec(self.source, env)
            return env["call"]
        sig = ", ".join(f"type({t}), {t}.dtype, {t}.shape, "
                        f"{t}.{'is_contiguous' if c else 'stride'}(), {t}.device"
                        for t, c in zip(tensors, self._contiguous))
        lines = [
            "def call(args, stream):",
            f"    if len(args) != {self._nargs}:",
            "        return MISS",
            "    try:",
            *[f"        {t} = args[{i}]" for t, i in zip(tensors, self._positions)],
            f"        entry = entries.get(({sig},))",
            "    except Exception:  # not a tensor, or one without strides: the checker says",
            "        return MISS",
            "    if entry is None:",
            "        return MISS",
            *[f"    p{k} = {t}.data_ptr()" for k, t in enumerate(tensors)],
            *[f"    if p{k} % {align}:\n        return MISS" for k, align in self._aligned],
        ]
        if checker._pairs:  # [p_i, p_i + e_i) and [p_j, p_j + e_j) must not intersect
            lines.append("    e = entry.ends")
            lines += [f"    if p{i} < p{j} + e[{j}] and p{j} < p{i} + e[{i}]:\n        return MISS"
                      for i, j in checker._pairs]
        writes = [f"            s{k}.value = {p}" for k, p in enumerate(pointers)]
        env.update({f"s{k}": block.slot(t.slot) for k, t in enumerate(checker._tensors)})
        env.update({f"s{n + k}": block.slot(s) for k, (s, _, _) in enumerate(checker._outputs)})
        if self._scalars:
            lines.append("    try:")
            for k, (arg, slot, kind) in enumerate(self._scalars):
                lines.append(f"        v{k} = scalar_value({kind!r}, args[{arg}])")
                writes.append(f"            c{k}.value = v{k}")
                env[f"c{k}"] = slot
            lines += ["    except BadScalar:", "        return MISS"]
        for k, (o, (_, p, _)) in enumerate(zip(outs, checker._outputs)):
            # torch.empty parses sizes given one by one a third faster than a tuple of them
            size = "*shape" if p.shape else "()"
            lines += [f"    shape, dtype, where = entry.outputs[{k}]",
                      f"    {o} = empty({size}, dtype=dtype, device=where)",
                      f"    p{n + k} = {o}.data_ptr()"]
        if any(arg is None for _, _, arg in checker._scalars):
            writes += ["            for slot, v in entry.fixed:", "                slot.value = v"]
        listed = f"({', '.join(pointers)},)"
        if checker._maps:  # the maps' bytes are in the block already unless an address moved
            env["held"] = block.map_held
            unchanged = " and ".join(
                f"held.get({slot}) == ({pointers[self._slot_of[src]]}, maps[{k}][2])"
                for k, (slot, src, _, _) in enumerate(checker._maps))
            writes += ["            maps = entry.maps",
                       f"            if not ({unchanged}):",
                       f"                if not maps_held(entry, {listed}, launch.block):",
                       "                    return MISS"]
        lines += [
            "    launch = entry.launch",
            "    if launch is not None:",
            "        if stream is None:",
            "            stream = current_stream(launch.device)",
            "        with launch.lock:",
            *writes,
            "            launch(entry.grid, stream)",
        ]
        if checker._maps:
            lines += [f"    elif not maps_encode(entry, {listed}):", "        return MISS"]
        lines.append(f"    return {outs[0] if len(outs) == 1 else '(' + ', '.join(outs) + ',)'}"
                     if outs else "    return None")
        self.source = "\n".join(lines) + "\n"
        exec(compile(self.source, f"<tilecraft fast call of {checker.kernel}>", "exec"), env)
        return env["call"]


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
