"""`tilecraft.recommend`: rank a kernel factory's configurations by the cost model, no GPU needed.

    ranked = tilecraft.recommend(matmul, 4096, 4096, 4096, topk=5)
    print(ranked)                       # a table, best first
    best = matmul(4096, 4096, 4096, **ranked[0].config)

For each configuration of the space (space.py: declared, or from the factory's keyword
parameters) the factory builds its kernel and the pass pipeline lowers it (no CUDA code, no
NVRTC); a configuration the factory or a pass refuses (shared memory, a layout, a tile that
does not divide) or that cannot run (cost.py: registers, occupancy) is dropped and kept in
`ranked.rejected` with the reason. The rest are ranked by predicted time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import PrimFunc
from tilecraft.targets import Target

from .cost import Estimate, estimate
from .space import candidate_space, configurations


@dataclass(frozen=True)
class Candidate:
    """One configuration: `config` (the tuned keyword arguments) and its Estimate."""

    config: dict[str, Any]
    estimate: Estimate

    @property
    def predicted_time(self) -> float:
        """Seconds."""
        return self.estimate.time

    @property
    def tflops(self) -> float:
        return self.estimate.tflops

    @property
    def gbps(self) -> float:
        return self.estimate.gbps

    @property
    def intensity(self) -> float:
        return self.estimate.intensity

    @property
    def utilization(self) -> float:
        return self.estimate.utilization

    @property
    def bytes(self) -> dict[str, float]:
        """Bytes per memory level over the whole grid."""
        e = self.estimate
        return {"hbm": e.hbm_bytes, "l2": e.l2_bytes, "shared": e.shared_bytes}


class Recommendation(list):
    """Candidates, best first; `rejected` holds (config, reason) of the dropped ones and
    `considered` how many configurations were tried. `str()` is a table."""

    def __init__(self, items: Sequence[Candidate], rejected: list[tuple[dict, str]],
                 considered: int, name: str):
        super().__init__(items)
        self.rejected = rejected
        self.considered = considered
        self.name = name

    def __str__(self) -> str:
        if not self:
            return f"{self.name}: no configuration fits ({len(self.rejected)} rejected)"
        names = list(self[0].config)
        head = ["#", *names, "time us", "TFLOP/s", "GB/s", "AI", "bound", "util", "occ",
                "waves"]
        rows = [[str(i + 1), *[str(c.config[n]) for n in names],
                 f"{c.predicted_time * 1e6:.1f}", f"{c.tflops:.0f}", f"{c.gbps:.0f}",
                 f"{c.intensity:.1f}", c.estimate.bound, f"{c.utilization:.0%}",
                 str(c.estimate.occupancy), str(c.estimate.waves)]
                for i, c in enumerate(self)]
        widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head))]
        title = (f"{self.name}: {len(self)} best of {self.considered} configurations "
                 f"({len(self.rejected)} do not fit)")
        if any(c.estimate.dynamic for c in self):
            title += "; dynamic sizes count as 1: compare the rows, not their times"
        lines = [title,
                 "  ".join(h.rjust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
        return "\n".join(lines)

    __repr__ = __str__


def recommend(factory: Any, *args: Any, space: Mapping[str, Sequence[Any]] | None = None,
              topk: int = 10, target: Target | None = None, **fixed: Any) -> Recommendation:
    """Rank the configurations of `factory` (a @tilecraft.jit factory or a plain function that
    returns a T.prim_func) called with `args` and the keyword arguments `fixed`, best first;
    the `topk` best are returned. Raises TC330 when none fits."""
    from tilecraft.jit_options import call_span
    from tilecraft.targets import current_target

    span = call_span()
    from tilecraft.jit_poly import JITPolymorphic

    if isinstance(factory, JITPolymorphic) or not callable(factory):
        raise TilecraftError("TC321", span, func="recommend", detail=f"{type(factory).__name__}"
                             " is not a kernel factory", hint="pass a function whose keyword "
                             "parameters are its tile sizes and that returns a T.prim_func")
    fn = getattr(factory, "jit_factory", factory)  # under @tilecraft.autotune
    fn = getattr(fn, "factory", fn)  # a JITFactory's plain function
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise TilecraftError("TC321", span, func="recommend", detail=f"topk must be an "
                             f"integer >= 1, not {topk!r}", hint="topk=10")
    target = target or current_target()
    configs = configurations(candidate_space(fn, args, fixed, space, span))
    ranked: list[Candidate] = []
    rejected: list[tuple[dict, str]] = []
    seen: set = set()
    for config in configs:
        try:
            func = fn(*args, **fixed, **config)
        except (TilecraftError, AssertionError, ValueError) as err:  # the factory refuses it
            rejected.append((config, f"{type(err).__name__}: {err}".splitlines()[0]))
            continue
        func = getattr(func, "func", func)  # a factory that returns its JITKernel
        if not isinstance(func, PrimFunc):
            raise TilecraftError("TC321", span, func="recommend", detail=f"`{fn.__name__}` "
                                 f"returned a {type(func).__name__}, not a T.prim_func",
                                 hint="pass a kernel factory: a function whose keyword "
                                 "parameters are its tile sizes and that returns a T.prim_func")
        try:
            key = _structure(func)
            if key in seen:  # another configuration built the same kernel (a clamped tile)
                rejected.append((config, "the same kernel as a configuration before it"))
                continue
            seen.add(key)
            ranked.append(Candidate(config, estimate(func, target)))
        except TilecraftError as err:
            rejected.append((config, _reason(err)))
    ranked.sort(key=lambda c: c.predicted_time)
    name = getattr(fn, "__name__", "kernel")
    if not ranked:
        first = rejected[0][1].splitlines()[0] if rejected else "an empty space"
        raise TilecraftError("TC330", span, detail=f"all {len(configs)} configurations of "
                             f"`{name}` were refused; the first: {first}",
                             hint="declare a space= with smaller tiles")
    return Recommendation(ranked[:topk], rejected, len(configs), name)


def _reason(err: TilecraftError) -> str:
    """The refusal's message without TC330's own "no configuration fits: " (it says that of a
    single configuration; the final TC330 says it of all)."""
    text = str(getattr(err, "message", err)).splitlines()[0]
    return text.removeprefix("no configuration fits: ")


def _structure(func: Any) -> str:
    """The kernel's Tile IR script: two configurations that build the same script are one."""
    return func.script()
